"""``structret mine``: source trees of all six languages into CodeSearchNet rows."""

from __future__ import annotations

import gzip
import json
import sys
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

import structret
from structret import mining
from structret.cli import cli
from structret.errors import DataError, PluginError
from structret.mining import (
    RULE_DUNDER,
    RULE_DUPLICATE,
    RULE_NO_DOC,
    RULE_SHORT_CODE,
    RULE_SHORT_DOC,
    RULE_STANDARD,
    RULE_TEST,
    MinedFunction,
    drop_rule,
    docstring_summary,
    mine,
    partition_of,
    tokenize_docstring,
)

CSN_FIELDS = [
    "repo", "path", "func_name", "original_string", "language", "code",
    "code_tokens", "docstring", "docstring_tokens", "sha", "partition", "url",
]

# Every fixture has, besides two functions that are kept, one function per drop rule.
PYTHON = '''import os


def add_numbers(a, b):
    """Add two numbers and return the sum.

    Longer text that is not part of the query.
    """

    total = a + b  # keep this comment
    return total


def short_doc(a):
    """Short doc"""
    x = a
    return x


def two_lines(a):
    """Return the argument unchanged, always."""
    return a


def no_doc(a):
    x = a + 1
    return x


def test_something(a):
    """Check that something works as expected."""
    x = a
    return x


class Widget:
    """A widget."""

    def __init__(self, size):
        """Create a widget of the given size."""
        self.size = size
        self.name = "w"

    def __repr__(self):
        """Show the widget as a string for debugging."""
        text = f"Widget({self.size})"
        return text

    @property
    def area(self):
        """Compute the area of the widget in square units."""
        side = self.size
        return side * side

    def _helper(self):
        def nested():
            """Nested functions are not mined, as in CodeSearchNet."""
            return 1
        return nested()
'''

GO = '''package pkg

type Widget struct{ size int }

// AddNumbers adds two numbers and returns the sum.
//
// More words here.
func AddNumbers(a int, b int) int {
	total := a + b
	return total
}

// Short doc
func ShortDoc(a int) int {
	x := a
	return x
}

// TwoLines returns the argument unchanged.
func TwoLines(a int) int { return a }

func NoDoc(a int) int {
	x := a + 1
	return x
}

// TestSomething checks that something works as expected.
func TestSomething(a int) int {
	x := a
	return x
}

// Area computes the area of the widget in square units.
func (w *Widget) Area() int {
	side := w.size
	return side * side
}
'''

JAVA = '''package pkg;

public class Widget {
    private int size;

    /**
     * Creates a widget of the given size.
     */
    public Widget(int size) {
        this.size = size;
        this.name = "w";
    }

    /**
     * Adds two numbers and returns the sum.
     *
     * @param a the first number
     * @return the sum
     */
    public int addNumbers(int a, int b) {
        int total = a + b;
        return total;
    }

    /** Short doc */
    public int shortDoc(int a) {
        int x = a;
        return x;
    }

    /** Returns the argument unchanged. */
    public int twoLines(int a) { return a; }

    public int noDoc(int a) {
        int x = a + 1;
        return x;
    }

    /** Checks that something works as expected. */
    public int testSomething(int a) {
        int x = a;
        return x;
    }

    /** Shows the widget as a string for debugging. */
    @Override
    public String toString() {
        String s = "Widget";
        return s;
    }

    /**
     * Computes the area of the widget in square units.
     * @return the area
     */
    public int area() {
        int side = size;
        return side * side;
    }
}
'''

JAVASCRIPT = '''/**
 * Adds two numbers and returns the sum.
 */
function addNumbers(a, b) {
  const total = a + b;
  return total;
}

/** Short doc */
function shortDoc(a) {
  const x = a;
  return x;
}

/** Returns the argument unchanged. */
const twoLines = (a) => a;

function noDoc(a) {
  const x = a + 1;
  return x;
}

/** Checks that something works as expected. */
function testSomething(a) {
  const x = a;
  return x;
}

class Widget {
  /** Creates a widget of the given size. */
  constructor(size) {
    this.size = size;
    this.name = "w";
  }

  /** Returns the primitive value of the widget. */
  valueOf() {
    const s = this.size;
    return s;
  }

  /** Computes the area of the widget in square units. */
  area() {
    const side = this.size;
    return side * side;
  }
}

module.exports = { addNumbers, Widget };
'''

