"""An artifact that cannot be checked is refused, through the CLI (issue 14 item 4).

Index directories, run directories (final/ and checkpoints) and embedding folders (and
their shards and chunks) carry a checksums.json listing every file. Each test damages one
the way a user, a copy or an older structret would, and checks what the command says:
exit 1, one line without a traceback, the file, and the command that rebuilds it; or,
with --no-verify, the command runs and says on stderr what it did not check.
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from _tiny_models import _WORDS, one_torch_thread, tiny_bert_dir  # noqa: F401  (fixtures)
from structret.artifacts import CHECKSUMS_FILE
from structret.cli import cli
from structret.registry import reset_registry


def structret(*args, code=0):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> str:
    """12 CodeSearchNet rows, all in the train split."""
    path = tmp_path_factory.mktemp("csn") / "train.jsonl.gz"
    rng = random.Random(0)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for i in range(12):
            a, b, name = (rng.choice(_WORDS) for _ in range(3))
            doc = [rng.choice(_WORDS) for _ in range(rng.randint(3, 9))]
            f.write(json.dumps({"repo": "tiny/repo", "path": f"m{i}.py", "func_name": f"{name}_{i}",
                                "language": "python", "code": f"def {name}_{i}({a}, {b}):\n    return {a} + {b}\n",
                                "docstring_tokens": doc, "docstring": " ".join(doc), "partition": "train",
                                "url": f"https://x/{i}"}) + "\n")
    return f"codesearchnet:{path}"


@pytest.fixture(scope="module")
def built_index(tmp_path_factory, data, tiny_bert_dir) -> Path:
    reset_registry()
    idx = tmp_path_factory.mktemp("built") / "idx"
    structret("index", "--data", data, "--split", "train", "--backbone", "hf-encoder", "--model", tiny_bert_dir,
              "--out", idx)
    return idx


@pytest.fixture
def idx(tmp_path, built_index) -> Path:
    """A fresh copy of an index 'structret index' wrote, to damage."""
    return Path(shutil.copytree(built_index, tmp_path / "idx"))


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, data, tiny_bert_dir) -> Path:
    """A finished three-step run with checkpoint-000001, checkpoint-000002 and final/."""
    reset_registry()
    run = tmp_path_factory.mktemp("trained") / "run"
    settings = {"batch_size": 4, "max_steps": 3, "checkpoint_every": 1, "keep_checkpoints": 0, "query_max_len": 16,
                "passage_max_len": 32, "log_every": 1, "seed": 7}
    structret("train", "--backbone", "hf-encoder", "--model", tiny_bert_dir, "--objective", "sda", "--data", data,
              *[f"--set={k}={v}" for k, v in settings.items()], "--out", run)
    return run


def flip_last_byte(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))


def search(idx, *extra, code=0):
    return structret("search", idx, "add two numbers", "-k", "3", *extra, code=code)


# --- index directories ---------------------------------------------------------------------------


def test_an_index_without_checksums_and_with_a_flipped_byte_is_refused(idx):
    (idx / CHECKSUMS_FILE).unlink()
    flip_last_byte(idx / "vectors.npy")  # a changed float: the search would simply rank differently
    result = search(idx, code=1)
    assert f"{idx / CHECKSUMS_FILE} is missing" in result.output
    assert "structret index" in result.output and f"--out {idx}" in result.output  # how to rebuild it
    assert "--no-verify" in result.output
    assert "1. " not in result.output  # no hits


@pytest.mark.parametrize("unlisted", ["vectors.npy", "texts.jsonl.gz", "texts.jsonl.gz.4242.part"])
def test_a_file_the_checksums_do_not_list_is_refused(idx, unlisted):
    sums = json.loads((idx / CHECKSUMS_FILE).read_text())
    if unlisted in sums:
        # a vectors file put in later (checksums taken from elsewhere); texts renamed into place by
        # 'structret index' killed before it listed them
        del sums[unlisted]
        (idx / CHECKSUMS_FILE).write_text(json.dumps(sums))
    else:  # what 'structret index' killed while writing the texts leaves
        (idx / unlisted).write_bytes(b"half")
    result = search(idx, code=1)
    assert f"{idx / unlisted} is not listed in {idx / CHECKSUMS_FILE}" in result.output
    assert "structret index" in result.output


def test_the_checksums_cover_the_texts_and_structret_json(idx):
    sums = json.loads((idx / CHECKSUMS_FILE).read_text())
    assert {"texts.jsonl.gz", "structret.json", "vectors.npy", "ids.json"} <= set(sums)
    meta = json.loads((idx / "structret.json").read_text())
    (idx / "structret.json").write_text(json.dumps({**meta, "metric": "cosine"}))  # would rank differently
    result = search(idx, code=1)
    assert f"Error: {idx / 'structret.json'} has " in result.output and "structret index" in result.output


def test_a_missing_texts_file_is_an_error(idx):
    (idx / "texts.jsonl.gz").unlink()
    result = search(idx, code=1)
    assert f"{idx / 'texts.jsonl.gz'} is missing" in result.output and "structret index" in result.output


def test_no_verify_searches_anyway_and_says_what_it_did_not_check(idx):
    (idx / CHECKSUMS_FILE).unlink()
    (idx / "texts.jsonl.gz").unlink()
    flip_last_byte(idx / "vectors.npy")
    result = search(idx, "--no-verify")
    assert result.stdout.count("  1. ") == 1  # the hits, ids only
    assert result.stderr.count("--no-verify") == 1  # once, though the index is read three times
    assert f"{idx} was not checked against {CHECKSUMS_FILE}" in result.stderr
    assert "texts.jsonl.gz" in result.stderr and "ids only" in result.stderr


def test_no_verify_warns_on_an_intact_index_too(idx):
    result = search(idx, "--no-verify")
    assert f"{idx} was not checked" in result.stderr and "def " in result.stdout


def test_an_index_from_before_texts_were_checksummed_shows_ids_and_says_why(idx):
    sums = json.loads((idx / CHECKSUMS_FILE).read_text())
    for name in ("texts.jsonl.gz", "structret.json"):  # what the previous structret left out
        del sums[name]
    (idx / CHECKSUMS_FILE).write_text(json.dumps(sums))
    result = search(idx)
    assert result.stdout.count("  1. ") == 1 and "def " not in result.stdout
    assert f"{idx / 'texts.jsonl.gz'} is not listed in {CHECKSUMS_FILE}" in result.stderr
    assert "structret index" in result.stderr


def test_load_index_takes_verify_and_warns_once(idx, capsys):
    from structret.errors import ArtifactError
    from structret.search.saved import load_index

    (idx / CHECKSUMS_FILE).unlink()
    with pytest.raises(ArtifactError, match="is missing, so the files of"):
        load_index(idx)
    capsys.readouterr()
    assert len(load_index(idx, verify=False)) == 12
    assert capsys.readouterr().err.count("was not checked") == 1


# --- run directories -----------------------------------------------------------------------------


@pytest.fixture
def run(tmp_path, trained_run) -> Path:
    return Path(shutil.copytree(trained_run, tmp_path / "run"))


def encode_with(model, data, out, *extra, code=0):
    return structret("encode", "--data", data, "--split", "train", "--model", model, "--out", out, *extra, code=code)


@pytest.mark.parametrize("removed", [CHECKSUMS_FILE, "structret.json", "model.safetensors"])
def test_a_run_with_a_file_of_final_removed_is_refused(tmp_path, run, data, removed):
    (run / "final" / removed).unlink()
    result = encode_with(run, data, tmp_path / "emb", code=1)
    assert f"{run / 'final' / removed} is missing" in result.output
    assert "structret train" in result.output
    assert not (tmp_path / "emb").exists()


def test_encode_and_bench_take_no_verify_for_a_run_without_checksums(tmp_path, run, data):
    (run / "final" / CHECKSUMS_FILE).unlink()
    result = encode_with(run, data, tmp_path / "emb", "--no-verify")
    assert f"{run / 'final'} was not checked" in result.stderr and (tmp_path / "emb" / CHECKSUMS_FILE).is_file()
    result = structret("bench", "--data", data, "--split", "train", "--system", run, code=1)
    assert f"{run / 'final' / CHECKSUMS_FILE} is missing" in result.output
    result = structret("bench", "--data", data, "--split", "train", "--system", run, "--no-verify")
    assert f"{run / 'final'} was not checked" in result.stderr and f"| {run} |" in result.stdout


def test_a_command_checks_the_run_it_names_once(tmp_path, run, data):
    # the pre-flight (structret.api.check_names) and the work both open the run: one check, one warning
    (run / "final" / CHECKSUMS_FILE).unlink()
    for args in (["bench", "--data", data, "--split", "train", "--system", run],
                 ["encode", "--data", data, "--split", "train", "--model", run, "--out", tmp_path / "emb"]):
        result = structret(*args, "--no-verify")
        assert result.stderr.count(f"{run / 'final'} was not checked") == 1, args[0]


def test_checked_once_checks_again_when_the_manifest_changes(tmp_path, monkeypatch):
    from structret import artifacts

    folder = tmp_path / "artifact"
    folder.mkdir()
    (folder / "structret.json").write_text('{"kind": "test"}')
    (folder / "data.bin").write_bytes(b"one")
    artifacts.write_checksums(folder)
    checks = []
    real = artifacts._check
    monkeypatch.setattr(artifacts, "_check", lambda *a, **k: checks.append(1) or real(*a, **k))
    with artifacts.checked_once():
        artifacts.verify_checksums(folder)
        artifacts.verify_checksums(folder)
        assert len(checks) == 1
        (folder / "data.bin").write_bytes(b"two, longer")  # an update rewrites its checksums.json
        artifacts.write_checksums(folder)
        artifacts.verify_checksums(folder)
        assert len(checks) == 2
    artifacts.verify_checksums(folder)  # outside a command's scope, every load checks
    assert len(checks) == 3


def test_train_from_a_run_without_checksums_needs_no_verify(tmp_path, run, data):
    (run / "final" / CHECKSUMS_FILE).unlink()
    args = ["train", "--model", run, "--objective", "sda", "--data", data, "--set", "batch_size=4", "--set",
            "max_steps=1", "--set", "passage_max_len=32", "--set", "similarity=cos", "--set", "temperature=0.05",
            "--out", tmp_path / "next"]
    result = structret(*args, code=1)
    assert f"{run / 'final' / CHECKSUMS_FILE} is missing" in result.output and "--no-verify" in result.output
    result = structret(*args, "--no-verify")
    assert result.stderr.count(f"{run / 'final'} was not checked") == 1  # the run is opened once
    assert (tmp_path / "next" / "final" / CHECKSUMS_FILE).is_file()


def test_resume_from_a_checkpoint_without_checksums(run, data):
    shutil.rmtree(run / "final")  # as if the run stopped after its last checkpoint
    (run / "checkpoint-000002" / CHECKSUMS_FILE).unlink()
    result = structret("train", "--out", run, "--resume", code=1)
    assert f"{run / 'checkpoint-000002' / CHECKSUMS_FILE} is missing" in result.output
    assert "checkpoint-000001" in result.output  # what to resume from instead

    result = structret("train", "--out", run, "--resume", "--no-verify")
    assert result.stderr.count(f"{run / 'checkpoint-000002'} was not checked") == 1  # checked once, opened as checked
    assert (run / "final" / CHECKSUMS_FILE).is_file()


# --- embedding folders, shards and chunks ----------------------------------------------------------


def test_an_embeddings_shard_without_checksums_is_refused(tmp_path, data, tiny_bert_dir):
    reset_registry()
    emb = tmp_path / "emb"
    for shard in ("0/2", "1/2"):
        structret("encode", "--data", data, "--split", "train", "--backbone", "hf-encoder", "--model", tiny_bert_dir,
                  "--shard", shard, "--out", emb)
    (emb / "shard-1-of-2" / CHECKSUMS_FILE).unlink()
    result = structret("index", "--embeddings", emb, "--out", tmp_path / "idx", code=1)
    assert f"{emb / 'shard-1-of-2' / CHECKSUMS_FILE} is missing" in result.output
    assert "structret encode" in result.output and "--shard 1/2" in result.output and f"--out {emb}" in result.output
    assert not (tmp_path / "idx").exists()

    result = structret("index", "--embeddings", emb, "--out", tmp_path / "idx", "--no-verify")
    assert f"{emb / 'shard-1-of-2'} was not checked" in result.stderr
    sums = json.loads((tmp_path / "idx" / CHECKSUMS_FILE).read_text())
    assert "texts.jsonl.gz" in sums  # the concatenated texts are part of the new index
    assert "def " in search(tmp_path / "idx").stdout


def test_a_chunk_without_checksums_is_encoded_again(tmp_path):
    from structret.embeddings import encode_resumably

    seen = []

    def encode_batch(batch):
        seen.append(list(batch))
        return np.full((len(batch), 4), len(seen), dtype=np.float32)

    class Stop(Exception):
        pass

    def stop_at_second(batch):
        if len(seen) == 1:
            raise Stop
        return encode_batch(batch)

    ids, texts = [f"d{i}" for i in range(4)], [f"text {i}" for i in range(4)]
    meta = {"what": "documents", "backbone": "x", "model": "m"}
    with pytest.raises(Stop):
        encode_resumably(tmp_path / "emb", ids, texts, stop_at_second, meta, chunk_rows=2, show_progress=False)
    (tmp_path / "emb.chunks" / "00000" / CHECKSUMS_FILE).unlink()
    seen.clear()
    report = encode_resumably(tmp_path / "emb", ids, texts, encode_batch, meta, chunk_rows=2, show_progress=False)
    assert seen == [["text 0", "text 1"], ["text 2", "text 3"]] and report.chunks_reused == 0


def test_a_second_load_trusts_its_stamp_but_a_changed_file_is_hashed_again(idx, monkeypatch):
    import os

    from structret import artifacts

    hashed = []
    sha = artifacts._sha256
    monkeypatch.setattr(artifacts, "_sha256", lambda path: hashed.append(path.name) or sha(path))
    search(idx)
    first = sorted(hashed)
    assert "vectors.npy" in first
    hashed.clear()
    search(idx)
    assert hashed == []  # nothing changed: nothing hashed, O(1) in the index's size
    vectors = idx / "vectors.npy"
    stat = vectors.stat()
    flip_last_byte(vectors)
    os.utime(vectors, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # even with its mtime put back
    result = search(idx, code=1)
    assert "vectors.npy does not match the checksum" in result.output and hashed == ["vectors.npy"]
    flip_last_byte(vectors)  # restored: it verifies again
    search(idx)
    hashed.clear()
    result = structret("verify", idx)  # a full check hashes every file, stamps or not
    assert f"ok  {idx}" in result.output and sorted(hashed) == first


def test_verify_checks_every_artifact_under_a_folder(trained_run):
    result = structret("verify", trained_run)
    checked = [line.split()[1] for line in result.output.splitlines() if line.startswith("ok")]
    assert str(trained_run / "final") in checked and any("checkpoint-" in c for c in checked)
