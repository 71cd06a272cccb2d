"""What a person reads of a hit: PATH:START-END and the lines that match the query, first."""

from __future__ import annotations

import json

from click.testing import CliRunner

from _tiny_models import tiny_bert_dir  # noqa: F401  (fixture)
from structret.cli import cli
from structret.search.index import Hit
from structret.snippets import locate, mark_terms, query_terms, readable, snippet, words

CODE = '''def load_settings(path):
    """Read the configuration file."""
    raw = open(path).read()
    settings = parseConfig(raw)
    return settings'''


def test_words_split_identifiers_and_queries_drop_stopwords():
    assert {"parse", "config", "parseconfig", "read", "file", "path"} <= words("parseConfig(read_file_path)")
    assert query_terms("how to read a config file") == {"read", "config", "file"}


def test_locations_come_from_the_id_relative_to_the_indexed_folder():
    assert str(locate("file:///src/proj/pkg/a.py#L4-L9", "/src/proj")) == "pkg/a.py:4-9"
    assert str(locate("file:///elsewhere/b.go#L1-L2", "/src/proj")) == "/elsewhere/b.go:1-2"
    assert str(locate("pkg/c.rb#L7-L7")) == "pkg/c.rb:7-7"
    assert locate("u12") is None and locate("https://example.org/x") is None


def test_matching_lines_come_first_with_their_file_line_numbers():
    shown = snippet(CODE, "read the config file", first_line=10, limit=3)
    # the docstring holds two query words ("configuration" is not "config"), then .read() and parseConfig
    assert [(n, found) for n, _, found in shown.lines] == [(11, {"read", "file"}), (12, {"read"}), (13, {"config"})]
    assert shown.matched == 3
    assert [n for n, _, _ in snippet(CODE, "nothing matches", first_line=1, limit=2).lines] == [1, 2]
    assert snippet(CODE, "read", limit=0).lines == []


def test_a_text_that_is_not_the_files_lines_is_not_numbered():
    hit = Hit("file:///p/a.py#L1-L9", 0.5, CODE)  # 5 lines for a 9-line span: the docstring was taken out
    row = readable(hit, "config", rank=1, root="/p")
    assert row["location"] == "a.py:1-9" and all(line["line"] is None for line in row["snippet"])
    exact = readable(Hit("file:///p/a.py#L3-L7", 0.5, CODE), "config", rank=1, root="/p")
    assert [line["line"] for line in exact["snippet"]][:2] == [6, 3]  # parseConfig, then the opening line


def test_marking_reaches_identifier_parts_and_escapes_the_rest():
    from html import escape

    styled = mark_terms("x = parseConfig(a < b)", {"config"}, lambda w: f"[{w}]")
    assert styled == "x = parse[Config](a < b)"
    html = mark_terms("if a < b: config()", {"config", "lt"}, lambda w: f"<mark>{w}</mark>", escape)
    assert html == "if a &lt; b: <mark>config</mark>()"  # "lt" of the escaped "<" is never marked


def _project(tmp_path):
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "settings.py").write_text("import os\n\n\n" + CODE + "\n\n\ndef other(x):\n    return x\n")
    return root


def test_search_prints_locations_and_snippets_and_json(tmp_path, tiny_bert_dir, monkeypatch, fresh_registry):
    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path / "cache"))
    root = _project(tmp_path)
    runner = CliRunner()
    built = runner.invoke(cli, ["index", str(root), "--backbone", "hf-encoder", "--model", str(tiny_bert_dir),
                                "--out", str(tmp_path / "idx")])
    assert built.exit_code == 0, built.output
    shown = runner.invoke(cli, ["search", str(tmp_path / "idx"), "read the config", "-k", "2", "--lines", "2"])
    assert shown.exit_code == 0, shown.output
    assert "pkg/settings.py:4-8" in shown.output and "pkg/settings.py:11-12" in shown.output
    # the function as written: its docstring is there, on its own line of the file
    assert '5      """Read the configuration file."""' in shown.output
    assert "\x1b[" not in shown.output  # not a terminal: no colours
    listed = runner.invoke(cli, ["search", str(tmp_path / "idx"), "read the config", "-k", "1", "--json"])
    assert listed.exit_code == 0, listed.output
    (result,) = json.loads(listed.stdout)
    hits = {h["location"]: h for h in result["hits"]}
    assert result["query"] == "read the config" and len(hits) == 1
    hit = next(iter(hits.values()))
    assert hit["path"] == "pkg/settings.py" and {hit["start"], hit["end"]} <= {4, 8, 11, 12}
    assert hit["snippet"] and hit["text"].startswith("def ")


def test_the_search_page_shows_the_snippet_and_the_whole_function_a_click_away(tmp_path, tiny_bert_dir,
                                                                                 monkeypatch, fresh_registry):
    from starlette.testclient import TestClient

    from structret.serving import create_app

    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path / "cache"))
    root = _project(tmp_path)
    built = CliRunner().invoke(cli, ["index", str(root), "--backbone", "hf-encoder", "--model", str(tiny_bert_dir),
                                     "--out", str(tmp_path / "idx")])
    assert built.exit_code == 0, built.output
    client = TestClient(create_app(str(tmp_path / "idx")))
    page = client.get("/", params={"q": "read the config", "k": "2"}).text
    assert "pkg/settings.py:4-8" in page and '<pre class="snippet">' in page
    assert '<mark class="term">Config</mark>' in page  # parseConfig's part
    assert '<details class="whole"><summary>the whole function</summary>' in page
    answer = client.get("/api/search", params={"q": "read the config", "k": "2"}).json()
    assert {h["location"] for h in answer["hits"]} == {"pkg/settings.py:4-8", "pkg/settings.py:11-12"}
    assert all(h["snippet"] for h in answer["hits"])
