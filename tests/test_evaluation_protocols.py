"""Evaluation in one place: datasets declare their task, protocols register through a hook."""

import math
from pathlib import Path

import pytest
from _tiny_models import one_torch_thread, tiny_bert_dir  # noqa: F401  (fixtures)

from structret.bench import run_bench
from structret.datasets import load_dataset
from structret.errors import PluginError
from structret.evaluation import EvaluationError, evaluate, evaluate_retriever, make_protocol, task_of
from structret.evaluation.protocols import CSN_COLUMN, CSN_QUERY_COLUMN, POOL_COLUMN
from structret.records import (
    COIR_RANKING,
    CODE_SEARCH,
    MULTI_ANSWER_RANKING,
    GRADED_RERANK,
    PRETRAINING,
    QRELS_RANKING,
    CodeRecord,
    Dataset,
    Query,
    ReadStats,
    TextRecord,
)
from structret.registry import get_registry

DATA = Path(__file__).parent / "data"
BUILTIN = {CODE_SEARCH: "CodeSearch", GRADED_RERANK: "GradedRerank", QRELS_RANKING: "QrelsRanking",
           COIR_RANKING: "CoirRanking", MULTI_ANSWER_RANKING: "MultiAnswerRanking"}


def code_dataset(n: int, **fields) -> Dataset:
    # query i shares exactly one rare word with code i and nothing with the others
    corpus = {f"d{i}": CodeRecord(f"d{i}", f"def f_zz{i:05d}(x):\n    return x", "python") for i in range(n)}
    queries = {f"q{i}": Query(f"q{i}", f"compute the zz{i:05d} value") for i in range(n)}
    pairs = [(f"q{i}", f"d{i}") for i in range(n)]
    return Dataset("synthetic", corpus, queries, {q: {d: 1} for q, d in pairs}, ReadStats(used=n),
                   pairs=pairs, **fields)


def test_the_registry_lists_the_builtin_protocols(fresh_registry):
    registry = get_registry()
    assert set(BUILTIN) <= set(registry.names("protocol"))
    for task, cls in BUILTIN.items():
        entry = registry.get("protocol", task)
        assert entry.distribution == "structret" and entry.plugin == "datasets"
        assert entry.target == f"structret.evaluation.protocols:{cls}"  # lazy: no numpy at --help
        assert entry.help


@pytest.fixture(scope="module")
def esci_dir(tmp_path_factory):
    from test_datasets import EXAMPLE_NAMES, EXAMPLES, PRODUCT_NAMES, PRODUCTS, write_parquet

    from structret_datasets import esci

    folder = tmp_path_factory.mktemp("esci")
    write_parquet(folder / esci.EXAMPLES, EXAMPLE_NAMES, EXAMPLES)
    write_parquet(folder / esci.PRODUCTS, PRODUCT_NAMES, PRODUCTS)
    return folder


def test_every_builtin_reader_declares_its_task(fresh_registry, esci_dir, tmp_path):
    tevatron = tmp_path / "train.jsonl"
    tevatron.write_text('{"query": "q", "positive_passages": [{"text": "d"}]}\n', encoding="utf-8")
    cases = [
        (f"codesearchnet:{DATA / 'csn'}", "test", CODE_SEARCH),
        (f"adv:{DATA / 'adv'}", "test", CODE_SEARCH),
        (f"beir:{DATA / 'beir'}", "test", QRELS_RANKING),
        (f"esci:{esci_dir}", "test", GRADED_RERANK),
        (f"esci-santa-pretrain:{esci_dir}", "all", PRETRAINING),
        # the catalog's test split ranks the whole catalog (ATTEMPT); all/train are synopsis-package pairs
        (f"debian-packages:{DATA / 'debian'}", "test", QRELS_RANKING),
        (f"debian-packages:{DATA / 'debian'}", "all", CODE_SEARCH),
        (f"debian-packages:{DATA / 'debian'}", "train", CODE_SEARCH),
        (f"tevatron:{tevatron}", None, QRELS_RANKING),
        (f"coir:{DATA / 'coir' / 'cosqa'}", "test", COIR_RANKING),
        (f"cosqa:{DATA / 'cosqa'}", "test", CODE_SEARCH),
        (f"cosqa-plus:{DATA / 'cosqa-plus'}", "test", MULTI_ANSWER_RANKING),
        (f"ma-amazon:{DATA / 'ma-amazon'}", "test", QRELS_RANKING),
    ]
    for spec, split, task in cases:
        assert load_dataset(spec, split=split).task == task, spec
    # every registered reader is covered above
    assert {spec.partition(":")[0] for spec, _, _ in cases} == set(get_registry().names("dataset"))


