"""Linearizers (Khan & Jang): raw tokens, DFS / DFS-parent (the paper's Tables 2 and 3) and BFS."""

from __future__ import annotations

from collections import Counter

import pytest

from structret.errors import PluginError
from structret.contracts import Linearizer
from structret.linearization import format_sequence, linearize_file, parent_tokens
from structret.records import CodeRecord, ItemRecord, Sequence
from structret.registry import get_registry
from structret_code.linearizers import RawLinearizer, TreeLinearizer, bfs, dfs, dfs_parent, raw, split_identifier

# Figure 2 of the paper, and its Tables 2 and 3, exactly as printed
FIGURE_2 = "def sum_two_numbers(a, b):\n    return a + b\n"
TABLE_2 = ("Module, FunctionDef, sum_two_numbers, arguments, arg, a, arg, b, body, "
           "Return, BinOpAdd, NameLoad, a, NameLoad, b").split(", ")
TABLE_3 = ("None, Module, FunctionDef, FunctionDef, arguments, arg, arguments, arg, FunctionDef, "
           "body, Return, BinOpAdd, NameLoad, BinOpAdd, NameLoad").split(", ")


def test_dfs_is_table_2():
    sequence = dfs().linearize(FIGURE_2, language="python")
    assert sequence.tokens == TABLE_2
    assert sequence.parents is None  # the plain DFS sequence is the paper's input without structure


def test_dfs_parent_is_table_3():
    record = CodeRecord(id="fig2", code=FIGURE_2, language="python")
    sequence = dfs_parent().linearize(record)
    assert sequence.tokens == TABLE_2
    assert [p or "None" for p in parent_tokens(sequence)] == TABLE_3


def test_python_field_tokens_are_suites_only():
    """``body``/``orelse`` are tokens, the module's body and expression lists are not."""
    code = "def f(x):\n    if x:\n        y = g(x, 1)\n    else:\n        y = 2\n    return y\n"
    assert dfs().linearize(code, language="python").tokens == [
        "Module", "FunctionDef", "f", "arguments", "arg", "x", "body",
        "If", "NameLoad", "x",
        "body", "Assign", "NameStore", "y", "Call", "NameLoad", "g", "NameLoad", "x", "Constant", "1",
        "orelse", "Assign", "NameStore", "y", "Constant", "2",
        "Return", "NameLoad", "y",
    ]


def test_python_folds_operators_and_keeps_ast_field_order():
    code = '@cache\ndef g(a, *rest) -> int:\n    """Doc."""\n    return not a < 1 <= rest[0]\n'
    sequence = dfs_parent().linearize(code, language="python")
    assert sequence.tokens == [
        "Module", "FunctionDef", "g", "arguments", "arg", "a", "arg", "rest", "body",
        "Expr", "Constant", "'Doc.'",
        "Return", "UnaryOpNot", "CompareLtLtE", "NameLoad", "a", "Constant", "1",
        "SubscriptLoad", "NameLoad", "rest", "Constant", "0",
        # decorators and the return annotation come after the body in ast's field order
        "NameLoad", "cache", "NameLoad", "int",
    ]
    parents = parent_tokens(sequence)
    assert parents[-4] == parents[-2] == "FunctionDef"  # not in the body


# --- all six languages: a realistic function each ------------------------------------------

