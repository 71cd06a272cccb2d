"""End to end through the CLI: mine -> encode -> index -> search, with a tiny real model."""

import json

import pytest
from click.testing import CliRunner

from _tiny_models import tiny_bert_dir  # noqa: F401  (fixture)
from structret.artifacts import write_checksums
from structret.cli import cli

SOURCE = {
    "config.py": '''
def read_config(path):
    """Read the configuration file and return its settings as a dict."""
    settings = {}
    for line in open(path):
        key, _, value = line.partition("=")
        settings[key.strip()] = value.strip()
    return settings
''',
    "dates.py": '''
def parse_date(text):
    """Parse an ISO formatted date string into a tuple of integers."""
    year, month, day = text.split("-")
    return int(year), int(month), int(day)
''',
    "mail.py": '''
def send_message(server, message):
    """Send an email message through the given SMTP server connection."""
    server.connect()
    server.sendmail(message)
    server.quit()
''',
}


def run(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture
def mined(tmp_path, fresh_registry):
    src = tmp_path / "src"
    src.mkdir()
    for name, code in SOURCE.items():
        (src / name).write_text(code)
    out = tmp_path / "corpus.jsonl.gz"
    output = run("mine", src, "--language", "python", "--out", out)
    assert "3 kept" in output
    return out


def test_encode_index_search(tmp_path, mined, tiny_bert_dir):
    data = f"codesearchnet:{mined}"
    emb, idx = tmp_path / "emb", tmp_path / "idx"
    run("encode", "--data", data, "--backbone", "hf-encoder", "--model", tiny_bert_dir, "--out", emb)
    meta = json.loads((emb / "structret.json").read_text())
    assert meta["count"] == 3 and meta["backbone"] == "hf-encoder"

    run("index", "--embeddings", emb, "--index", "hnsw", "--index-option", "M=8", "--out", idx)
    output = run("search", idx, "read the configuration file", "-k", "2")
    assert output.count("\n  1. ") + output.count("  1. ") >= 1
    ranked = [line.split()[-1] for line in output.splitlines() if line.strip()[:3] in ("1. ", "2. ")]
    assert len(ranked) == 2 and len(set(ranked)) == 2


def test_index_from_data_and_search_shows_code(tmp_path, mined, tiny_bert_dir):
    idx = tmp_path / "idx"
    run("index", "--data", f"codesearchnet:{mined}", "--backbone", "hf-encoder", "--model", tiny_bert_dir,
        "--index", "flat", "--out", idx)
    output = run("search", idx, "send an email", "-k", "3", "--lines", "1")
    # every document is shown with its first line of code
    assert sum(line.strip().startswith("def ") for line in output.splitlines()) == 3


def test_encode_takes_backbone_options(tmp_path, mined, tiny_bert_dir):
    data = f"codesearchnet:{mined}"
    plain, forced = tmp_path / "plain", tmp_path / "fp32"
    run("encode", "--data", data, "--backbone", "hf-encoder", "--model", tiny_bert_dir, "--out", plain)
    run("encode", "--data", data, "--backbone", "hf-encoder", "--model", tiny_bert_dir, "--out", forced,
        "--backbone-option", "dtype=fp32", "--backbone-option", "pooling=mean")
    import numpy as np

    # pooling=mean reached the backbone: other vectors than the default cls pooling
    assert not np.allclose(np.load(plain / "embeddings.npy"), np.load(forced / "embeddings.npy"))
    # the options key reuse: the same output folder with other options is encoded again, not reused
    output = run("encode", "--data", data, "--backbone", "hf-encoder", "--model", tiny_bert_dir, "--out", plain,
                 "--backbone-option", "pooling=mean")
    assert "nothing to do" not in output
    assert np.allclose(np.load(plain / "embeddings.npy"), np.load(forced / "embeddings.npy"), atol=1e-6)
    result = CliRunner().invoke(cli, ["encode", "--data", data, "--backbone", "hf-encoder", "--model", str(tiny_bert_dir),
                                      "--out", str(tmp_path / "bad"), "--backbone-option", "dtype=fp8"])
    assert result.exit_code == 1 and "fp8" in result.output and "Traceback" not in result.output


def test_a_damaged_texts_file_is_refused_or_costs_the_texts_with_no_verify(tmp_path, mined, tiny_bert_dir):
    idx = tmp_path / "idx"
    run("index", "--data", f"codesearchnet:{mined}", "--backbone", "hf-encoder", "--model", tiny_bert_dir,
        "--index", "flat", "--out", idx)
    texts = idx / "texts.jsonl.gz"
    assert not list(idx.glob("*.part"))  # written under a temporary name, then renamed
    texts.write_bytes(texts.read_bytes()[: texts.stat().st_size // 2])  # a truncated copy
    # the texts are part of the index (listed in its checksums.json): damaged, they stop the search
    result = CliRunner().invoke(cli, ["search", str(idx), "send an email", "-k", "3", "--lines", "1"])
    assert result.exit_code == 1 and "texts.jsonl.gz has" in result.output and "structret index" in result.output
    # unless the user asks for no checks: then ids only, and stderr says why
    result = CliRunner().invoke(cli, ["search", str(idx), "send an email", "-k", "3", "--lines", "1", "--no-verify"])
    assert result.exit_code == 0, result.output
    assert "is damaged" in result.stderr and "structret index" in result.stderr and "--no-verify" in result.stderr
    assert sum(line.strip()[:3] in ("1. ", "2. ", "3. ") for line in result.stdout.splitlines()) == 3


def test_search_refuses_an_index_of_another_model(tmp_path, mined, tiny_bert_dir):
    idx = tmp_path / "idx"
    run("index", "--data", f"codesearchnet:{mined}", "--backbone", "hf-encoder", "--model", tiny_bert_dir,
        "--out", idx)
    meta_file = idx / "structret.json"
    meta = json.loads(meta_file.read_text())
    meta["model"] = "some/other-model"
    meta_file.write_text(json.dumps(meta))
    write_checksums(idx)  # as an index built with vectors of another model would have them
    result = CliRunner().invoke(cli, ["search", str(idx), "anything"])
    assert result.exit_code == 1 and "other-model" in result.output and "Traceback" not in result.output


def test_unknown_index_option_is_a_clean_error(tmp_path, mined, tiny_bert_dir):
    result = CliRunner().invoke(cli, ["index", "--data", f"codesearchnet:{mined}", "--backbone", "hf-encoder",
                                      "--model", str(tiny_bert_dir), "--index", "hnsw",
                                      "--index-option", "ef_constructio=10", "--out", str(tmp_path / "i")])
    assert result.exit_code == 1
    assert "Did you mean 'ef_construction'?" in result.output


def test_negatives_are_top_ranked_non_positives(tmp_path, mined, tiny_bert_dir):
    import gzip

    out = tmp_path / "neg.jsonl.gz"
    output = run("negatives", "--data", f"codesearchnet:{mined}", "--backbone", "hf-encoder", "--model",
                 tiny_bert_dir, "--depth", "3", "--keep", "2", "--out", out)
    assert "3 queries = 3 written" in output
    with gzip.open(out, "rt") as f:
        lines = [json.loads(line) for line in f]
    for line in lines:
        positives = {p["docid"] for p in line["positive_passages"]}
        negatives = {p["docid"] for p in line["negative_passages"]}
        assert len(negatives) == 2 and not positives & negatives
        assert all(p["text"].startswith("def ") for p in line["negative_passages"])


def test_new_model_writes_a_fresh_model_learned_from_the_data(tmp_path, mined, fresh_registry):
    model = tmp_path / "init"
    output = run("new-model", "--data", f"codesearchnet:{mined}", "--option", "linearizer=dfs",
                 "--option", "vocab_size=300", "--option", "dim=16", "--option", "heads=2", "--out", model)
    assert "tokenizer learned from 6 texts" in output
    config = json.loads((model / "config.json").read_text())
    assert config["linearizer"] == "dfs" and config["dim"] == 16
    refused = CliRunner().invoke(cli, ["new-model", "--data", f"codesearchnet:{mined}", "--backbone", "minilm",
                                       "--out", str(tmp_path / "x")])
    assert refused.exit_code == 1 and "pretrained weights" in refused.output
