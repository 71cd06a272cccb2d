"""structret index SOURCE: a folder of code indexed in one command, kept fresh by running it again."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from _tiny_models import tiny_bert_dir  # noqa: F401  (fixture)
from structret.cli import cli

PYTHON = '''def read_config(path):
    """Read the configuration file and return its settings."""
    with open(path) as f:
        return dict(line.split("=", 1) for line in f)


def test_read_config():
    assert read_config


def _tiny(x):
    return x
'''
JAVASCRIPT = '''function debounce(fn, wait) {
  let timer;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), wait); };
}
'''


def run(*args, code=0):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == code, result.output
    return result


@pytest.fixture
def project(tmp_path, fresh_registry):
    root = tmp_path / "project"
    (root / "web").mkdir(parents=True)
    (root / "config.py").write_text(PYTHON)
    (root / "web" / "util.js").write_text(JAVASCRIPT)
    (root / "notes.txt").write_text("not code")
    return root


def test_a_source_folder_is_indexed_and_kept_fresh(project, tmp_path, tiny_bert_dir, monkeypatch):
    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path / "cache"))
    idx = tmp_path / "idx"
    args = ["index", project, "--backbone", "hf-encoder", "--model", tiny_bert_dir, "--out", idx]
    first = run(*args).stdout
    # every function, tests and one-liners too: an index of one's own code, not training pairs
    assert "indexed 4 functions" in first and "1 javascript, 3 python" in first
    assert "4 new or edited, 0 gone or edited, 0 unchanged; 4 encoded" in first
    meta = json.loads((idx / "structret.json").read_text())
    assert meta["source"]["path"] == str(project) and meta["lexical"]["retriever"] == "bm25-fields"
    found = run("search", idx, "debounce", "-k", "4", "--lines", "1").stdout  # a random tiny model: all four
    assert "util.js" in found and "function debounce" in found and "def test_read_config" in found

    again = run(*args).stdout
    assert "0 new or edited, 0 gone or edited, 4 unchanged; 0 encoded, 4 vectors reused" in again

    (project / "web" / "util.js").write_text(JAVASCRIPT + "\nfunction clampValue(value, low, high) {\n"
                                             "  return Math.min(high, Math.max(low, value));\n}\n")
    (project / "config.py").write_text(PYTHON.replace("def _tiny(x):\n    return x\n", ""))
    edited = run(*args).stdout
    assert "indexed 4 functions" in edited and "1 new or edited, 1 gone or edited, 3 unchanged; 1 encoded" in edited
    found = run("search", idx, "clampValue", "-k", "4", "--lines", "1").stdout
    assert "function clampValue" in found and "def _tiny" not in found


def test_a_source_folder_goes_alone(project, tmp_path):
    out = run("index", project, "--data", "codesearchnet:x.jsonl", "--out", tmp_path / "idx", code=2).output
    assert "SOURCE indexes a folder of code" in out
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "README").write_text("nothing to mine")
    out = run("index", empty, "--out", tmp_path / "idx2", code=1).output
    assert "holds no file a registered miner reads" in out


def test_a_trained_run_fuses_as_its_recipe_says_unless_told_otherwise(project, tmp_path, tiny_bert_dir, monkeypatch):
    import gzip

    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path / "cache"))
    rows = tmp_path / "pairs.jsonl.gz"
    with gzip.open(rows, "wt") as f:
        for i, word in enumerate(["read", "parse", "send", "sort"]):
            f.write(json.dumps({"code": f"def {word}_{i}(x):\n    return x", "docstring_tokens": [word, "it", "all"],
                                "partition": "train", "language": "python", "url": f"u{i}"}) + "\n")
    run_dir = tmp_path / "run"
    run("train", "--backbone", "hf-encoder", "--model", tiny_bert_dir, "--data", f"codesearchnet:{rows}",
        "--set", "max_steps=1", "--set", "batch_size=2", "--set", "fusion=rrf:0.4", "--out", run_dir)
    fused = {}
    for name, extra in (("recorded", []), ("given", ["--fusion", "minmax:0.2"])):
        run("index", project, "--model", run_dir, "--out", tmp_path / name, *extra)
        fused[name] = json.loads((tmp_path / name / "structret.json").read_text())["lexical"]["fusion"]
    assert (fused["recorded"]["method"], fused["recorded"]["weight"]) == ("rrf", 0.4)
    assert (fused["given"]["method"], fused["given"]["weight"]) == ("minmax", 0.2)
    out = run("train", "--backbone", "hf-encoder", "--model", tiny_bert_dir, "--data", f"codesearchnet:{rows}",
              "--set", "fusion=best:0.4", "--out", tmp_path / "bad", code=1).output
    assert "zscore, minmax or rrf" in out