FUNCTIONS = {
    "python": '''def load_config(path, defaults=None):
    """Read a JSON config, falling back to defaults."""
    settings = dict(defaults or {})
    try:
        with open(path, encoding="utf-8") as handle:  # may not exist
            settings.update(json.load(handle))
    except FileNotFoundError:
        log.warning(f"no config at {path}")
    return {k: v for k, v in settings.items() if v is not None}
''',
    "go": """func (c *Cache) Get(key string) (value []byte, ok bool) {
\t// lock for reading
\tc.mu.RLock()
\tdefer c.mu.RUnlock()
\tentry, ok := c.items[key]
\tif !ok || entry.expired(time.Now()) {
\t\treturn nil, false
\t}
\treturn entry.data, true
}""",
    # as CodeSearchNet stores a Java method: no class around it
    "java": """@Override
public List<String> readLines(Path file) throws IOException {
    List<String> lines = new ArrayList<>();
    try (BufferedReader reader = Files.newBufferedReader(file)) {
        for (String line = reader.readLine(); line != null; line = reader.readLine()) {
            lines.add(line.trim()); // keep order
        }
    }
    return lines;
}""",
    "javascript": """function debounce(fn, wait = 100) {
  let timer = null;
  return function (...args) {
    clearTimeout(timer);
    timer = setTimeout(() => fn.apply(this, args), wait);
  };
}""",
    "php": """public function findByEmail($email)
{
    // normalize first
    $user = $this->repository->findOneBy(['email' => strtolower($email)]);
    if ($user === null) {
        throw new NotFoundException("no user $email");
    }
    return $user;
}""",
    "ruby": """def fetch_all(ids, batch_size: 50)
  # one query per batch
  ids.each_slice(batch_size).flat_map do |batch|
    where(id: batch).to_a unless batch.empty?
  end
end""",
}


def assert_preorder(sequence: Sequence) -> None:
    """Parents are indices before the child, and each is the previous token or one of its ancestors."""
    parents = sequence.parents
    assert len(parents) == len(sequence.tokens) > 1
    assert parents[0] == -1 and parents.count(-1) == 1
    path = [0]  # the previous token and its ancestors, root first
    for i in range(1, len(parents)):
        p = parents[i]
        assert 0 <= p < i and p in path, (i, sequence.tokens[i], p)
        path = path[: path.index(p) + 1] + [i]


@pytest.mark.parametrize("language", sorted(FUNCTIONS))
def test_dfs_parent_is_a_preorder_in_every_language(language):
    linearizer = dfs_parent()
    sequence = linearizer.linearize(CodeRecord(id=language, code=FUNCTIONS[language], language=language))
    assert sequence is not None, linearizer.failures
    assert_preorder(sequence)
    assert not any("comment" in token or token.startswith(("#", "//")) for token in sequence.tokens)
    assert "_Wrapper" not in sequence.tokens  # the class a method is parsed in is not part of it
    assert dfs().linearize(FUNCTIONS[language], language=language).tokens == sequence.tokens


def test_tree_sitter_tokens_fold_operators_and_keep_names():
    go = dfs_parent().linearize(FUNCTIONS["go"], language="go")
    assert go.tokens[:2] == ["source_file", "method_declaration"]
    assert {"RLock", "items", "binary_expression:||", "unary_expression:!"} <= set(go.tokens)
    java = dfs_parent().linearize(FUNCTIONS["java"], language="java")
    assert java.tokens[:2] == ["program", "method_declaration"]  # under the grammar's root, as in a file
    assert "binary_expression:!=" in java.tokens
    assert java.tokens[java.tokens.index("argument_list") + 1] != "("  # punctuation is no token


def test_python_through_tree_sitter_is_a_preorder_too():
    sequence = dfs_parent(parser="tree-sitter").linearize(FUNCTIONS["python"], language="python")
    assert_preorder(sequence)
    assert sequence.tokens[:2] == ["module", "function_definition"]
    assert "boolean_operator:or" in sequence.tokens and "comparison_operator:is_not" in sequence.tokens


@pytest.mark.parametrize("language", ["python", "go", "ruby"])
def test_bfs_goes_level_by_level_over_the_same_tree(language):
    wide = bfs().linearize(FUNCTIONS[language], language=language)
    deep = dfs_parent().linearize(FUNCTIONS[language], language=language)
    depth = []
    for p in wide.parents:
        assert p < len(depth)  # parents come first in breadth-first order too
        depth.append(depth[p] + 1 if p >= 0 else 0)
    assert depth == sorted(depth)
    edges = Counter(zip(wide.tokens, parent_tokens(wide)))
    assert edges == Counter(zip(deep.tokens, parent_tokens(deep)))