PHP = '''<?php

/**
 * Adds two numbers and returns the sum.
 */
function addNumbers($a, $b) {
    $total = $a + $b;
    return $total;
}

/** Short doc */
function shortDoc($a) {
    $x = $a;
    return $x;
}

/** Returns the argument unchanged. */
function twoLines($a) { return $a; }

function noDoc($a) {
    $x = $a + 1;
    return $x;
}

/** Checks that something works as expected. */
function testSomething($a) {
    $x = $a;
    return $x;
}

class Widget {
    /** Creates a widget of the given size. */
    public function __construct($size) {
        $this->size = $size;
        $this->name = "w";
    }

    /** Shows the widget as a string for debugging. */
    public function __toString() {
        $s = "Widget";
        return $s;
    }

    /** Computes the area of the widget in square units. */
    public function area() {
        $side = $this->size;
        return $side * $side;
    }
}
'''

RUBY = '''# Adds two numbers and returns the sum.
#
# More words here.
def add_numbers(a, b)
  total = a + b
  total
end

# Short doc
def short_doc(a)
  x = a
  x
end

# Returns the argument unchanged.
def two_lines(a); a; end

def no_doc(a)
  x = a + 1
  x
end

# Checks that something works as expected.
def test_something(a)
  x = a
  x
end

module Shapes
  class Widget
    # Creates a widget of the given size.
    def initialize(size)
      @size = size
      @name = "w"
    end

    # Converts the widget to text for display.
    def to_text
      s = "Widget"
      s
    end

    # Computes the area of the widget in square units.
    def area
      side = @size
      side * side
    end
  end
end
'''

# language -> (extension, source, source of a file with a syntax error at line 2 or 3,
#              the two functions kept, dropped counts per rule)
ONE_OF_EACH = Counter(
    {
        RULE_DUNDER: 1, RULE_STANDARD: 1, RULE_TEST: 1, RULE_NO_DOC: 1,
        RULE_SHORT_DOC: 1, RULE_SHORT_CODE: 1, RULE_DUPLICATE: 1,
    }
)
CASES = {
    "python": (".py", PYTHON, "x = 1\n\ndef broken(:\n    pass\n", 3, ["add_numbers", "Widget.area"],
               ONE_OF_EACH + Counter({RULE_DUNDER: 1, RULE_STANDARD: -1, RULE_NO_DOC: 1})),
    "go": (".go", GO, "package pkg\n\nfunc broken( {\n}\n", 3, ["AddNumbers", "Widget.Area"],
           ONE_OF_EACH - Counter({RULE_DUNDER: 1, RULE_STANDARD: 1})),
    "java": (".java", JAVA, "class Broken {\n  void f( {\n}\n", 2, ["Widget.addNumbers", "Widget.area"], ONE_OF_EACH),
    "javascript": (".js", JAVASCRIPT, "const x = 1;\nfunction broken( {\n}\n", 2, ["addNumbers", "Widget.area"],
                   ONE_OF_EACH),
    "php": (".php", PHP, "<?php\nfunction broken( {\n}\n", 2, ["addNumbers", "Widget.area"], ONE_OF_EACH),
    "ruby": (".rb", RUBY, "x = 1\ndef broken(\n  1 +\nend\n", 2, ["add_numbers", "Shapes.Widget.area"], ONE_OF_EACH),
}

