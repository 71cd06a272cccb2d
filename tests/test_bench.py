"""structret bench: each dataset shape gets its protocol, numbers come out of real retrievers."""

from pathlib import Path

import pytest

from structret.bench import run_bench
from structret.datasets import load_dataset
from structret.evaluation.protocols import CSN_COLUMN, CSN_QUERY_COLUMN, POOL_COLUMN
from structret.records import CodeRecord, Dataset, Query, ReadStats

DATA = Path(__file__).parent / "data"


def code_dataset(n: int) -> Dataset:
    # query i shares exactly one rare word with code i and nothing with the others
    corpus, queries, pairs = {}, {}, []
    for i in range(n):
        word = f"zz{i:05d}"
        corpus[f"d{i}"] = CodeRecord(f"d{i}", f"def f_{word}(x):\n    return x", "python")
        queries[f"q{i}"] = Query(f"q{i}", f"compute the {word} value")
        pairs.append((f"q{i}", f"d{i}"))
    qrels = {q: {d: 1} for q, d in pairs}
    return Dataset("synthetic", corpus, queries, qrels, ReadStats(used=n), pairs=pairs)


class Reversed:
    """BM25 upside down: the right document is always scored lowest."""

    def __init__(self):
        from structret_lexical.bm25 import BM25Retriever

        self.inner = BM25Retriever()

    def fit(self, docs):
        self.inner.fit(docs)

    def score(self, queries, doc_indices=None):
        return -self.inner.score(queries, doc_indices)


def test_code_search_protocols_on_1200_pairs(fresh_registry):
    result = run_bench(code_dataset(1200), ["bm25"], show_progress=False)
    row = result.rows["bm25"]
    assert row[POOL_COLUMN] == row[CSN_COLUMN] == row[CSN_QUERY_COLUMN] == 1.0
    assert row["csn_batches"] == 1  # 1200 pairs: one batch of 1000, the last 200 dropped
    assert "| bm25 | 100.00 | 100.00 | 100.00 |" in result.markdown()


def test_code_search_protocols_punish_a_wrong_system(make_plugin):
    make_plugin("reversed-dist", "reversed_plugin", f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from structret import hookimpl
        @hookimpl
        def register_retrievers(register):
            register("reversed", "test_bench:Reversed")
    """)
    row = run_bench(code_dataset(1000), ["reversed"], show_progress=False).rows["reversed"]
    # the positive scores lowest and every other document ties above it: rank = n
    assert row[POOL_COLUMN] == 0.0
    assert row[CSN_QUERY_COLUMN] == pytest.approx(1 / 1000)


def test_small_code_set_marks_csn_not_applicable(fresh_registry):
    result = run_bench(code_dataset(50), ["bm25"], show_progress=False)
    assert result.rows["bm25"][CSN_COLUMN] is None
    assert "n/a" in result.markdown() and "needs >= 1000 pairs" in result.markdown()


def test_esci_is_reranked_with_two_and_four_class_gains(fresh_registry, esci_dir):
    dataset = load_dataset(f"esci:{esci_dir}", split="test")
    result = run_bench(dataset, ["bm25"], show_progress=False)
    assert result.columns == ["NDCG@100 two-class", "NDCG@100 four-class (esci-paper)"]
    row = result.rows["bm25"]
    assert 0 < row["NDCG@100 two-class"] <= 1 and 0 < row["NDCG@100 four-class (esci-paper)"] <= 1
    assert result.sizes["queries"] == len([q for q in dataset.queries if dataset.qrels.get(q)])


def test_beir_gets_full_ranking_metrics(fresh_registry):
    dataset = load_dataset(f"beir:{DATA / 'beir'}", split="test")
    result = run_bench(dataset, ["bm25"], show_progress=False)
    assert result.protocol == "full ranking"
    row = result.rows["bm25"]
    assert set(result.columns) <= set(row)
    assert all(0 <= row[c] <= 1 for c in result.columns)


@pytest.fixture(scope="module")
def esci_dir(tmp_path_factory):
    from test_datasets import EXAMPLE_NAMES, EXAMPLES, PRODUCT_NAMES, PRODUCTS, write_parquet

    from structret_datasets import esci

    folder = tmp_path_factory.mktemp("esci")
    write_parquet(folder / esci.EXAMPLES, EXAMPLE_NAMES, EXAMPLES)
    write_parquet(folder / esci.PRODUCTS, PRODUCT_NAMES, PRODUCTS)
    return folder