def test_a_dataset_without_a_task_gets_the_one_its_fields_imply():
    pairs = code_dataset(3)
    assert pairs.task is None and task_of(pairs) == CODE_SEARCH
    graded = Dataset("g", {}, {}, {}, ReadStats(), labels={1: "E", 0: "I"})
    assert task_of(graded) == GRADED_RERANK
    assert task_of(Dataset("q", {}, {}, {}, ReadStats())) == QRELS_RANKING
    # a declared task wins over the fields
    assert task_of(code_dataset(3, task=QRELS_RANKING)) == QRELS_RANKING


def test_a_declared_task_picks_the_protocol_even_when_the_fields_suggest_another(fresh_registry):
    result = run_bench(code_dataset(20, task=QRELS_RANKING), ["bm25"], show_progress=False)
    assert result.protocol == "full ranking" and result.columns == ["nDCG@10", "R@100", "MRR@10"]
    assert result.rows["bm25"]["nDCG@10"] == 1.0


def test_evaluate_gives_the_bench_numbers(fresh_registry):
    from structret_lexical.bm25 import BM25Retriever

    dataset = code_dataset(1000, task=CODE_SEARCH)
    by_name = evaluate("bm25", dataset, show_progress=False)
    by_object = evaluate(BM25Retriever(), dataset, show_progress=False)
    row = run_bench(dataset, ["bm25"], show_progress=False).rows["bm25"]
    assert list(by_name) == [POOL_COLUMN, CSN_COLUMN, CSN_QUERY_COLUMN]
    assert by_name == by_object == {c: row[c] for c in by_name} == {c: 1.0 for c in by_name}


def test_evaluate_scores_a_dense_retriever_object_as_bench_scores_it(fresh_registry, tiny_bert_dir):
    from structret.search.system import DenseRetriever, make_retriever

    dataset = load_dataset(f"beir:{DATA / 'beir'}", split="test")
    retriever = make_retriever("hf-encoder", model=str(tiny_bert_dir), show_progress=False)
    assert isinstance(retriever, DenseRetriever)
    scores = evaluate(retriever, dataset, show_progress=False)
    again = make_retriever("hf-encoder", model=str(tiny_bert_dir), show_progress=False)
    protocol = make_protocol(dataset)
    row = evaluate_retriever(protocol, again, "tiny", announce=False)
    assert list(scores) == protocol.columns == ["nDCG@10", "R@100", "MRR@10"]
    assert scores == pytest.approx({c: row[c] for c in scores})
    assert all(0 <= v <= 1 for v in scores.values())


def test_evaluate_reports_a_measure_the_data_is_too_small_for_as_nan(fresh_registry):
    scores = evaluate("bm25", code_dataset(30), limit=10, show_progress=False)
    assert scores[POOL_COLUMN] == 1.0
    assert math.isnan(scores[CSN_COLUMN]) and math.isnan(scores[CSN_QUERY_COLUMN])


def test_an_unknown_task_is_refused_listing_the_known_ones(fresh_registry):
    dataset = Dataset("notes", {"d": TextRecord("d", "x")}, {"q": Query("q", "x")}, {"q": {"d": 1}}, ReadStats(),
                      task="qrels-rankin")
    with pytest.raises(PluginError) as err:
        evaluate("bm25", dataset, show_progress=False)
    message = str(err.value)
    assert "cannot evaluate dataset 'notes' (task 'qrels-rankin')" in message
    assert "Did you mean 'qrels-ranking'?" in message
    assert "code-search, coir-ranking, graded-rerank, multi-answer-ranking, qrels-ranking" in message
    assert "register_protocols" in message