def test_bfs_of_figure_2():
    sequence = bfs().linearize(FIGURE_2, language="python")
    assert sequence.tokens == ["Module", "FunctionDef", "sum_two_numbers", "arguments", "body", "arg", "arg",
                               "Return", "a", "b", "BinOpAdd", "NameLoad", "NameLoad", "a", "b"]
    assert parent_tokens(sequence)[5:8] == ["arguments", "arguments", "body"]


# --- raw tokens and identifier splitting -----------------------------------------------------


def test_split_identifier_follows_the_paper():
    assert split_identifier("camelCase") == ["camel", "Case"]  # case kept, as the paper shows
    assert split_identifier("readInputFile") == ["read", "Input", "File"]
    assert split_identifier("read_input") == ["read", "input"]
    assert split_identifier("HTMLParser") == ["HTML", "Parser"]
    assert split_identifier("__init__") == ["init"]
    assert split_identifier("_") == ["_"]
    for token in ("+", "'read_input'", "1e5", "0x1F", ":="):
        assert split_identifier(token) == [token]


def test_raw_splits_identifiers_on_request():
    code = "def load(readInputFile, read_input):\n    return readInputFile(read_input)  # why\n"
    assert raw().linearize(code, language="python").tokens == [
        "def", "load", "(", "readInputFile", ",", "read_input", ")", ":",
        "return", "readInputFile", "(", "read_input", ")",
    ]
    assert raw(split_identifiers=True).linearize(code, language="python").tokens == [
        "def", "load", "(", "read", "Input", "File", ",", "read", "input", ")", ":",
        "return", "read", "Input", "File", "(", "read", "input", ")",
    ]
    assert raw(split_identifiers=True).linearize("var readInputFile = read_input;", language="javascript").tokens == [
        "var", "read", "Input", "File", "=", "read", "input", ";"
    ]


def test_raw_keeps_strings_whole():
    code = 'def f(x):\n    return f"{x!r}_y" + \'a_b\'\n'
    assert raw(split_identifiers=True).linearize(code, language="python").tokens[-3:] == ['f"{x!r}_y"', "+", "'a_b'"]


@pytest.mark.parametrize("language", ["go", "java", "javascript", "php", "ruby"])
def test_raw_is_what_the_miner_stores_as_code_tokens(language):
    import structret_code.treesitter_miner as miners

    source = FUNCTIONS[language]
    if language == "java":
        source = "class Reader {\n" + source + "\n}"
    elif language == "php":
        source = "<?php\nclass Users {\n" + source + "\n}"
    (mined,) = getattr(miners, language)().functions(source, f"x.{language}")
    assert raw().linearize(mined.code, language=language).tokens == mined.code_tokens


def test_split_sub_tokens_hang_under_the_leafs_node():
    code = "def read_input(fileName):\n    return fileName\n"
    sequence = dfs_parent(split_identifiers=True).linearize(code, language="python")
    assert sequence.tokens[:8] == ["Module", "FunctionDef", "read", "input", "arguments", "arg", "file", "Name"]
    assert parent_tokens(sequence)[2:8] == ["FunctionDef", "FunctionDef", "FunctionDef", "arguments", "arg", "arg"]
    assert_preorder(sequence)
    go = dfs_parent(split_identifiers=True).linearize(FUNCTIONS["go"], language="go")
    assert_preorder(go)
    r = go.tokens.index("R")
    assert go.tokens[r + 1] == "Lock" and go.parents[r] == go.parents[r + 1]


def test_max_tokens_truncates_with_valid_parents():
    for make in (dfs_parent, bfs):
        sequence = make(max_tokens=6).linearize(FIGURE_2, language="python")
        assert len(sequence.tokens) == len(sequence.parents) == 6
        assert all(p < i for i, p in enumerate(sequence.parents))
    assert dfs_parent(max_tokens=6).linearize(FIGURE_2, language="python").tokens == TABLE_2[:6]
    assert len(raw(max_tokens=3).linearize(FUNCTIONS["go"], language="go").tokens) == 3


# --- failures and errors ----------------------------------------------------------------------


