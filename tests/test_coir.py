"""CoIR: the ``coir`` reader, nDCG@10 as CoIR computes it, and ``bench --suite coir``'s table."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from structret.cli import cli
from structret.datasets import load_dataset
from structret.errors import DataError
from structret.evaluation import make_protocol
from structret.errors import SuiteError
from structret_papers.coir import find_tasks

COIR = Path(__file__).parent / "data" / "coir"


def _task(folder: Path, corpus: list[dict], queries: list[dict], qrels: list[tuple[str, str, int]]) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (folder / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in qrels))
    return folder


class FixedScores:
    """A retriever whose scores are given: query text -> document id -> score."""

    def __init__(self, scores: dict[str, dict[str, float]]):
        self.scores = scores

    def fit(self, docs):
        self.docs = docs

    def score(self, queries, doc_indices=None):
        return np.array([[self.scores[q].get(d, 0.0) for d in self.doc_ids] for q in queries])


def test_published_fixtures_read_with_every_row_used():
    for name in ("cosqa", "codetrans-dl"):
        dataset = load_dataset(f"coir:{COIR / name}")
        assert dataset.task == "coir-ranking"
        assert sum(dataset.stats.skipped.values()) == 0
        assert dataset.stats.read == dataset.stats.used > 0
    cosqa = load_dataset(f"coir:{COIR / 'cosqa'}")
    assert cosqa.qrels["q4"] == {"d7": 1}
    assert cosqa.corpus["d1"].text().startswith("def read_config(path):")


def test_ndcg_at_10_ignores_a_document_whose_id_is_the_querys(tmp_path):
    folder = _task(tmp_path / "t",
                   [{"_id": i, "title": "", "text": f"doc {i}"} for i in ("q1", "d1", "d2", "d3")],
                   [{"_id": "q1", "text": "first"}, {"_id": "q2", "text": "second"}],
                   [("q1", "d2", 1), ("q2", "d3", 1)])
    protocol = make_protocol(load_dataset(f"coir:{folder}"))
    retriever = FixedScores({"first": {"q1": 9, "d2": 8, "d1": 1}, "second": {"d1": 9, "d2": 8, "d3": 7}})
    retriever.doc_ids = protocol.doc_ids
    row = protocol.evaluate(retriever)
    # q1: its own id dropped, d2 first -> 1; q2: d3 third -> 1/log2(4)
    assert row["nDCG@10"] == pytest.approx((1.0 + 1 / math.log2(4)) / 2)
    assert row["identical_ids_dropped"] == 1


def test_tasks_are_found_in_coirs_order_and_bad_roots_say_what_to_give(tmp_path):
    assert [name for name, _ in find_tasks(COIR)] == ["cosqa", "codetrans-dl"]
    with pytest.raises(SuiteError, match="does not exist"):
        find_tasks(tmp_path / "nowhere")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(SuiteError, match="no CoIR task folder under it.*notes.txt"):
        find_tasks(tmp_path)


def test_a_task_missing_a_file_or_with_only_bad_rows_is_an_error_naming_it(tmp_path):
    task = tmp_path / "cosqa"
    shutil.copytree(COIR / "cosqa", task)
    (task / "queries.jsonl").unlink()
    with pytest.raises(DataError, match="has no queries.jsonl"):
        load_dataset(f"coir:{task}")
    shutil.copy(COIR / "cosqa" / "queries.jsonl", task / "queries.jsonl")
    (task / "corpus.jsonl").write_text('{"_id": "d1", "txt": "no text field"}\nnot json\n')
    with pytest.raises(DataError, match=r"no usable document.*corpus.jsonl:1.*corpus.jsonl:2"):
        load_dataset(f"coir:{task}")


def test_bench_suite_coir_prints_one_column_per_task_and_their_mean(tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["bench", "--suite", "coir", "--data-root", str(COIR), "--system", "bm25",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    header = next(line for line in result.output.splitlines() if line.startswith("| system"))
    assert header == "| system | cosqa | codetrans-dl | Avg |"
    table = json.loads((out / "results.json").read_text())
    values = table["rows"][0]["values"]
    assert values["avg"] == pytest.approx((values["cosqa"] + values["codetrans-dl"]) / 2)
    assert all(0 < values[k] <= 1 for k in ("cosqa", "codetrans-dl"))  # BM25 finds some of them
    # the cosqa column is the coir protocol's number for bm25 on that task
    from structret.evaluation import evaluate

    assert values["cosqa"] == pytest.approx(evaluate("bm25", load_dataset(f"coir:{COIR / 'cosqa'}"))["nDCG@10"])


@pytest.mark.parametrize("args, message", [
    (["--suite", "coir"], "give --data-root PATH"),
    (["--data-root", str(COIR)], "goes with --suite NAME"),
    (["--suite", "santa", "--data-root", str(COIR)], "leave out --data-root"),
    (["--suite", "coir", "--data-root", str(COIR), "--recipe", "minilm-code"], "leave out --recipe"),
])
def test_bench_coir_usage_errors(args, message):
    result = CliRunner().invoke(cli, ["bench", *args])
    assert result.exit_code == 2 and message in result.output


def test_codesearchnet_languages_count_as_one_task_in_the_mean(tmp_path):
    from structret_papers.coir import coir_table

    shutil.copytree(COIR / "cosqa", tmp_path / "cosqa")
    for lang in ("go", "python"):
        shutil.copytree(COIR / "codetrans-dl", tmp_path / f"CodeSearchNet-{lang}")
    table = coir_table(tmp_path, ["bm25"], vector_cache=False)
    assert [c["key"] for c in table.columns] == ["cosqa", "CodeSearchNet-go", "CodeSearchNet-python", "avg"]
    values = table.rows[0]["values"]
    assert values["cosqa"] != values["CodeSearchNet-go"]
    # CoIR's leaderboard: the languages' mean is one task beside cosqa
    assert values["avg"] == pytest.approx((values["cosqa"] + (values["CodeSearchNet-go"] + values["CodeSearchNet-python"]) / 2) / 2)
