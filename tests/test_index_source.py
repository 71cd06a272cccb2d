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
    # every function, tests and one-liners too, and the text file: an index of one's own code, not training pairs
    assert "indexed 5 units" in first and "1 javascript, 3 python, 1 text" in first
    assert "5 new or edited, 0 gone or edited, 0 unchanged; 5 encoded" in first
    meta = json.loads((idx / "structret.json").read_text())
    assert meta["source"]["path"] == str(project) and meta["lexical"]["retriever"] == "bm25-project"
    found = run("search", idx, "debounce", "-k", "4", "--lines", "1").stdout  # a random tiny model: all four
    assert "util.js" in found and "function debounce" in found and "def test_read_config" in found

    assert "built from all 3 files (no index there yet)" in first
    again = run(*args).stdout
    # nothing changed: no file read beyond its size and time, the model never loaded
    assert "0 new or edited, 0 gone or edited, 5 unchanged; 0 encoded, 0 vectors reused" in again
    assert "0 of 3 files cut, 0 gone, 0 read and found unchanged" in again

    (project / "web" / "util.js").write_text(JAVASCRIPT + "\nfunction clampValue(value, low, high) {\n"
                                             "  return Math.min(high, Math.max(low, value));\n}\n")
    (project / "config.py").write_text(PYTHON.replace("def _tiny(x):\n    return x\n", ""))
    edited = run(*args).stdout
    # the model's ONNX copy encodes the edited files' few functions, faster than the vector cache is read
    assert "indexed 5 units" in edited and "1 new or edited, 1 gone or edited, 4 unchanged; 4 encoded, 0 " in edited
    assert "2 of 3 files cut, 0 gone" in edited
    found = run("search", idx, "clampValue", "-k", "4", "--lines", "1").stdout
    assert "function clampValue" in found and "def _tiny" not in found


def test_a_source_folder_goes_alone(project, tmp_path):
    out = run("index", project, "--data", "codesearchnet:x.jsonl", "--out", tmp_path / "idx", code=2).output
    assert "SOURCE indexes a folder of code" in out
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "logo.png").write_bytes(b"\x89PNG\r\n")
    out = run("index", empty, "--out", tmp_path / "idx2", code=1).output
    assert "holds no file the chunker reads" in out


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


def _index(project, tmp_path, tiny_bert_dir, *extra):
    return run("index", project, "--backbone", "hf-encoder", "--model", tiny_bert_dir, "--out", tmp_path / "idx",
               *extra).stdout


def _manifest(tmp_path):
    return json.loads((tmp_path / "idx" / "source-files.json").read_text())


def test_a_rerun_reads_only_files_whose_size_or_time_moved(project, tmp_path, tiny_bert_dir, monkeypatch):
    import os

    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path / "cache"))
    _index(project, tmp_path, tiny_bert_dir)
    files = _manifest(tmp_path)["files"]
    assert set(files) == {"config.py", "web/util.js", "notes.txt"} and len(files["config.py"]["ids"]) == 3
    assert files["config.py"]["sha256"] and files["web/util.js"]["language"] == "javascript"
    info = (project / "config.py").stat()
    os.utime(project / "config.py", ns=(info.st_atime_ns, info.st_mtime_ns + 5_000_000_000))  # touched
    out = _index(project, tmp_path, tiny_bert_dir)
    assert "0 of 3 files cut, 0 gone, 1 read and found unchanged" in out and "0 encoded" in out

    (project / "web" / "util.js").unlink()
    out = _index(project, tmp_path, tiny_bert_dir)
    assert "indexed 4 units" in out and "0 of 2 files cut, 1 gone" in out and "1 gone or edited" in out
    assert set(_manifest(tmp_path)["files"]) == {"config.py", "notes.txt"}
    found = run("search", tmp_path / "idx", "debounce", "-k", "5", "--json").stdout
    assert "util.js" not in found


def test_the_lexical_side_reads_each_function_with_its_place_across_updates(project, tmp_path, tiny_bert_dir,
                                                                           monkeypatch):
    """bm25-project reads a function with its file and class, and the names of its callers: an edit of
    one file that adds a call reaches the callee's callers field though the callee's file is unchanged."""
    from structret.search.index import LEXICAL_DIR, LEXICAL_READINGS, load_index

    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path / "cache"))
    _index(project, tmp_path, tiny_bert_dir)
    idx = tmp_path / "idx"
    assert (idx / LEXICAL_DIR / LEXICAL_READINGS).is_file()

    def lexical_scores(query):
        found = load_index(idx)
        return dict(zip(found.lexical_ids, found.lexical.retriever.score([query])[0])), found

    scores, found = lexical_scores("web util")  # util.js's path: only its function has it
    debounce = next(i for i in found.lexical_ids if "util.js" in i)
    assert scores[debounce] > 0 and all(v == 0 for i, v in scores.items() if i != debounce)
    assert json.loads(found.load_readings()[debounce])["path"] == "web/util.js"

    scores, _ = lexical_scores("throttle clicks")
    assert scores[debounce] == 0
    (project / "web" / "events.js").write_text("function throttleClicks(button) {\n  return debounce(button, 50);\n}\n")
    out = _index(project, tmp_path, tiny_bert_dir)
    assert "1 of 4 files cut" in out
    scores, found = lexical_scores("throttle clicks")  # util.js was not read again: its reading was kept
    assert scores[debounce] > 0 and len(found.load_readings()) == len(found.lexical_ids) == 6


