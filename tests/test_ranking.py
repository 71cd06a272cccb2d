"""The ranking rules that read a project's structure (structret.search.ranking), one at a time and through an
index of a source folder, with --explain."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from structret.cli import cli
from structret.errors import StructretError
from structret.search.ranking import Ranking, UnitView, is_symbol, penalised, rerank, symbol_names

UNITS = {
    "a": ("src/client.py", "Client.get", "    def get(self, url):\n        return self.session.get(url)\n"),
    "b": ("src/client.py", "Client", "class Client:\n    timeout = 5\n"),
    "c": ("src/routing.py", "route", "def route(path):\n    return table[path]\n"),
    "d": ("tests/test_client.py", "test_get", "def test_get():\n    assert Client().get('x')\n"),
    "e": ("src/util.py", "helper", "def helper(x):\n    return Client(x)\n"),
}


def view():
    return UnitView(list(UNITS), lambda i: UNITS[i][0], lambda i: UNITS[i][1], lambda i: UNITS[i][2])


def order(query, hits, ranking, k=5):
    return [h.id for h in rerank(query, [(i, s, ("lexical",)) for i, s in hits], ranking, view(), k)]


def test_queries_that_name_a_symbol_and_queries_in_words():
    for symbol in ("Depends", "parse_args", "http.Client", "Router::new", "getUser", "MAX_SIZE", "_private"):
        assert is_symbol(symbol), symbol
    for words in ("session", "how are routes matched", "read a config file"):
        assert not is_symbol(words), words
    assert symbol_names("Router::new") == ({"new", "Router::new"}, 1.0)
    assert symbol_names("where is the HttpClient made") == ({"HttpClient"}, 0.5)


def test_the_unit_that_defines_the_symbol_asked_for_comes_first_even_if_no_side_listed_it():
    hits = [("e", 3.0), ("d", 2.0), ("a", 1.0)]  # the class itself is not among the candidates
    assert order("Client", hits, Ranking()) == ["e", "d", "a"]
    assert order("Client", hits, Ranking(definition=2))[0] == "b"


def test_a_path_that_matches_the_query_words_lifts_its_units():
    hits = [("e", 1.0), ("c", 0.9), ("b", 0.0)]  # scores are mapped onto [0, 1] among the candidates
    assert order("how are routes matched", hits, Ranking())[:2] == ["e", "c"]
    assert order("how are routes matched", hits, Ranking(stem=1))[:2] == ["c", "e"]  # routing.py ~ routes


def test_tests_are_penalised_and_one_file_does_not_fill_the_list():
    assert penalised("tests/test_client.py") and penalised("pkg/foo_test.go") and penalised("src/Foo.test.ts")
    assert penalised("vendor/lib/x.c") and penalised("examples/demo.py") and not penalised("src/client.py")
    assert order("get a page", [("d", 1.0), ("e", 0.8), ("c", 0.0)], Ranking(penalty=0.3))[:2] == ["e", "d"]
    hits = [("a", 1.0), ("b", 0.95), ("e", 0.9), ("c", 0.0)]
    assert order("get", hits, Ranking())[:3] == ["a", "b", "e"]
    assert order("get", hits, Ranking(saturation=0.5))[:3] == ["a", "e", "b"]  # client.py's second unit waits


def test_a_file_with_several_matches_lifts_its_best_unit():
    hits = [("e", 1.0), ("a", 0.95), ("b", 0.9), ("c", 0.0)]
    assert order("session get", hits, Ranking(coherence=0.5))[0] == "a"


def test_rankings_are_read_from_specs_and_refused_clearly():
    assert Ranking.of("definition=2,penalty=0.3") == Ranking(definition=2, penalty=0.3)
    assert Ranking.of(Ranking(stem=1).as_dict()) == Ranking(stem=1) and not Ranking.of(None).active
    with pytest.raises(StructretError, match="unknown rule"):
        Ranking.of("definitions=2")
    with pytest.raises(StructretError, match="in \\[0, 1\\]"):
        Ranking.of("penalty=3")
    with pytest.raises(StructretError, match="NAME=VALUE"):
        Ranking.of("definition")


def test_a_lexical_index_of_a_folder_applies_its_rules_and_explains_them(tmp_path):
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "src" / "params.py").write_text("class Depends:\n    def __init__(self, dependency):\n"
                                            "        self.dependency = dependency\n")
    (root / "src" / "app.py").write_text("from params import Depends\n\n\ndef handler(db=Depends(get_db)):\n"
                                         "    return Depends(db)\n")
    (root / "tests" / "test_params.py").write_text("def test_depends():\n    assert Depends(1) and Depends(2)\n")
    out = tmp_path / "idx"
    runner = CliRunner()
    done = runner.invoke(cli, ["index", str(root), "--backbone", "none", "--out", str(out)])
    assert done.exit_code == 0, done.output
    assert json.loads((out / "structret.json").read_text())["ranking"]["definition"] > 0
    found = runner.invoke(cli, ["search", str(out), "Depends", "-k", "3", "--explain"])
    assert found.exit_code == 0, found.output
    lines = found.output.splitlines()
    assert "src/params.py:1" in lines[1] and "defines Depends" in lines[2], found.output
    plain = runner.invoke(cli, ["index", str(root), "--backbone", "none", "--ranking", "none", "--out",
                                str(tmp_path / "plain")])
    assert plain.exit_code == 0, plain.output
    ranked = json.loads(runner.invoke(cli, ["search", str(tmp_path / "plain"), "Depends", "--json"]).stdout)
    assert all(not hit["why"] for hit in ranked[0]["hits"])
    bad = runner.invoke(cli, ["index", str(root), "--backbone", "none", "--ranking", "boost=1", "--out",
                              str(tmp_path / "bad")])
    assert bad.exit_code != 0 and "unknown rule" in bad.output and "Traceback" not in bad.output
