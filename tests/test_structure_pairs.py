"""structret mine --structure-pairs: functions without a docstring become training pairs from their structure."""

import gzip
import json

from structret.mining.rules import PAIR_LEADING_COMMENT, PAIR_NAME_SIGNATURE, MinedFunction, name_words, structure_pair

SOURCE = '''class Repo:
    def reset_home_dir(self, path, force=False):
        # remove the cached home directory first
        shutil.rmtree(path)
        os.makedirs(path)
        return path

    def loadIndexFile(self, name):
        data = open(name).read()
        parsed = json.loads(data)
        return parsed

    def documented_one(self, value):
        """Double the value given to it."""
        doubled = value * 2
        checked = int(doubled)
        return checked

def x(a):
    b = a
    c = b
    return c

def short_one(a):
    return a
'''


def fn(name, code):
    return MinedFunction(func_name=name, original_string=code, code=code, docstring="", start_line=1, end_line=9)


def test_name_words_split_classes_camel_and_snake_case():
    assert name_words("Repo.resetHomeDir") == ["repo", "reset", "home", "dir"]
    assert name_words("read_file") == ["read", "file"]
    assert name_words("HTTPServer.serveForever") == ["http", "server", "serve", "forever"]


def test_a_leading_comment_is_the_query_and_leaves_the_code():
    kind, query, code = structure_pair(fn("load", "def load(p):\n    # read the whole file\n    a = 1\n"
                                          "    b = 2\n    return open(p)"))
    assert kind == PAIR_LEADING_COMMENT and query == "read the whole file" and "#" not in code
    # a comment of two tokens is no query: the name's words are used instead
    kind, query, _ = structure_pair(fn("load_file", "def load_file(p):\n    // the file\n    a = 1\n"
                                       "    b = 2\n    return open(p)"))
    assert kind == PAIR_NAME_SIGNATURE and query == "load file (p)"


def test_the_name_and_parameters_are_the_query_for_the_body():
    kind, query, code = structure_pair(fn("Repo.loadIndexFile", "def loadIndexFile(self, name):\n    a = 1\n"
                                          "    b = 2\n    return name"))
    assert kind == PAIR_NAME_SIGNATURE and query == "repo load index file (self, name)"
    assert not code.startswith("def ")


def test_too_little_structure_gives_no_pair():
    assert structure_pair(fn("x", "def x(a):\n    b = a\n    c = b\n    return c")) is None  # one word
    assert structure_pair(fn("read_it", "def read_it(a):\n    return a")) is None  # body too short


def test_mining_keeps_the_pairs_and_says_their_kind(tmp_path):
    from structret.mining import mine

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text(SOURCE)
    plain = mine(tmp_path / "src", "python", tmp_path / "plain.jsonl.gz", show_progress=False)
    report = mine(tmp_path / "src", "python", tmp_path / "pairs.jsonl.gz", show_progress=False, structure_pairs=True)
    assert plain.kept == 1 and report.kept == 3
    assert report.structure == {PAIR_LEADING_COMMENT: 1, PAIR_NAME_SIGNATURE: 1}
    assert report.functions_found == report.kept + sum(report.dropped.values())
    with gzip.open(tmp_path / "pairs.jsonl.gz", "rt") as f:
        rows = [json.loads(line) for line in f]
    kinds = {r["func_name"]: r.get("pair_kind") for r in rows}
    assert kinds == {"Repo.reset_home_dir": PAIR_LEADING_COMMENT, "Repo.loadIndexFile": PAIR_NAME_SIGNATURE,
                     "Repo.documented_one": None}
    assert "from functions without a docstring" in report.summary()
    from structret.datasets import load_dataset

    dataset = load_dataset(f"codesearchnet:{tmp_path / 'pairs.jsonl.gz'}")
    assert {q.text for q in dataset.queries.values()} >= {"remove the cached home directory first"}