def test_a_file_with_a_syntax_error_keeps_what_parses_and_a_file_the_chunker_fails_on_keeps_its_units(
        project, tmp_path, tiny_bert_dir, monkeypatch):
    from structret_code.chunker import CodeChunker

    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path / "cache"))
    _index(project, tmp_path, tiny_bert_dir)
    (project / "config.py").write_text(PYTHON + "\ndef broken(:\n")
    (project / "blob.py").write_bytes(b"\xff\xfe\x00binary")  # a new file that is binary
    (project / "latin.py").write_bytes("x = 'caf\xe9'\n".encode("latin-1"))  # one that is not UTF-8
    out = _index(project, tmp_path, tiny_bert_dir)
    # tree-sitter recovers: the three functions stay units, and the broken lines are one too
    assert "indexed 6 units" in out and "failed" not in out, out
    assert "2 files skipped (blob.py: binary, latin.py: not UTF-8 at line 1)" in out
    found = run("search", tmp_path / "idx", "read the configuration", "-k", "4", "--json").stdout
    assert "config.py" in found

    real = CodeChunker.chunk

    def fails_on_config(self, text, path, language=None):
        if path == "config.py":
            raise ValueError("a grammar gave up")
        return real(self, text, path, language)

    monkeypatch.setattr(CodeChunker, "chunk", fails_on_config)
    (project / "config.py").write_text(PYTHON + "\ndef fixed(x):\n    return x\n")
    out = _index(project, tmp_path, tiny_bert_dir)
    assert "1 files failed and keep their previous units (config.py: the chunker failed (ValueError: a grammar " \
           "gave up))" in out and "indexed 6 units" in out
    monkeypatch.setattr(CodeChunker, "chunk", real)
    out = _index(project, tmp_path, tiny_bert_dir)  # tried again: its size and time were not recorded
    assert "indexed 6 units" in out and "1 new or edited" in out and "failed" not in out


def test_another_model_or_index_builds_anew_and_says_why(project, tmp_path, tiny_bert_dir, monkeypatch):
    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path / "cache"))
    _index(project, tmp_path, tiny_bert_dir)
    out = _index(project, tmp_path, tiny_bert_dir, "--index", "hnsw")
    assert "built from all 3 files (another model, chunker, index or fusion was asked for)" in out
    (tmp_path / "idx" / "source-files.json").write_text("{ damaged")
    out = _index(project, tmp_path, tiny_bert_dir, "--index", "hnsw")
    assert "built from all 3 files (the index has no manifest of its files, or a damaged one)" in out
    # the default (auto) is what a flat index of 5 units was asked as: an index built when flat was the
    # default is brought up to date, not rebuilt; hnsw is not what auto picks for 5, so that one is
    out = _index(project, tmp_path, tiny_bert_dir)
    assert "built from all 3 files (another model, chunker, index or fusion was asked for)" in out
    _index(project, tmp_path, tiny_bert_dir, "--index", "flat")
    out = _index(project, tmp_path, tiny_bert_dir)
    assert "built from all" not in out and "0 of 3 files cut" in out
    out = _index(project, tmp_path, tiny_bert_dir, "--chunker-option", "max_chars=400")
    assert "built from all 3 files (another model, chunker, index or fusion was asked for)" in out


def test_an_interrupted_rerun_leaves_the_previous_index_whole(project, tmp_path, tiny_bert_dir, monkeypatch):
    from structret.search.index import SearchIndex

    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path / "cache"))
    _index(project, tmp_path, tiny_bert_dir)
    before = (tmp_path / "idx" / "source-files.json").read_text()
    (project / "web" / "util.js").write_text(JAVASCRIPT + "\nfunction clampValue(v) {\n  return v;\n}\n")
    real = SearchIndex.save

    def dies_half_way(self, path):
        real(self, path)
        raise KeyboardInterrupt  # after the new files are written, before the swap

    monkeypatch.setattr(SearchIndex, "save", dies_half_way)
    result = CliRunner().invoke(cli, ["index", str(project), "--backbone", "hf-encoder", "--model", str(tiny_bert_dir),
                                      "--out", str(tmp_path / "idx")])
    assert result.exit_code != 0
    monkeypatch.setattr(SearchIndex, "save", real)
    assert (tmp_path / "idx" / "source-files.json").read_text() == before  # the manifest and the index, as they were
    found = json.loads(run("search", tmp_path / "idx", "clampValue", "-k", "5", "--json").stdout)[0]["hits"]
    assert not any("clampValue" in h["text"] for h in found) and any("debounce" in h["text"] for h in found)
    out = _index(project, tmp_path, tiny_bert_dir)  # the next run picks the edit up
    assert "1 of 3 files cut" in out and "1 new or edited" in out


