"""Long encodes: ``structret encode --shard I/N``, resumable chunks, and ``structret index`` from shards."""

import gzip
import json

import numpy as np
import pytest
from click.testing import CliRunner

from _tiny_models import tiny_bert_dir  # noqa: F401  (fixture)
from structret import embeddings
from structret.artifacts import write_checksums
from structret.cli import cli
from structret.embeddings import Shard, parse_shard, shard_from_env
from structret.errors import StructretError

WORDS = ["config", "date", "mail", "socket", "thread", "queue", "parser", "cache", "token", "stream", "image"]


def run(*args, code=0):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == code, result.output
    return result.output


@pytest.fixture
def corpus(tmp_path, fresh_registry):
    """codesearchnet:PATH of 11 mined functions."""
    src = tmp_path / "src"
    src.mkdir()
    for n, word in enumerate(WORDS):
        (src / f"{word}.py").write_text(
            f'def handle_{word}(value):\n    """Handle the {word} value and return it changed."""\n'
            f"    result = value + {n}\n    return result\n"
        )
    out = tmp_path / "corpus.jsonl.gz"
    assert "11 kept" in run("mine", src, "--language", "python", "--out", out)
    return f"codesearchnet:{out}"


def encode(data, model, out, *extra, code=0):
    return run("encode", "--data", data, "--backbone", "hf-encoder", "--model", model, "--out", out, *extra, code=code)


def index_vectors(index_dir):
    ids = json.loads((index_dir / "ids.json").read_text())
    return ids, np.load(index_dir / "vectors.npy")


def test_shards_make_the_same_index_as_one_run(tmp_path, corpus, tiny_bert_dir):
    whole, sharded = tmp_path / "whole", tmp_path / "sharded"
    encode(corpus, tiny_bert_dir, whole)
    for i in range(3):
        output = encode(corpus, tiny_bert_dir, sharded, "--shard", f"{i}/3")
        assert f"to {sharded / f'shard-{i}-of-3'} (shard {i}/3: rows" in output
    assert sorted(p.name for p in sharded.iterdir()) == ["shard-0-of-3", "shard-1-of-3", "shard-2-of-3"]
    counts = [json.loads((sharded / f"shard-{i}-of-3" / "structret.json").read_text())["count"] for i in range(3)]
    assert counts == [3, 4, 4]  # rows i*11//3 to (i+1)*11//3

    run("index", "--embeddings", whole, "--out", tmp_path / "idx-whole")
    output = run("index", "--embeddings", sharded, "--out", tmp_path / "idx-sharded")
    assert "indexed 11 vectors from 3 shards" in output
    ids_whole, vectors_whole = index_vectors(tmp_path / "idx-whole")
    ids_sharded, vectors_sharded = index_vectors(tmp_path / "idx-sharded")
    assert ids_sharded == ids_whole  # corpus order
    # batches differ (a shard is batched on its own), so padding differs: equal up to float noise
    np.testing.assert_allclose(vectors_sharded, vectors_whole, atol=1e-5)
    with gzip.open(tmp_path / "idx-sharded" / "texts.jsonl.gz", "rt") as f:
        assert [json.loads(line)["id"] for line in f] == ids_whole  # the shards' texts, concatenated
    assert "handle_config" in run("search", tmp_path / "idx-sharded", "the config value", "-k", "11")

    # shards copied to several places: each folder given once
    (tmp_path / "elsewhere").mkdir()
    (sharded / "shard-2-of-3").rename(tmp_path / "elsewhere" / "shard-2-of-3")
    output = run("index", "--embeddings", sharded, "--embeddings", tmp_path / "elsewhere" / "shard-2-of-3",
                 "--out", tmp_path / "idx-two")
    assert index_vectors(tmp_path / "idx-two")[0] == ids_whole


def test_missing_and_mismatched_shards_are_named(tmp_path, corpus, tiny_bert_dir):
    out = tmp_path / "emb"
    encode(corpus, tiny_bert_dir, out, "--shard", "0/3")
    encode(corpus, tiny_bert_dir, out, "--shard", "2/3")
    (out / "shard-1-of-3.chunks" / "00000").mkdir(parents=True)  # as an interrupted shard leaves it
    output = run("index", "--embeddings", out, "--out", tmp_path / "idx", code=1)
    assert "1 of 3 shards missing (1/3); found shard-0-of-3, shard-2-of-3" in output
    assert "shard-1-of-3.chunks holds 0 finished chunks (being encoded, or interrupted)" in output
    assert "--shard 1/3" in output and "Traceback" not in output
    assert not (tmp_path / "idx").exists()

    encode(corpus, tiny_bert_dir, out, "--shard", "1/3")
    meta_file = out / "shard-2-of-3" / "structret.json"
    meta = json.loads(meta_file.read_text())
    meta_file.write_text(json.dumps({**meta, "text_format": "product"}))
    write_checksums(meta_file.parent)  # as a shard encoded with another text format would have them
    output = run("index", "--embeddings", out, "--out", tmp_path / "idx", code=1)
    assert "differ in text_format ('product' vs '')" in output and "shard-2-of-3" in output

    meta_file.write_text(json.dumps(meta))
    write_checksums(meta_file.parent)
    encode(corpus, tiny_bert_dir, out, "--shard", "0/2")  # a stray shard of another split of the corpus
    output = run("index", "--embeddings", out, "--out", tmp_path / "idx", code=1)
    assert "shard-0-of-2 one of 2; encode all shards with the same N" in output

    output = run("index", "--embeddings", tmp_path, "--out", tmp_path / "idx", code=1)
    assert "holds neither embeddings" in output

    encode(corpus, tiny_bert_dir, tmp_path / "mixed")
    encode(corpus, tiny_bert_dir, tmp_path / "mixed", "--shard", "0/1")
    output = run("index", "--embeddings", tmp_path / "mixed", "--out", tmp_path / "idx", code=1)
    assert "holds whole-corpus embeddings and also 1 shard folders (shard-0-of-1, ...)" in output