def test_unparsable_code_gives_none_and_is_counted():
    tree = dfs_parent()
    assert tree.linearize("def f(:\n    pass\n", language="python") is None
    assert tree.linearize("print 'python 2'", language="python") is None
    assert tree.linearize("func broken( {", language="go") is None
    assert tree.failures["go: tree-sitter could not parse it"] == 1
    assert sum(n for reason, n in tree.failures.items() if reason.startswith("python: SyntaxError")) == 2
    tokens = raw()
    assert tokens.linearize("def f(a,\n", language="python") is None
    assert tokens.linearize("public void f( {", language="java") is None
    assert sum(tokens.failures.values()) == 2
    assert dfs_parent(parser="tree-sitter").linearize("def f(:", language="python") is None
    # and the linearizers keep working after a failure
    assert tree.linearize(FIGURE_2, language="python").tokens == TABLE_2


def test_usage_errors_speak_to_the_user():
    with pytest.raises(PluginError, match="needs the language"):
        dfs().linearize(FIGURE_2)
    with pytest.raises(PluginError, match="reads Python only"):
        dfs(parser="ast").linearize(FUNCTIONS["go"], language="go")
    with pytest.raises(PluginError, match="no parser 'tokenize'"):
        dfs(parser="tokenize")
    with pytest.raises(PluginError, match="max_tokens"):
        raw(max_tokens=0)
    with pytest.raises(PluginError, match="CodeRecord or a string"):
        raw().linearize(ItemRecord(id="1", title="soap"))
    with pytest.raises(PluginError, match="tree-sitter-cobol"):
        raw(language="cobol")


# --- linearize_file and the registry ------------------------------------------------------------


def test_linearize_file_formats_like_the_paper(tmp_path):
    path = tmp_path / "figure2.py"
    path.write_text(FIGURE_2)
    result = linearize_file(path, "dfs-parent")
    assert result.language == "python" and not result.failures
    where = f"15 tokens, python, {path}"
    assert result.format().splitlines() == [
        f"DFS sequence ({where}):", ", ".join(TABLE_2),
        "DFS-Parent sequence (the parent of each token above; None = a root):", ", ".join(TABLE_3)]
    assert linearize_file(path, "dfs").format().splitlines() == [f"DFS sequence ({where}):", ", ".join(TABLE_2)]
    # Table 1 with its comma token: the paper's listing cannot show it apart from the separators
    assert linearize_file(path, "raw", split_identifiers=True).format().splitlines()[1] == (
        "def, sum, two, numbers, (, a, ,, b, ), :, return, a, +, b"
    )
    assert linearize_file(path, "raw").format().startswith("Raw sequence (")


def test_linearize_file_reports_unreadable_code_and_unknown_languages(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    result = linearize_file(broken, "dfs")
    assert result.sequence is None
    assert result.format().startswith(f"note: dfs could not read {broken}: python: SyntaxError")
    notes = tmp_path / "notes.txt"
    notes.write_text(FIGURE_2)
    with pytest.raises(PluginError, match="needs the language"):
        linearize_file(notes, "dfs")
    assert linearize_file(notes, "dfs", language="python").tokens == TABLE_2


def test_format_escapes_layout_inside_tokens():
    assert format_sequence(Sequence(["string", "'a\\nb'\n"], [-1, 0])) == "string, 'a\\\\nb'\\n\nNone, string"
    assert format_sequence(Sequence([])) == "(no tokens)"


def test_registry_lists_the_linearizers(fresh_registry):
    registry = get_registry()
    assert {"raw", "dfs", "dfs-parent", "bfs"} <= set(registry.names("linearizer"))
    made = registry.create("linearizer", "dfs-parent", split_identifiers=True, max_tokens=64)
    assert isinstance(made, TreeLinearizer) and made.with_parents and isinstance(made, Linearizer)
    assert isinstance(registry.create("linearizer", "raw"), RawLinearizer)
    with pytest.raises(PluginError, match="Did you mean 'max_tokens'"):
        registry.create("linearizer", "bfs", max_token=3)