def test_files_that_vanish_loop_or_hold_no_function_are_skipped(project, tmp_path, tiny_bert_dir, monkeypatch):
    import os

    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path / "cache"))
    (project / "web" / "loop").symlink_to(project, target_is_directory=True)  # a symlink loop: never followed
    os.symlink(project / "gone.py", project / "dangling.py")  # listed, but nothing to stat
    out = _index(project, tmp_path, tiny_bert_dir)
    assert "indexed 5 units" in out and "built from all 3 files" in out
    empty = tmp_path / "nothing"
    empty.mkdir()
    (empty / "only.py").write_text("\n\n")
    out = run("index", empty, "--backbone", "hf-encoder", "--model", tiny_bert_dir, "--out", tmp_path / "idx2",
              code=1).output
    assert "holds no file the chunker reads, or only empty ones" in out and "Traceback" not in out


def test_a_function_edited_in_place_shows_its_new_text(project, tmp_path, tiny_bert_dir, monkeypatch):
    """An edit that keeps a function's lines keeps its id: the update removes and adds the same id, and the
    saved texts must be the new ones (they were once linked from the old files, ids alike)."""
    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path / "cache"))
    _index(project, tmp_path, tiny_bert_dir)
    # _tiny keeps its lines: the re-added id sits where it was, and the old texts files were linked with its
    # old text
    (project / "config.py").write_text(PYTHON.replace("def _tiny(x):\n    return x", "def _tiny(y):\n    return y"))
    assert "1 of 3 files cut" in _index(project, tmp_path, tiny_bert_dir)
    found = run("search", tmp_path / "idx", "tiny", "-k", "4", "--json").stdout
    assert "def _tiny(y)" in found and "def _tiny(x)" not in found


def test_a_rerun_encodes_edited_functions_with_the_models_onnx_copy_without_torch(project, tmp_path, tiny_bert_dir,
                                                                                  monkeypatch):
    import os
    import subprocess
    import sys
    from pathlib import Path

    import numpy as np

    from structret.project import index as sources
    from structret.models import open_model
    from structret.search.index import load_index

    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path / "cache"))
    _index(project, tmp_path, tiny_bert_dir)
    twin = _manifest(tmp_path)["encoder"]
    assert Path(twin["onnx"], "model.onnx").is_file() and str(tmp_path / "cache") in twin["onnx"]
    added = "def clamp_value(value, low, high):\n    return min(high, max(low, value))\n"
    (project / "config.py").write_text(PYTHON + "\n\n" + added)
    # a new process, as a user runs it: the edited file's functions are encoded and torch is never imported
    code = ("import sys\nfrom structret.cli import cli\n"
            f"try:\n    cli({[str(a) for a in ['index', project, '--backbone', 'hf-encoder', '--model', tiny_bert_dir, '--out', tmp_path / 'idx']]})\n"
            "except SystemExit as end:\n    assert not end.code, end.code\n"
            "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, 'torch or transformers imported'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "STRUCTRET_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "1 new or edited" in done.stdout and "4 encoded, 0 vectors reused" in done.stdout, done.stdout
    found = load_index(tmp_path / "idx", texts=True)
    new_id = next(i for i, text in found.texts.items() if "clamp_value" in text)
    model = open_model("hf-encoder", str(tiny_bert_dir))
    reference = model.encode_document([found.texts[new_id]])[0]
    stored = found.index.search(reference[None, :].astype(np.float32), 1)
    assert stored[1][0][0] == new_id and stored[0][0][0] > 0.9999 * float(reference @ reference)

    # the copy gone or damaged: the model is opened, as before there were copies
    (Path(twin["onnx"]) / "model.onnx").write_bytes(b"damaged")
    opened = []
    real_open = sources.ModelChoice.open
    monkeypatch.setattr(sources.ModelChoice, "open", lambda self: opened.append(1) or real_open(self))
    (project / "config.py").write_text(PYTHON + "\n\n" + added.replace("clamp_value", "clamp_number"))
    out = _index(project, tmp_path, tiny_bert_dir)
    assert "1 new or edited" in out and opened == [1]
