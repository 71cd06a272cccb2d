"""semble's code-search benchmark as a suite: its layout read, its metric on hand-made cases (the README's
list: a path-only target, a span touching a unit's last line, a suffix path, two results in one file), and
one command end to end on a two-repository fixture."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from structret.cli import cli
from structret.errors import DataError, SuiteError
from structret_papers.semble import Target, hits_target, ndcg_at_10, parse_system, read_benchmark, same_path


def _dcg(*ranks: int) -> float:
    return sum(1 / math.log2(r + 1) for r in ranks)


def test_a_path_only_target_is_hit_by_any_unit_of_its_file():
    target = Target("pkg/routing.py")
    assert hits_target(("pkg/routing.py", 200, 240), target)
    assert ndcg_at_10([("pkg/other.py", 1, 9), ("pkg/routing.py", 5, 9)], [target]) == pytest.approx(_dcg(2))


def test_a_span_touching_a_units_last_line_overlaps_and_one_past_it_does_not():
    target = Target("a.py", 10, 20)
    assert hits_target(("a.py", 1, 10), target) and hits_target(("a.py", 20, 30), target)
    assert not hits_target(("a.py", 1, 9), target) and not hits_target(("a.py", 21, 30), target)
    assert not hits_target(("a.py", None, None), target)  # a hit without lines cannot overlap a span


def test_a_suffix_path_matches_either_way_and_a_part_of_a_name_does_not():
    assert same_path("fastapi/params.py", "params.py") and same_path("params.py", "fastapi/params.py")
    assert not same_path("fastapi/myparams.py", "params.py")


def test_two_results_in_one_file_earn_once_for_one_target_and_the_ideal_is_cut_at_ten():
    one = [Target("a.py")]
    assert ndcg_at_10([("a.py", 1, 5), ("a.py", 6, 9)], one) == pytest.approx(1.0)
    two = [Target("a.py"), Target("b.py")]
    # the second hit in a.py earns nothing; b.py is found at rank 3
    assert ndcg_at_10([("a.py", 1, 5), ("a.py", 6, 9), ("b.py", 1, 2)], two) == pytest.approx(_dcg(1, 3) / _dcg(1, 2))
    # one hit may answer two targets (a file and a span in it), each counted at that rank
    both = [Target("a.py"), Target("a.py", 3, 4)]
    assert ndcg_at_10([("a.py", 1, 5)], both) == pytest.approx(_dcg(1, 1) / _dcg(1, 2))
    many = [Target(f"f{i}.py") for i in range(12)]
    assert ndcg_at_10([(f"f{i}.py", 1, 2) for i in range(10)], many) == pytest.approx(1.0)
    assert ndcg_at_10([("x.py", 1, 2)] * 10 + [("a.py", 1, 2)], one) == 0.0  # past the tenth hit


def _fixture(root: Path) -> Path:
    """Two repositories: a Python one with two modules, and one in a language no miner reads."""
    py = root / "repos" / "tiny" / "src"
    (py / "pkg").mkdir(parents=True)
    (py / "pkg" / "dates.py").write_text(
        "def parse_iso_date(text):\n    year, month, day = text.split('-')\n    return int(year), int(month), int(day)\n"
        "\n\ndef format_iso_date(year, month, day):\n    return f'{year:04d}-{month:02d}-{day:02d}'\n")
    (py / "pkg" / "mail.py").write_text(
        "def send_email_message(server, to, body):\n    server.connect()\n    server.send(to, body)\n"
        "    server.close()\n")
    other = root / "repos" / "odd"
    other.mkdir(parents=True)
    (other / "main.zzz").write_text("nothing reads this\n")
    (root / "repos.json").write_text(json.dumps([
        {"name": "tiny", "language": "python", "revision": "abc", "benchmark_root": "src"},
        {"name": "odd", "language": "zzz", "revision": "def", "benchmark_root": None}]))
    notes = root / "annotations"
    notes.mkdir()
    (notes / "tiny.json").write_text(json.dumps([
        {"query": "send an email message to a server", "relevant": ["src/pkg/mail.py"], "secondary": [],
         "category": "semantic"},
        {"query": "parse_iso_date", "relevant": [{"path": "pkg/dates.py", "start_line": 1, "end_line": 3}],
         "secondary": [], "category": "symbol"}]))
    (notes / "odd.json").write_text(json.dumps([{"query": "anything", "relevant": ["main.zzz"], "category": "semantic"}]))
    return root


def test_the_layout_is_read_and_what_is_missing_is_named(tmp_path):
    root = _fixture(tmp_path / "bench")
    repos = read_benchmark(root)
    assert [(r.name, r.language, r.root.name, len(r.queries)) for r in repos] == [
        ("tiny", "python", "src", 2), ("odd", "zzz", "odd", 1)]
    assert repos[0].queries[1].targets == [Target("pkg/dates.py", 1, 3)]
    with pytest.raises(SuiteError, match="holds no repos.json"):
        read_benchmark(tmp_path)
    (root / "annotations" / "odd.json").unlink()
    with pytest.raises(SuiteError, match="annotations of odd"):
        read_benchmark(root)
    (root / "annotations" / "odd.json").write_text(json.dumps([{"query": "q", "relevant": [{"path": "a", "start_line": 5,
                                                                                              "end_line": 2}]}]))
    with pytest.raises(DataError, match="start_line <= end_line"):
        read_benchmark(root)


def test_system_names_say_which_sides_answer(fresh_registry):
    assert parse_system("bm25-project+minilm") == ("bm25-project", "minilm", None)
    assert parse_system("minilm") == (None, "minilm", None)
    assert parse_system("bm25-project") == ("bm25-project", None, None)  # a lexical index: no model
    with pytest.raises(SuiteError, match="not a registered retriever"):
        parse_system("bm26+minilm")


def test_bench_suite_semble_scores_each_repository_and_counts_what_it_cannot_read(tmp_path, monkeypatch):
    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path / "cache"))
    root = _fixture(tmp_path / "bench")
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["bench", "--suite", "semble", "--data-root", str(root), "--system", "bm25-project",
                                      "--system", "bm25-project+minilm", "--out", str(out)])
    assert result.exit_code == 0, result.output
    table = json.loads((out / "results.json").read_text())
    rows = {r["label"]: r for r in table["rows"]}
    lexical = rows["bm25-project"]["values"]
    # both queries of the tiny repository find their answer first by their words; nothing is read in odd
    assert lexical["tiny"] == pytest.approx(1.0) and lexical["odd"] == 0.0 and lexical["macro"] == pytest.approx(0.5)
    assert lexical["cat:symbol"] == pytest.approx(1.0) and lexical["cat:semantic"] == pytest.approx(0.5)
    assert rows["bm25-project"]["system"]["skipped"] == ["odd"]
    assert "nothing indexed in odd" in result.output and "query p50" in result.output
    assert 0 <= rows["bm25-project+minilm"]["values"]["tiny"] <= 1