def test_encode_resumes_from_its_finished_chunks(tmp_path, corpus, tiny_bert_dir, monkeypatch):
    real = embeddings.encode_resumably
    calls = []

    def counting(stop_after=None):
        def wrapped(target, ids, texts, encode_batch, meta, **options):
            def encode_and_count(batch):
                if stop_after is not None and len(calls) == stop_after:
                    raise KeyboardInterrupt  # Ctrl-C while the next chunk is encoded
                calls.append(len(batch))
                return encode_batch(batch)
            return real(target, ids, texts, encode_and_count, meta, **options)
        monkeypatch.setattr(embeddings, "encode_resumably", wrapped)

    out = tmp_path / "emb"
    counting(stop_after=2)
    result = CliRunner().invoke(cli, ["encode", "--data", corpus, "--backbone", "hf-encoder", "--model",
                                      str(tiny_bert_dir), "--out", str(out), "--shard", "1/2", "--chunk-rows", "2"])
    assert result.exit_code == 1 and calls == [2, 2]  # shard 1/2 is rows 5..11: chunks of 2, 2, 2
    chunks = out / "shard-1-of-2.chunks"
    assert sorted(p.name for p in chunks.iterdir()) == ["00000", "00001"]
    assert not (out / "shard-1-of-2").exists()

    calls.clear()
    counting()
    output = encode(corpus, tiny_bert_dir, out, "--shard", "1/2", "--chunk-rows", "2")
    assert calls == [2]  # only the third chunk
    assert "2 of 3 chunks were already done" in output
    assert not chunks.exists()  # removed once the shard is assembled

    calls.clear()
    assert "already holds these 6 documents vectors" in encode(corpus, tiny_bert_dir, out, "--shard", "1/2",
                                                                 "--chunk-rows", "2")
    assert calls == []

    fresh = tmp_path / "fresh"
    encode(corpus, tiny_bert_dir, fresh, "--shard", "1/2", "--chunk-rows", "2")
    resumed = np.load(out / "shard-1-of-2" / "embeddings.npy")
    assert np.array_equal(resumed, np.load(fresh / "shard-1-of-2" / "embeddings.npy"))  # same chunks, same bytes
    assert resumed.shape == (6, 32)


def test_a_changed_or_damaged_chunk_is_encoded_again(tmp_path):
    from structret.embeddings import encode_resumably

    def encode_batch(batch):
        seen.append(list(batch))
        return np.full((len(batch), 4), len(seen), dtype=np.float32)

    seen = []
    ids, texts = [f"d{i}" for i in range(5)], [f"text {i}" for i in range(5)]
    meta = {"what": "documents", "backbone": "x", "model": "m"}
    target = tmp_path / "emb"

    class Stop(Exception):
        pass

    def stop_at_third(batch):
        if len(seen) == 2:
            raise Stop
        return encode_batch(batch)

    with pytest.raises(Stop):
        encode_resumably(target, ids, texts, stop_at_third, meta, chunk_rows=2, show_progress=False)
    (target.with_name("emb.chunks") / "00001" / "embeddings.npy").write_bytes(b"damaged")
    texts[0] = "text 0, edited"
    seen.clear()
    report = encode_resumably(target, ids, texts, encode_batch, meta, chunk_rows=2, show_progress=False)
    # chunk 0 has new text, chunk 1 is damaged, chunk 2 was never written
    assert seen == [["text 0, edited", "text 1"], ["text 2", "text 3"], ["text 4"]] and report.chunks_reused == 0


def test_shard_from_the_launcher_environment(tmp_path, corpus, tiny_bert_dir, monkeypatch):
    assert shard_from_env({"WORLD_SIZE": "4", "RANK": "3"}) == Shard(3, 4)
    assert shard_from_env({"WORLD_SIZE": "1", "RANK": "0"}) is None and shard_from_env({}) is None
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    result = CliRunner().invoke(cli, ["encode", "--data", corpus, "--backbone", "hf-encoder", "--model",
                                      str(tiny_bert_dir), "--out", str(tmp_path / "emb")])
    assert result.exit_code == 0, result.output
    assert "encoding shard 1/2 (RANK/WORLD_SIZE of the launcher)" in result.output
    assert (tmp_path / "emb" / "shard-1-of-2" / "structret.json").is_file()


def test_bad_shard_specs():
    assert parse_shard(" 2/5 ") == Shard(2, 5) and Shard(2, 5).rows(11) == (4, 6)
    for spec in ("5/5", "1/0", "-1/3", "1:3", "one/two"):
        with pytest.raises(StructretError, match="give I/N with 0 <= I < N"):
            parse_shard(spec)


def test_encode_refuses_a_bad_shard_before_loading_anything(tmp_path):
    output = run("encode", "--data", "codesearchnet:nowhere.jsonl.gz", "--shard", "3/3", "--out", tmp_path, code=1)
    assert "--shard '3/3': give I/N with 0 <= I < N" in output


@pytest.mark.parametrize("command", ["mine", "encode", "index"])
def test_help_has_examples_of_the_long_job_options(command):
    output = run(command, "--help")
    assert "Example" in output
    assert {"mine": "--workers 8", "encode": "--shard 0/4", "index": "--embeddings runs/emb"}[command] in output
