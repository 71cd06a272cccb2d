"""The whole-project benchmark (structret.project.benchmark): docstrings blanked with their lines
kept, their summaries the queries, each answer a file and a last line, every fusion scored from one index."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from _scripts import load_script
from _tiny_models import tiny_bert_dir  # noqa: F401  (fixture)
from structret.project.benchmark import (CUTOFF, first_paragraph, metrics, prepare_project, read_queries,
                                           without_name)

PYTHON = '''import json


def read_config(path):
    """Read the settings file at path and return them as a dictionary.

    Longer notes that are not part of the query.
    """
    with open(path) as fh:
        return json.load(fh)


def write_config(path, values):
    """Save the values."""
    with open(path, "w") as fh:
        json.dump(values, fh)


def first_copy(x):
    """Return the value given, unchanged by any processing."""
    result = x
    return result


def second_copy(y):
    """Return the value given, unchanged by any processing."""
    value = y
    return value


def _helper(items):
    return [i for i in items if i]
'''

GO = '''package cache

// Lookup finds the entry stored under the key and reports whether it was there.
func Lookup(key string) (string, bool) {
	v, ok := store[key]
	return v, ok
}

func helper() int {
	return 1
}
'''


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "config.py").write_text(PYTHON)
    (root / "pkg" / "cache.go").write_text(GO)
    (root / "pkg" / "blob.py").write_bytes(b"\xff\xfe not utf-8 \x00")
    return root


def test_summaries_are_first_paragraphs_without_the_name():
    assert first_paragraph("  Read the file.\n  Then parse it.\n\n  Details.") == "Read the file. Then parse it."
    assert without_name("Lookup finds the entry", "Lookup") == "finds the entry"
    assert without_name("Lookup finds the entry", "Cache.Lookup") == "finds the entry"
    assert without_name("Finds the entry", "Lookup") == "Finds the entry"


def test_a_project_is_copied_blanked_with_its_lines_and_its_queries_point_at_them(project, tmp_path):
    out = tmp_path / "prepared"
    done = prepare_project(project, out)
    copy = (out / "src" / "pkg" / "config.py").read_text()
    original = (project / "pkg" / "config.py").read_text()
    # the same lines, the code untouched, no docstring text left
    assert len(copy.splitlines()) == len(original.splitlines())
    assert "Read the settings" not in copy and "Longer notes" not in copy and "json.load(fh)" in copy
    assert "Lookup finds" not in (out / "src" / "pkg" / "cache.go").read_text()

    queries = {q["query"]: q for q in read_queries(out)}
    # the summary only; "Save the values." is too short; the text two functions share has no single answer
    assert set(queries) == {"Read the settings file at path and return them as a dictionary.",
                            "finds the entry stored under the key and reports whether it was there."}
    read = queries["Read the settings file at path and return them as a dictionary."]
    assert read["path"] == "pkg/config.py" and read["language"] == "python"
    assert original.splitlines()[read["start"] - 1].startswith("def read_config")
    assert original.splitlines()[read["end"] - 1].strip() == "return json.load(fh)"
    go = queries["finds the entry stored under the key and reports whether it was there."]
    assert (project / "pkg" / "cache.go").read_text().splitlines()[go["end"] - 1] == "}"
    assert done.queries == 2 and done.dropped["ambiguous: the same text describes several functions"] == 2
    assert done.dropped["first paragraph not 4-60 words"] == 1
    assert done.functions == 7  # every function of the copy, undocumented ones included
    # the file that is not UTF-8 is named, not lost silently
    assert "not read" in done.skipped_files["pkg/blob.py"]
    assert json.loads((out / "project.json").read_text())["queries"] == 2


def test_metrics_of_ranks():
    scores = metrics([1, 2, None, CUTOFF + 1])
    assert scores["MRR@10"] == pytest.approx((1 + 0.5) / 4)
    assert scores["R@1"] == 0.25 and scores["R@10"] == 0.5
    assert scores["NDCG@10"] == pytest.approx((1 + 1 / 1.5849625007) / 4)


def test_every_fusion_is_scored_from_one_index(project, tmp_path, tiny_bert_dir, fresh_registry):
    from structret.project.benchmark import candidates
    from structret.models import load_model

    out = tmp_path / "prepared"
    prepare_project(project, out)
    model = load_model("hf-encoder", model=tiny_bert_dir)
    got = candidates(out, tmp_path / "idx", model=model, lexical="bm25-fields")
    assert got.units == 9 and len(got.answers) == 2  # 7 functions, and the code between them in 2 files
    lexical = dict(zip(got.answers, got.ranks("zscore:1.0")))
    # the lexical side finds a summary's own words: the settings query ranks read_config first
    assert lexical[("pkg/config.py", 10)] == 1
    dense = got.ranks("zscore:0.0")
    assert all(r is None or 1 <= r <= CUTOFF for r in dense)
    fused = got.ranks("rrf:0.5")
    assert len(fused) == 2 and all(r is None or 1 <= r <= CUTOFF for r in fused)


def test_the_call_graph_prior_counts_callers_by_name():
    from structret.project.benchmark import call_graph_prior
    from structret_lexical.fields import split_fields

    prior = call_graph_prior({"a": "def a(x):\n    return b(x) + c(x)\n", "b": "def b(y):\n    return c(y)\n",
                              "c": "def c(z):\n    return c(z - 1) if z else 0\n"}, split_fields)
    # c is called by a and b (its call to itself does not count), b by a only, a by nobody
    assert prior["c"] == 1.0 and 0 < prior["b"] < 1 and "a" not in prior


def test_the_structure_levers_reorder_the_fused_hits():
    import numpy as np

    from structret.project.benchmark import Candidates

    docs = ["x1", "y1", "y2", "z1"]
    where = {"x1": ("x.py", 1), "y1": ("y.py", 1), "y2": ("y.py", 9), "z1": ("z.py", 1)}
    # both sides agree: x1 > y1 > y2 > z1, close scores; the answer is y1
    scores = np.array([1.0, 0.95, 0.9, 0.1])
    got = Candidates("p", [("y.py", 1)], [(docs, scores)], [(docs, scores)], where, 4, prior={"y1": 1.0})
    assert got.ranks("zscore:0.3") == [2]
    # y1's file holds y2, also near the top: coherence lifts y1 over x1, whose file holds nothing else
    assert got.ranks("zscore:0.3", coherence=0.5) == [1]
    # y1 is called from everywhere: the prior lifts it too
    assert got.ranks("zscore:0.3", prior=0.2) == [1]
    assert got.ranks("zscore:0.3", coherence=0.0, prior=0.0) == [2]


def test_the_benchmark_scores_a_trained_model_with_the_fusions_it_is_given(project, tmp_path, tiny_bert_dir,
                                                                          fresh_registry, monkeypatch):
    script = load_script("project_search.py")
    monkeypatch.setattr(script, "projects", lambda args, split: [("python", project)])
    monkeypatch.setattr(script, "OUT", tmp_path / "results" / "project-search.json")
    args = SimpleNamespace(data_dir=str(tmp_path / "data"), languages=["python"], model=str(tiny_bert_dir),
                           fusion=["minmax:0.25"])
    script.prepare(args)
    script.run_model(args)
    record = json.loads((tmp_path / "results" / f"project-search-{tiny_bert_dir.name}.json").read_text())
    assert set(record["systems"]) == {"bm25-project", "dense", "default", "tuned", "given minmax:0.25"}
    tried = record["tuning"]["fusions"]
    assert len(tried) > 20 and tried[record["tuning"]["chosen"]] == max(tried.values())
    row = record["splits"]["test"]["python-proj"]
    assert row["queries"] == 2 and row["units"] == 9
    assert row["bm25-project"]["R@1"] >= 0.5  # the settings query's own words find read_config
    assert (tmp_path / "data" / "projects-index" / tiny_bert_dir.name / "valid" / "python-proj").is_dir()
