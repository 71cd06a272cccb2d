"""The cosqa, cosqa-plus and ma-amazon readers on fixtures in their published formats, and their bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structret.datasets import load_dataset
from structret.errors import DataError
from structret.evaluation import evaluate, make_protocol

DATA = Path(__file__).parent / "data"


def _balanced(dataset):
    assert dataset.stats.read == dataset.stats.used + sum(dataset.stats.skipped.values())


def test_cosqa_test_split_pairs_each_query_with_its_code_base_entry():
    ds = load_dataset(f"cosqa:{DATA / 'cosqa'}")
    assert ds.task == "code-search" and len(ds.corpus) == 6
    assert ds.pairs == [("cosqa-train-1001", "0"), ("cosqa-train-1002", "1"), ("cosqa-train-1003", "3"),
                        ("cosqa-train-1004", "4")]
    assert ds.corpus["3"].text().startswith("def is_readable(filename):")
    assert ds.queries["cosqa-train-1003"].text == "python check file is readonly"
    assert sum(ds.stats.skipped.values()) == 0
    _balanced(ds)
    scores = evaluate("bm25", ds, show_progress=False)
    assert 0 < scores["MRR@100 (full pool)"] <= 1


def test_cosqa_dev_valid_and_train_splits():
    assert load_dataset(f"cosqa:{DATA / 'cosqa'}", split="valid").pairs == [
        ("cosqa-train-2001", "2"), ("cosqa-train-2002", "5")]
    train = load_dataset(f"cosqa:{DATA / 'cosqa'}", split="train")
    assert [q for q, _ in train.pairs] == ["cosqa-train-0", "cosqa-train-2"]  # the label-0 row is left out
    assert train.stats.skipped["label 0 (the code does not answer the query)"] == 1
    _balanced(train)


def test_cosqa_bad_rows_are_skipped_with_their_index_and_broken_json_is_an_error(tmp_path):
    folder = tmp_path / "cosqa"
    shutil.copytree(DATA / "cosqa", folder)
    rows = json.loads((folder / "cosqa-retrieval-test-500.json").read_text())
    rows[1]["retrieval_idx"] = 99
    del rows[2]["doc"]
    rows.append("not a row")
    (folder / "cosqa-retrieval-test-500.json").write_text(json.dumps(rows, indent=1))
    ds = load_dataset(f"cosqa:{folder}")
    assert len(ds.pairs) == 2
    assert ds.stats.skipped == {"retrieval_idx not in code_idx_map.txt": 1, "missing field 'doc'": 1,
                                "not a JSON object": 1}
    assert any("cosqa-retrieval-test-500.json:[1]" in e for e in ds.stats.examples)
    _balanced(ds)
    (folder / "cosqa-retrieval-test-500.json").write_text('[\n {"idx": "a",\n')
    with pytest.raises(DataError, match=r"cosqa-retrieval-test-500.json:3:1 is not valid JSON"):
        load_dataset(f"cosqa:{folder}")
    (folder / "code_idx_map.txt").unlink()
    with pytest.raises(DataError, match="has no code_idx_map.txt"):
        load_dataset(f"cosqa:{folder}")


def test_cosqa_plus_queries_may_match_several_codes():
    ds = load_dataset(f"cosqa-plus:{DATA / 'cosqa-plus'}")
    assert ds.task == "multi-answer-ranking" and len(ds.corpus) == 6
    assert ds.qrels["cosqa-train-1002"] == {"cosqa-plus-code-1": 1, "cosqa-plus-code-4": 1}
    assert set(ds.queries) == {"cosqa-train-1001", "cosqa-train-1002", "cosqa-train-1003"}
    assert ds.stats.skipped == {"no matching code in final_augment_query_code_pairs_for_search.json": 1}
    _balanced(ds)
    assert set(evaluate("bm25", ds, show_progress=False)) == {"MMRR", "nDCG@10", "R@100", "MRR@10"}
    with pytest.raises(DataError, match="needs dev_query_code_pairs.json"):
        load_dataset(f"cosqa-plus:{DATA / 'cosqa-plus'}", split="dev")


def test_ma_amazon_items_have_attempts_aspects_and_graded_judgements():
    ds = load_dataset(f"ma-amazon:{DATA / 'ma-amazon'}")
    assert ds.qrels["101"] == {"B07ZPKBL9V": 3, "B08L5M9BTJ": 2, "B01N5IB20Q": 1, "B000FJ5BEC": 0}
    item = ds.corpus["B08L5M9BTJ"]
    assert item.title == "Amazon Basics AA Rechargeable Batteries"
    assert item.content == "Pre-charged rechargeable batteries, 2000 mAh."
    assert item.aspects == {"brand": ["Amazon Basics"], "color": [], "category_1": ["Health & Household"],
                            "category_2": ["Household Supplies"], "category_3": ["Batteries"],
                            "category_4": ["AA Batteries"]}  # the fifth level is not an aspect
    assert ds.corpus["B000FJ5BEC"].aspects["category_1"] == [] and ds.corpus["B000FJ5BEC"].aspects["brand"] == []
    _balanced(ds)
    protocol = make_protocol(ds)
    assert protocol.columns == ["R(rel=3)@100", "R(rel=3)@500", "nDCG@50"]
    scores = evaluate("bm25", ds, show_progress=False)
    assert scores["R(rel=3)@100"] == 1.0  # 6 products: every Exact one is in the top 100
    assert 0 < scores["nDCG@50"] <= 1
    assert list(load_dataset(f"ma-amazon:{DATA / 'ma-amazon'}", split="valid").queries) == ["201"]


def test_ma_amazon_bad_lines_are_skipped_with_file_and_line(tmp_path):
    folder = tmp_path / "ma"
    shutil.copytree(DATA / "ma-amazon", folder)
    with open(folder / "test_qrel.txt", "a") as fh:
        fh.write(json.dumps({"q_id": 103, "q_text": "ghost", "E_list": ["B0NOTTHERE"], "S_list": [], "C_list": [],
                             "I_list": []}) + "\n")
        fh.write("{broken\n")
    with open(folder / "amazon_corpus_with_cate_clean.jsonl", "a") as fh:
        fh.write(json.dumps({"product_id": "B0X", "product_title": "x", "product_cate": "not a list"}) + "\n")
    ds = load_dataset(f"ma-amazon:{folder}")
    assert set(ds.queries) == {"101", "102"}
    assert ds.stats.skipped["product in E_list not in the corpus"] == 1
    assert ds.stats.skipped["'product_cate' is not a list of strings"] == 1
    assert any(e.startswith(f"{folder / 'test_qrel.txt'}:3:") for e in ds.stats.examples)
    _balanced(ds)
    (folder / "test_qrel.txt").unlink()
    with pytest.raises(DataError, match=r"no judgements for split 'test' \(test_qrel.txt or test_qrel_detail.txt"):
        load_dataset(f"ma-amazon:{folder}")


_row = st.one_of(
    st.fixed_dictionaries({"q_id": st.integers(1, 50), "q_text": st.text(min_size=0, max_size=5),
                           "E_list": st.lists(st.sampled_from(["B07ZPKBL9V", "B0MISSING", 7]), max_size=2)}),
    st.text(max_size=8),
)


@settings(max_examples=12, deadline=None)
@given(st.lists(_row, max_size=8))
def test_ma_amazon_counts_every_judgement_line(tmp_path_factory, rows):
    folder = tmp_path_factory.mktemp("ma")
    shutil.copy(DATA / "ma-amazon" / "amazon_corpus_with_cate_clean.jsonl", folder)
    lines = [json.dumps(r) if isinstance(r, dict) else r.replace("\n", " ") for r in rows]
    (folder / "test_qrel.txt").write_text("".join(line + "\n" for line in lines))
    ds = load_dataset(f"ma-amazon:{folder}")
    _balanced(ds)
    assert all(set(docs) <= set(ds.corpus) for docs in ds.qrels.values())


class FixedScores:
    def __init__(self, rows):
        self.rows = rows

    def score(self, queries, doc_indices=None):
        return np.array([self.rows[q] for q in queries], dtype=float)


def test_mmrr_is_each_answers_reciprocal_rank_among_the_non_answers():
    ds = load_dataset(f"cosqa-plus:{DATA / 'cosqa-plus'}")
    protocol = make_protocol(ds)
    at = {d: i for i, d in enumerate(protocol.doc_ids)}

    def scores(order):  # the documents in this order score 6, 5, 4, ...
        row = [0.0] * len(protocol.doc_ids)
        for rank, d in enumerate(order):
            row[at[f"cosqa-plus-code-{d}"]] = 6.0 - rank
        return row

    rows = {"python read config file into dict": scores([0, 1, 2, 3, 4, 5]),       # answer 0 first: 1
            "python date and time helpers": scores([2, 1, 3, 4, 0, 5]),            # answers 1, 4 at ranks 2, 4
            "python check file is readonly": scores([0, 1, 2, 3, 4, 5])}           # answer 3 at rank 4
    row = protocol.evaluate(FixedScores(rows))
    # CoSQA+: ranks 2 and 4 -> 1/2 and 1/(4-1); MMRR = mean(1, (1/2 + 1/3) / 2, 1/4)
    assert row["MMRR"] == pytest.approx((1 + 5 / 12 + 0.25) / 3)
    assert row["MRR@10"] == pytest.approx((1 + 0.5 + 0.25) / 3)