def test_training_data_says_it_has_no_protocol(fresh_registry, esci_dir):
    dataset = load_dataset(f"esci-santa-pretrain:{esci_dir}", split="all")
    with pytest.raises(PluginError, match=r"\(task 'pretraining'\): unknown protocol 'pretraining'"):
        make_protocol(dataset)


def test_a_code_search_task_without_pairs_is_a_clear_error(fresh_registry):
    dataset = Dataset("broken", {"d": TextRecord("d", "x")}, {}, {}, ReadStats(), task=CODE_SEARCH)
    with pytest.raises(EvaluationError, match=r"dataset 'broken' declares the task 'code-search', which needs pairs"):
        make_protocol(dataset)


THIRD_PARTY = """
    from structret import hookimpl

    class FirstHit:
        '''Precision@1 over each query's judged documents: a task structret does not know.'''

        name = "first hit"
        columns = ["P@1"]

        def __init__(self, dataset, limit=None):
            self.qrels = dataset.qrels
            self.ids = list(dataset.corpus)
            self.records = [dataset.corpus[d] for d in self.ids]
            self.query_records = [dataset.queries[q] for q in dataset.qrels]
            self.sizes = {"queries": len(self.query_records), "documents": len(self.ids)}
            self.notes = ["Top document relevant or not."]
            self.bind(lambda r: r.text(), lambda q: q.text)

        def bind(self, document, query):
            self.doc_texts = [document(r) for r in self.records]
            self.queries = [query(q) for q in self.query_records]

        def query_texts(self):
            return self.queries

        def evaluate(self, retriever):
            scores = retriever.score(self.queries)
            hits = [self.ids[row.argmax()] in self.qrels[q.id] for row, q in zip(scores, self.query_records)]
            return {"P@1": sum(hits) / len(hits), "evaluated_by": "first-hit plugin"}

    class Forgetful(FirstHit):
        def evaluate(self, retriever):
            return {}

    @hookimpl
    def register_protocols(register):
        register("first-hit", FirstHit, help="precision at 1")
        register("forgetful", Forgetful)
"""


def _notes(task: str) -> Dataset:
    corpus = {"a": TextRecord("a", "apples are red"), "b": TextRecord("b", "bananas are yellow"),
              "c": TextRecord("c", "cherries are dark")}
    queries = {"q1": Query("q1", "red apples"), "q2": Query("q2", "yellow bananas"), "q3": Query("q3", "grapes")}
    return Dataset("fruit notes", corpus, queries, {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}}, ReadStats(),
                   task=task)


def test_a_third_party_protocol_evaluates_a_dataset_that_declares_its_task(make_plugin):
    make_plugin("first-hit-dist", "first_hit_plugin", THIRD_PARTY)
    assert get_registry().get("protocol", "first-hit").distribution == "first-hit-dist"
    dataset = _notes("first-hit")
    assert evaluate("bm25", dataset, show_progress=False) == {"P@1": pytest.approx(2 / 3)}
    result = run_bench(dataset, ["bm25"], show_progress=False)
    assert result.protocol == "first hit" and result.notes == ["Top document relevant or not."]
    assert result.rows["bm25"]["evaluated_by"] == "first-hit plugin"
    assert "| bm25 | 66.67 |" in result.markdown()


def test_a_protocol_that_breaks_its_contract_is_named(make_plugin):
    make_plugin("first-hit-dist", "first_hit_plugin", THIRD_PARTY)
    with pytest.raises(PluginError, match=r"protocol Forgetful \('first hit'\) broke its contract.*missing: P@1"):
        evaluate("bm25", _notes("forgetful"), show_progress=False)