ADD_DOC_TOKENS = {
    "python": ["Add", "two", "numbers", "and", "return", "the", "sum", "."],
    "go": ["AddNumbers", "adds", "two", "numbers", "and", "returns", "the", "sum", "."],
}


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def read_rows(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


# where the kept add-numbers function (with its doc comment) starts and the next one begins
ADD_BLOCK = {
    "python": ("def add_numbers", "def short_doc"),
    "go": ("// AddNumbers adds", "// Short doc"),
    "java": ("    /**\n     * Adds two", "    /** Short doc"),
    "javascript": ("/**\n * Adds two", "/** Short doc"),
    "php": ("/**\n * Adds two", "/** Short doc"),
    "ruby": ("# Adds two", "# Short doc"),
}


def language_tree(root: Path, language: str) -> Path:
    ext, source, broken, _, _, _ = CASES[language]
    begin, end = ADD_BLOCK[language]
    add = source[source.index(begin) : source.index(end)]
    header = {"go": "package pkg\n\n", "php": "<?php\n\n", "java": "package pkg;\n\nclass Other {\n"}.get(language, "")
    footer = "}\n" if language == "java" else ""
    return write_tree(
        root,
        {
            f"pkg/core{ext}": source,
            # the same function again, later in the walk: a duplicate
            f"pkg/later{ext}": header + add + footer,
            f"pkg/broken{ext}": broken,
            f"pkg/latin{ext}": b"x\n" + "caf\xe9 = 1\n".encode("latin-1"),
            # never entered
            f".hidden/hidden{ext}": source,
            f"__pycache__/cached{ext}": source,
            f"site-packages/dep{ext}": source,
            "pkg/notes.txt": "not source",
        },
    )


@pytest.mark.parametrize("language", sorted(CASES))
def test_mine_each_language_applies_every_rule(tmp_path, language):
    ext, source, _, error_line, kept, dropped = CASES[language]
    src = language_tree(tmp_path / "proj", language)
    out = tmp_path / "out" / "corpus.jsonl.gz"

    report = mine(src, language, out, show_progress=False, splits=(0.8, 0.1, 0.1))

    assert report.files_seen == 4
    assert report.files_skipped == Counter({"syntax error": 1, "not UTF-8": 1})
    assert f"pkg/broken{ext}:{error_line}: syntax error" in " ".join(report.skipped_examples)
    assert f"pkg/latin{ext}:2: not UTF-8" in " ".join(report.skipped_examples)
    assert report.dropped == +dropped
    assert report.kept == len(kept) == 2
    assert report.functions_found == report.kept + sum(report.dropped.values())

    rows = read_rows(out)
    assert [r["func_name"] for r in rows] == kept
    for row in rows:
        assert list(row) == CSN_FIELDS
        assert row["language"] == language
        assert row["repo"] == "proj"
        assert row["path"] == f"pkg/core{ext}"
        assert row["sha"] == ""
        assert row["partition"] == partition_of(row["path"])
        assert row["original_string"].startswith(row["code"].split("\n")[0])
        assert row["original_string"].endswith(row["code"].split("\n")[-1])
        assert len(row["docstring_tokens"]) >= 3

    add = rows[0]
    if language in ADD_DOC_TOKENS:
        assert add["docstring_tokens"] == ADD_DOC_TOKENS[language]
    else:
        assert add["docstring_tokens"] == ["Adds", "two", "numbers", "and", "returns", "the", "sum", "."]
    # the whole doc comment, markers removed; the query is only its first paragraph
    assert add["docstring"].startswith(("Add two numbers", "Adds two numbers", "AddNumbers adds"))
    assert "/**" not in add["docstring"] and "//" not in add["docstring"] and "#" not in add["docstring"]
    assert "numbers" not in add["code"].split("\n", 1)[1]  # no docstring left in the code

    # url: the function's own lines in the file
    lines = source.split("\n")
    first, last = (int(x) for x in add["url"].rsplit("#L", 1)[1].split("-L"))
    assert add["url"].startswith((src / "pkg" / f"core{ext}").resolve().as_uri() + "#L")
    assert "\n".join(lines[first - 1 : last]).strip().endswith(add["code"].split("\n")[-1].strip())
    assert add["code"].split("\n")[0].strip() in lines[first - 1]


def test_python_fields(tmp_path):
    src = language_tree(tmp_path / "proj", "python")
    out = tmp_path / "py.jsonl.gz"
    mine(src, "python", out, show_progress=False)
    add, area = read_rows(out)

    assert add["code"] == "def add_numbers(a, b):\n    total = a + b  # keep this comment\n    return total"
    assert add["original_string"].startswith('def add_numbers(a, b):\n    """Add two numbers and return the sum.\n')
    assert add["docstring"] == "Add two numbers and return the sum.\n\n    Longer text that is not part of the query."
    assert add["code_tokens"] == [
        "def", "add_numbers", "(", "a", ",", "b", ")", ":", "total", "=", "a", "+", "b", "return", "total",
    ]
    assert add["url"].endswith("core.py#L4-L11")

    # a method: Class.name; its text starts at `def` (the decorator is on line 49), later lines keep their indent
    assert area["func_name"] == "Widget.area"
    assert area["code"] == "def area(self):\n        side = self.size\n        return side * side"
    assert area["url"].endswith("core.py#L50-L53")


def test_treesitter_fields(tmp_path):
    write_tree(tmp_path / "go", {"a.go": GO})
    mine(tmp_path / "go", "go", tmp_path / "go.jsonl.gz", show_progress=False)
    add, area = read_rows(tmp_path / "go.jsonl.gz")
    assert add["docstring"] == "AddNumbers adds two numbers and returns the sum.\n\nMore words here."
    assert add["code"] == add["original_string"]
    assert add["code"] == "func AddNumbers(a int, b int) int {\n\ttotal := a + b\n\treturn total\n}"
    assert area["code_tokens"] == [
        "func", "(", "w", "*", "Widget", ")", "Area", "(", ")", "int", "{",
        "side", ":=", "w", ".", "size", "return", "side", "*", "side", "}",
    ]

    write_tree(tmp_path / "java", {"A.java": JAVA})
    mine(tmp_path / "java", "java", tmp_path / "java.jsonl.gz", show_progress=False)
    _, area = read_rows(tmp_path / "java.jsonl.gz")
    # no blank line in the JavaDoc: the query stops at the first @tag line
    assert area["docstring"] == "Computes the area of the widget in square units.\n@return the area"
    assert area["docstring_tokens"] == ["Computes", "the", "area", "of", "the", "widget", "in", "square", "units", "."]

    write_tree(tmp_path / "rb", {"a.rb": RUBY})
    mine(tmp_path / "rb", "ruby", tmp_path / "rb.jsonl.gz", show_progress=False)
    _, area = read_rows(tmp_path / "rb.jsonl.gz")
    assert area["code_tokens"] == ["def", "area", "side", "=", "@size", "side", "*", "side", "end"]


def test_string_literal_is_one_token(tmp_path):
    code = (
        'package p\n\n// F returns a greeting for you.\n'
        'func F() string {\n\ts := "hi, \\"you\\""  // note\n\treturn s\n}\n'
    )
    (fn,) = mining_functions("go", code)
    assert fn.code_tokens == ["func", "F", "(", ")", "string", "{", "s", ":=", '"hi, \\"you\\""', "return", "s", "}"]


def mining_functions(language: str, source: str) -> list[MinedFunction]:
    from structret.registry import get_registry

    return get_registry().create("miner", language).functions(source, "x")


def test_doc_comment_must_touch_the_function():
    js = (
        "/** Detached doc comment here. */\n\nfunction a() {\n  return 1;\n}\n"
        "// line comment, not a doc comment\nfunction b() {}\n"
    )
    a, b = mining_functions("javascript", js)
    assert a.docstring == "" and b.docstring == ""
    ruby = "x = 1 # trailing comment\ndef f\n  1\nend\n"
    assert mining_functions("ruby", ruby)[0].docstring == ""


def test_mining_twice_gives_identical_output(tmp_path):
    src = language_tree(tmp_path / "proj", "python")
    for i in range(8):  # enough files for more than one split
        write_tree(src, {f"mod{i}/m.py": PYTHON.replace("add_numbers", f"add_numbers_{i}")})
    first, second = tmp_path / "1.jsonl.gz", tmp_path / "2.jsonl.gz"
    mine(src, "python", first, show_progress=False, splits=(0.8, 0.1, 0.1))
    mine(src, "python", second, show_progress=False, splits=(0.8, 0.1, 0.1))
    assert gzip.decompress(first.read_bytes()) == gzip.decompress(second.read_bytes())
    assert first.read_bytes() == second.read_bytes()  # even the gzip header
    rows = read_rows(first)
    by_path: dict[str, set[str]] = {}
    for row in rows:
        by_path.setdefault(row["path"], set()).add(row["partition"])
    assert all(len(parts) == 1 for parts in by_path.values())  # a file is never split


def test_partition_of():
    assert partition_of("a/b.py") == partition_of("a/b.py")
    assert {partition_of(f"f{i}.py", (1, 0, 0)) for i in range(50)} == {"train"}
    assert {partition_of(f"f{i}.py", (0, 0, 1)) for i in range(50)} == {"test"}
    shares = Counter(partition_of(f"dir/f{i}.py") for i in range(5000))
    assert 0.77 < shares["train"] / 5000 < 0.83 and 0.08 < shares["test"] / 5000 < 0.12


def test_bad_splits_and_paths(tmp_path):
    write_tree(tmp_path / "src", {"a.py": PYTHON})
    with pytest.raises(ValueError, match="add up to 1"):
        mine(tmp_path / "src", "python", tmp_path / "o.jsonl.gz", splits=(0.5, 0.1, 0.1), show_progress=False)
    with pytest.raises(DataError, match="not a directory"):
        mine(tmp_path / "nowhere", "python", tmp_path / "o.jsonl.gz", show_progress=False)
    with pytest.raises(PluginError, match="unknown miner 'pyhton'.*Did you mean 'python'"):
        mine(tmp_path / "src", "pyhton", tmp_path / "o.jsonl.gz", show_progress=False)


def test_plain_jsonl_and_empty_tree(tmp_path):
    write_tree(tmp_path / "src", {"a.py": PYTHON})
    out = tmp_path / "corpus.jsonl"
    report = mine(tmp_path / "src", "python", out, show_progress=False)
    assert len(out.read_text(encoding="utf-8").splitlines()) == report.kept == 2

    report = mine(tmp_path / "src", "go", tmp_path / "go.jsonl.gz", show_progress=False)
    assert report.files_seen == 0 and read_rows(tmp_path / "go.jsonl.gz") == []
    assert "is --language go the language of this tree?" in report.summary()


def test_interrupted_run_leaves_previous_output(tmp_path, monkeypatch):
    write_tree(tmp_path / "src", {"a.py": PYTHON, "b.py": PYTHON})
    out = tmp_path / "corpus.jsonl.gz"
    out.write_bytes(b"previous corpus")

    class Exploding:
        extensions = (".py",)

        def __init__(self):
            self.calls = 0

        def functions(self, source, path):
            self.calls += 1
            if self.calls == 2:
                raise KeyboardInterrupt
            return [MinedFunction("f", "def f(): ...", "def f(): ...", "Does a thing well.", 1, 1)]

    class FakeRegistry:
        def create(self, kind, name):
            return Exploding()

    monkeypatch.setattr("structret.registry.get_registry", lambda: FakeRegistry())
    with pytest.raises(KeyboardInterrupt):
        mine(tmp_path / "src", "python", out, show_progress=False)
    assert out.read_bytes() == b"previous corpus"
    # no temp file left; the shard folder stays for the next run to resume from
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.jsonl.gz", "corpus.jsonl.gz.shards", "src"]
    assert [p.name for p in (tmp_path / "corpus.jsonl.gz.shards").iterdir()] == ["manifest.json"]


def test_a_failing_miner_costs_one_file(tmp_path, monkeypatch):
    write_tree(tmp_path / "src", {"a.py": "", "b.py": ""})

    class Buggy:
        extensions = (".py",)

        def functions(self, source, path):
            if path == "a.py":
                raise IndexError("list index out of range")
            return [MinedFunction("f", "def f():\n  a\n  b", "def f():\n  a\n  b", "Does a thing well.", 1, 3)]

    class FakeRegistry:
        def create(self, kind, name):
            return Buggy()

    monkeypatch.setattr("structret.registry.get_registry", lambda: FakeRegistry())
    report = mine(tmp_path / "src", "python", tmp_path / "o.jsonl.gz", show_progress=False)
    assert report.files_skipped == Counter({"miner error": 1}) and report.kept == 1
    assert "a.py:1: miner error (IndexError('list index out of range'))" in report.summary()


def test_sha_from_git_head(tmp_path):
    sha = "0123456789abcdef0123456789abcdef01234567"
    src = write_tree(tmp_path / "repo", {"a.py": PYTHON, ".git/HEAD": "ref: refs/heads/main\n"})
    write_tree(src, {".git/packed-refs": f"# pack-refs with: peeled\n{sha} refs/heads/main\n"})
    assert mining.git_head(src) == sha
    write_tree(src, {".git/refs/heads/main": sha.replace("0", "f") + "\n"})
    assert mining.git_head(src) == sha.replace("0", "f")
    write_tree(src, {".git/HEAD": sha + "\n"})  # detached
    mine(src, "python", tmp_path / "o.jsonl.gz", repo="me/repo", show_progress=False)
    row = read_rows(tmp_path / "o.jsonl.gz")[0]
    assert row["sha"] == sha and row["repo"] == "me/repo"
    assert mining.git_head(src / "sub") == ""


def test_special_methods_are_the_miners_call():
    """Core drops what the miner marks, and knows no language's naming convention itself."""
    from structret_code.python_miner import PythonMiner

    body = "def __repr__(self):\n    text = str(self)\n    return text"
    unmarked = MinedFunction("W.__repr__", body, body, "Show the widget as text.", 1, 3)
    assert drop_rule(unmarked, tokenize_docstring(unmarked.docstring)) is None
    marked = MinedFunction("W.__repr__", body, body, "Show the widget as text.", 1, 3, is_special=True)
    assert drop_rule(marked, tokenize_docstring(marked.docstring)) == RULE_DUNDER
    (mined,) = [f for f in PythonMiner().functions(PYTHON, "w.py") if f.func_name == "Widget.__repr__"]
    assert mined.is_special and not mined.is_constructor


def test_missing_grammar_names_the_package(monkeypatch):
    from structret_code import treesitter_miner

    monkeypatch.setitem(sys.modules, "tree_sitter_go", None)  # import now fails as if uninstalled
    with pytest.raises(PluginError, match=r"pip install tree-sitter-go"):
        treesitter_miner.go()


def test_docstring_summary_and_tokens():
    assert docstring_summary("First line\ncontinues.\n   \nSecond paragraph.") == "First line\ncontinues."
    assert docstring_summary("Returns x.\n@param a the a\n@return x") == "Returns x."
    # an inline tag or an address does not end the summary (CodeSearchNet cut at any '@')
    assert docstring_summary("Links to {@link Foo} and a@b.c") == "Links to {@link Foo} and a@b.c"
    assert tokenize_docstring("Returns the (x, y) pair... see foo.bar() or a[0]=b; x->y <T> {}") == [
        "Returns", "the", "(", "x", "y", ")", "pair", "...", "see", "foo", ".", "bar", "()",
        "or", "a", "[", "0", "]", "=", "b", ";", "x", "-", ">", "y", "<T", ">", "{}",
    ]


def test_summary_accounts_for_every_function(tmp_path):
    src = language_tree(tmp_path / "proj", "python")
    report = mine(src, "python", tmp_path / "o.jsonl.gz", show_progress=False, splits=(0.5, 0.25, 0.25))
    text = report.summary()
    assert "10 found = 2 kept + 8 dropped" in text
    assert f"dropped, {RULE_NO_DOC}: 2" in text
    assert "site-packages" in text and "__pycache__" in text
    assert "kept by split:" in text
    # two kept functions in one file cannot fill three splits: the summary says which are empty and why
    assert "note: no row in" in text and "too few for these shares" in text


def test_mine_splits_only_when_asked(tmp_path):
    """One's own code is for searching: without splits no row has a partition, and a reader takes them all."""
    src = language_tree(tmp_path / "proj", "python")
    out = tmp_path / "o.jsonl.gz"
    report = mine(src, "python", out, show_progress=False)
    rows = read_rows(out)
    assert len(rows) == report.kept == 2 and all(list(r) == [f for f in CSN_FIELDS if f != "partition"] for r in rows)
    assert "not split" in report.summary() and "kept by split" not in report.summary()
    assert len(structret.load_dataset(f"codesearchnet:{out}").corpus) == 2
    with pytest.raises(DataError, match="have no 'partition'.*Leave out --split.*--splits 80/10/10"):
        structret.load_dataset(f"codesearchnet:{out}", split="test")

    result = CliRunner().invoke(cli, ["mine", str(src), "-l", "python", "--splits", "80/20", "--out", str(out)])
    assert result.exit_code == 2 and "three percentages for train/valid/test" in result.output
    result = CliRunner().invoke(cli, ["mine", str(src), "-l", "python", "--splits", "0/0/100", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert {r["partition"] for r in read_rows(out)} == {"test"}


@pytest.mark.slow
def test_mine_the_standard_librarys_json_package(tmp_path):
    src = Path(json.__file__).parent
    out = tmp_path / "json.jsonl.gz"
    report = mine(src, "python", out, show_progress=False, splits=(0.8, 0.1, 0.1))
    assert report.files_seen >= 4 and not report.files_skipped
    assert report.kept > 5
    assert report.functions_found == report.kept + sum(report.dropped.values())
    rows = read_rows(out)
    assert len(rows) == report.kept == sum(report.by_split.values())
    assert "dumps" in {r["func_name"] for r in rows}
    assert all(list(r) == CSN_FIELDS for r in rows)


# --- workers and resuming ------------------------------------------------------------


def big_tree(root: Path, files: int = 12) -> Path:
    """Python files with kept, dropped, duplicate and broken functions, several per shard."""
    src = language_tree(root, "python")
    for i in range(files):
        write_tree(src, {f"mod{i:02d}/m.py": PYTHON.replace("add_numbers", f"add_numbers_{i}")})
    return src


def test_workers_give_the_same_bytes_and_counts(tmp_path):
    src = big_tree(tmp_path / "proj")
    one, two = tmp_path / "1.jsonl.gz", tmp_path / "2.jsonl.gz"
    first = mine(src, "python", one, show_progress=False)
    second = mine(src, "python", two, workers=2, chunk_files=2, show_progress=False)
    assert one.read_bytes() == two.read_bytes()
    for field in ("files_seen", "files_skipped", "skipped_examples", "functions_found", "kept", "dropped", "by_split"):
        assert getattr(first, field) == getattr(second, field), field
    assert second.functions_found == second.kept + sum(second.dropped.values())
    assert second.dropped[RULE_DUPLICATE] > 0  # duplicates across shards are still found
    assert first.shards == 1 and second.shards == 8  # 16 files
    assert "8 shards, 2 worker processes" in second.summary()
    assert not (tmp_path / "2.jsonl.gz.shards").exists()  # removed once the output is written


@pytest.mark.parametrize("language", ["go", "java"])
def test_tree_sitter_miners_in_worker_processes(tmp_path, language):
    src = language_tree(tmp_path / "proj", language)  # a tree-sitter parser cannot be pickled: made per worker
    one, two = tmp_path / "1.jsonl.gz", tmp_path / "2.jsonl.gz"
    first = mine(src, language, one, show_progress=False)
    second = mine(src, language, two, workers=2, chunk_files=1, show_progress=False)
    assert one.read_bytes() == two.read_bytes() and second.kept == first.kept == 2
    assert second.files_skipped == first.files_skipped == Counter({"syntax error": 1, "not UTF-8": 1})


@pytest.mark.parametrize("workers", [1, 2])
def test_a_file_name_that_is_not_utf8_is_skipped_and_counted(tmp_path, workers):
    src = write_tree(tmp_path / "proj", {"a.py": PYTHON})
    (src / "b.py").mkdir()  # a folder named like a source file: not a file, never read
    with open(bytes(src) + b"/caf\xe9.py", "w", encoding="utf-8") as f:
        f.write(PYTHON.replace("add_numbers", "other_add"))
    report = mine(src, "python", tmp_path / "o.jsonl.gz", workers=workers, chunk_files=1, show_progress=False)
    assert report.files_seen == 2 and report.files_skipped == Counter({"file name not UTF-8": 1})
    assert "caf\\xe9.py:1: file name not UTF-8 (rename it to mine it)" in report.summary()
    assert report.kept == 2 and [r["path"] for r in read_rows(tmp_path / "o.jsonl.gz")] == ["a.py", "a.py"]


class Interrupting:
    """The real Python miner, recording the files it mines; Ctrl-C at file ``stop_at``."""

    def __init__(self, stop_at=None):
        from structret_code.python_miner import PythonMiner

        self.real, self.stop_at, self.mined = PythonMiner(), stop_at, []
        self.extensions = self.real.extensions

    def functions(self, source, path):
        if path == self.stop_at:
            raise KeyboardInterrupt
        self.mined.append(path)
        return self.real.functions(source, path)


def mine_with(monkeypatch, miner, *args, **kwargs):
    class Registry:
        def create(self, kind, name):
            return miner

    with monkeypatch.context() as m:
        m.setattr("structret.registry.get_registry", lambda: Registry())
        return mine(*args, show_progress=False, **kwargs)


def test_an_interrupted_run_resumes_where_it_stopped(tmp_path, monkeypatch):
    src = big_tree(tmp_path / "proj")
    out, shards = tmp_path / "corpus.jsonl.gz", tmp_path / "corpus.jsonl.gz.shards"
    with pytest.raises(KeyboardInterrupt):
        mine_with(monkeypatch, Interrupting(stop_at="mod05/m.py"), src, "python", out, chunk_files=3)
    assert not out.exists()
    manifest = json.loads((shards / "manifest.json").read_text())
    done = sorted(p.name for p in shards.glob("*.jsonl.gz"))
    # walk order: mod00..mod11, then pkg/; mod05 is in the second shard of three files
    assert len(done) == 1 and manifest["shards"][0]["name"] == done[0]
    assert manifest["shards"][0]["files"] == ["mod00/m.py", "mod01/m.py", "mod02/m.py"]
    assert not list(shards.glob("*.tmp"))

    resumed = Interrupting()
    report = mine_with(monkeypatch, resumed, src, "python", out, chunk_files=3)
    assert report.shards_reused == 1 and "1 shards already done by an interrupted run" in report.summary()
    assert "mod00/m.py" not in resumed.mined and "mod03/m.py" in resumed.mined  # the finished shard was not redone
    assert len(resumed.mined) == report.files_seen - 3 - 1  # the rest, except the file that is not UTF-8

    whole = tmp_path / "whole.jsonl.gz"
    fresh = mine(src, "python", whole, show_progress=False)
    assert out.read_bytes() == whole.read_bytes()
    assert (report.functions_found, report.kept, report.dropped) == (fresh.functions_found, fresh.kept, fresh.dropped)
    assert not shards.exists()


def test_a_changed_file_is_mined_again_on_resume(tmp_path, monkeypatch):
    src = big_tree(tmp_path / "proj")
    out = tmp_path / "corpus.jsonl.gz"
    with pytest.raises(KeyboardInterrupt):
        mine_with(monkeypatch, Interrupting(stop_at="mod09/m.py"), src, "python", out, chunk_files=3)
    assert len(list((tmp_path / "corpus.jsonl.gz.shards").glob("*.jsonl.gz"))) == 3
    (src / "mod04/m.py").write_text(PYTHON.replace("add_numbers", "renamed"), encoding="utf-8")

    resumed = Interrupting()
    report = mine_with(monkeypatch, resumed, src, "python", out, chunk_files=3)
    assert (report.shards_reused, report.shards_discarded) == (2, 1)
    assert "mod04/m.py" in resumed.mined and "mod00/m.py" not in resumed.mined
    assert "renamed" in {r["func_name"] for r in read_rows(out)}
    # other arguments are other shards: nothing is reused
    with pytest.raises(KeyboardInterrupt):
        mine_with(monkeypatch, Interrupting(stop_at="mod09/m.py"), src, "python", out, chunk_files=3)
    report = mine(src, "python", out, repo="other", chunk_files=3, show_progress=False)
    assert (report.shards_reused, report.shards_discarded) == (0, 3)


def test_a_damaged_shard_is_mined_again(tmp_path, monkeypatch):
    src = big_tree(tmp_path / "proj")
    out = tmp_path / "corpus.jsonl.gz"
    with pytest.raises(KeyboardInterrupt):
        mine_with(monkeypatch, Interrupting(stop_at="mod09/m.py"), src, "python", out, chunk_files=3)
    first = sorted((tmp_path / "corpus.jsonl.gz.shards").glob("*.jsonl.gz"))[0]
    first.write_bytes(first.read_bytes()[:-20])  # cut short, as by a failing disk
    report = mine(src, "python", out, chunk_files=3, show_progress=False)
    assert report.shards_reused == 3
    assert any(first.name in note and "mined its 3 files again" in note for note in report.notes)
    whole = tmp_path / "whole.jsonl.gz"
    mine(src, "python", whole, show_progress=False)
    assert out.read_bytes() == whole.read_bytes()


SLOW_MINER = """
import time

from structret import hookimpl
from structret_code.python_miner import PythonMiner


class Slow(PythonMiner):
    def functions(self, source, path):
        time.sleep(0.05)  # long enough to kill the run half way
        return super().functions(source, path)


@hookimpl
def register_miners(register):
    register("slow-python", "slow_miner:Slow")
"""


@pytest.mark.slow
@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGKILL", "SIGTERM"])
def test_killing_the_worker_processes_and_running_again(tmp_path, make_plugin, signal_name):
    """Ctrl-C or kill -9 to the whole process group of `structret mine --workers 2`, or `kill` to its
    main process only, then the same command."""
    import os
    import signal
    import subprocess
    import time

    site = make_plugin("slow-miner", "slow_miner", SLOW_MINER)
    src = tmp_path / "proj"
    for i in range(40):
        write_tree(src, {f"m{i:02d}.py": PYTHON.replace("add_numbers", f"add_numbers_{i}")})
    out, shards = tmp_path / "corpus.jsonl.gz", tmp_path / "corpus.jsonl.gz.shards"
    command = [sys.executable, "-m", "structret.cli", "mine", str(src), "--language", "slow-python",
               "--out", str(out), "--workers", "2", "--chunk-files", "2"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.Popen(command, env=env, start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(list(shards.glob("*.jsonl.gz"))) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    if signal_name == "SIGTERM":
        os.kill(run.pid, signal.SIGTERM)
    else:
        os.killpg(run.pid, getattr(signal, signal_name))
    _, stderr = run.communicate(timeout=30)  # returns once no process holds stderr: the workers are gone too
    if signal_name == "SIGINT":  # Ctrl-C removes partial shards itself; after a kill the next run does
        assert run.returncode == 1 and "Aborted!" in stderr and "Traceback" not in stderr
        assert not list(shards.glob("*.tmp"))
    done = {p.name: p.stat().st_mtime_ns for p in shards.glob("*.jsonl.gz")}
    assert 4 <= len(done) < 20 and not out.exists()

    rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    assert f"resuming: {len(done)} of 20 shards already done" in rerun.stderr
    assert f"{len(done)} shards already done by an interrupted run, not mined again" in rerun.stdout
    whole = tmp_path / "whole.jsonl.gz"
    mine(src, "slow-python", whole, show_progress=False)
    assert out.read_bytes() == whole.read_bytes()
