"""The evaluation protocols: what a dataset's task means as queries, documents and measures.

A dataset declares its task (``Dataset.task``); the protocol registered under that name
through the ``register_protocols`` hook evaluates it. The built-in ones are registered by
the datasets plugin, whose readers declare the tasks:

* ``code-search`` (``CodeSearch``): one aligned document per query -- MRR@100 over the
  full pool and CodeSearchNet's 999-distractor MRR in both directions;
* ``graded-rerank`` (``GradedRerank``): graded judgements per query (ESCI) -- each query
  reranks its own judged documents, NDCG@100 with two- and four-class gains;
* ``qrels-ranking`` (``QrelsRanking``): any qrels (BEIR, the Debian catalog's test
  split) -- the whole corpus ranked, nDCG@10, R@100, MRR@10 or the dataset's own measures;
* ``multi-answer-ranking`` (``MultiAnswerRanking``): several right answers per query
  (CoSQA+) -- the whole corpus ranked, CoSQA+'s MMRR beside nDCG@10, R@100, MRR@10;
* ``coir-ranking`` (``CoirRanking``): a CoIR task -- the whole corpus ranked, nDCG@10 as
  CoIR computes it (identical query/document ids ignored, pytrec_eval per query, mean).

``EvaluationProtocol`` below is everything core calls on a protocol.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from structret.contracts import EvaluationProtocol  # noqa: F401  (re-exported: the contract)
from structret.evaluation.metrics import EvaluationError, csn_mrr, evaluate_run, full_pool_ranks, gain_levels, mrr, rerank_run
from structret.records import Dataset, Query, Record

if TYPE_CHECKING:
    from structret.contracts import Retriever

POOL_COLUMN = "MRR@100 (full pool)"
# CodeSearchNet's model_test.py ranks, for each code, the batch's queries; the papers
# describe each query ranking codes. Both are reported so neither is mistaken for the other.
CSN_COLUMN = "MRR CSN-999 (model_test: code ranks queries)"
CSN_QUERY_COLUMN = "MRR 999 distractors (query ranks codes)"


def own_text(record: Record) -> str:
    """A record as a system without its own format reads it."""
    return record.text()


def query_text(query: Query) -> str:
    return query.text


class CodeSearch:
    """One aligned document per query: full-pool MRR@100 and CodeSearchNet's 999-distractor MRR."""

    name = "code search"
    columns = [POOL_COLUMN, CSN_COLUMN, CSN_QUERY_COLUMN]

    def __init__(self, dataset: Dataset, limit: int | None = None):
        if not dataset.pairs:
            raise _missing(dataset, "code-search", "pairs (query id, document id)")
        pairs = dataset.pairs[:limit] if limit else dataset.pairs
        if limit:
            doc_ids = list(dict.fromkeys(d for _, d in pairs))
        else:
            doc_ids = list(dataset.corpus)
        position = {d: i for i, d in enumerate(doc_ids)}
        self.doc_records = [dataset.corpus[d] for d in doc_ids]
        self.query_records = [dataset.queries[q] for q, _ in pairs]
        self.bind(own_text, query_text)
        self.positives = np.array([position[d] for _, d in pairs])
        self.sizes = {"queries": len(self.queries), "documents": len(doc_ids)}
        self.notes = [
            "Full pool: every query against every document, rank = 1 + #{others scoring >= the positive}.",
            "CSN-999: seed-0 shuffle, batches of 1000 pairs (last partial batch dropped), ties against the"
            " model, per-batch MRR averaged; github/CodeSearchNet's model_test.py ranks, for each code, the"
            " batch's 1000 queries; the other column ranks, for each query, the batch's 1000 codes.",
        ]
        if len(pairs) < 1000:
            self.notes.append(f"CSN needs >= 1000 pairs, this set has {len(pairs)}: n/a.")
        else:
            used = 1000 * (len(pairs) // 1000)
            self.notes.append(f"CSN-999 scored {used} of the {len(pairs)} pairs ({used // 1000} batches; "
                              f"the last {len(pairs) - used} dropped).")

    def bind(self, document: Callable[[Record], str], query: Callable[[Query], str]) -> None:
        self.doc_texts = [document(r) for r in self.doc_records]
        self.queries = [query(q) for q in self.query_records]

    def query_texts(self) -> list[str]:
        return self.queries

    def evaluate(self, retriever: Retriever) -> dict[str, Any]:
        queries, positives = self.queries, self.positives
        ranks = full_pool_ranks(lambda qi: retriever.score([queries[i] for i in qi]), positives)
        row: dict[str, Any] = {POOL_COLUMN: mrr(ranks, 100)}
        for column, among in ((CSN_COLUMN, "queries"), (CSN_QUERY_COLUMN, "documents")):
            if len(queries) < 1000:
                row[column] = None
                continue
            row[column], row["csn_batches"] = csn_mrr(
                lambda qi, di: retriever.score([queries[i] for i in qi], doc_indices=positives[di]),
                len(queries), rank_among=among,
            )
        return row


class GradedRerank:
    """Graded judgements per query (ESCI): rerank each query's judged documents, NDCG@100."""

    name = "reranking judged documents"

    def __init__(self, dataset: Dataset, limit: int | None = None):
        qids = [q for q in dataset.queries if dataset.qrels.get(q)]
        qids = qids[:limit] if limit else qids
        self.qrels = {q: dataset.qrels[q] for q in qids}
        doc_ids = list(dict.fromkeys(d for q in qids for d in self.qrels[q]))
        self.position = {d: i for i, d in enumerate(doc_ids)}
        self.doc_records = [dataset.corpus[d] for d in doc_ids]
        self.query_records = {q: dataset.queries[q] for q in qids}
        self.bind(own_text, query_text)
        self.labels = dataset.labels
        self.graded = dataset.default_gains or "binary"
        self.columns = ["NDCG@100 two-class", f"NDCG@100 four-class ({self.graded})"]
        self.sizes = {"queries": len(qids), "judged documents": len(doc_ids)}
        self.notes = [f"Two-class: only the top label is relevant. Four-class gains: '{self.graded}'."]

    def bind(self, document: Callable[[Record], str], query: Callable[[Query], str]) -> None:
        self.doc_texts = [document(r) for r in self.doc_records]
        self.query_text = {q: query(r) for q, r in self.query_records.items()}

    def query_texts(self) -> list[str]:
        return list(self.query_text.values())

    def evaluate(self, retriever: Retriever) -> dict[str, Any]:
        def score_pairs(qid, doc_ids):
            return retriever.score([self.query_text[qid]], doc_indices=[self.position[d] for d in doc_ids])[0]

        run = rerank_run(score_pairs, self.qrels)
        levels = {lvl for judged in self.qrels.values() for lvl in judged.values()}
        out = {}
        for column, gains in zip(self.columns, ("binary", self.graded)):
            scores = evaluate_run(run, self.qrels, ["nDCG@100"],
                                  gains=gain_levels(self.labels, gains, levels))
            out[column] = scores["nDCG@100"]
        return out


class QrelsRanking:
    """Any qrels (BEIR-style): rank the whole corpus, nDCG@10, R@100, MRR@10, or the
    measures the dataset names (the Debian catalog: ATTEMPT's R@100, R@500, nDCG@50)."""

    name = "full ranking"
    columns = ["nDCG@10", "R@100", "MRR@10"]

    def __init__(self, dataset: Dataset, limit: int | None = None):
        if dataset.metrics:
            self.columns = list(dataset.metrics)
        qids = [q for q in dataset.queries if dataset.qrels.get(q)]
        self.qids = qids[:limit] if limit else qids
        self.doc_ids = list(dataset.corpus)
        self.doc_records = [dataset.corpus[d] for d in self.doc_ids]
        self.query_records = [dataset.queries[q] for q in self.qids]
        self.bind(own_text, query_text)
        self.qrels = {q: dataset.qrels[q] for q in self.qids}
        self.sizes = {"queries": len(self.qids), "documents": len(self.doc_ids)}
        self.notes = ["Graded labels used as trec_eval gains; ties broken by document id."]

    def bind(self, document: Callable[[Record], str], query: Callable[[Query], str]) -> None:
        self.doc_texts = [document(r) for r in self.doc_records]
        self.queries = [query(q) for q in self.query_records]

    def query_texts(self) -> list[str]:
        return self.queries

    def evaluate(self, retriever: Retriever, chunk: int = 256) -> dict[str, Any]:
        # deep enough for every cutoff asked (R@500 needs 500 documents per query)
        depth = max([100] + [int(c.rpartition("@")[2]) for c in self.columns if c.rpartition("@")[2].isdigit()])

        run: dict[str, dict[str, float]] = {}
        for start in range(0, len(self.queries), chunk):
            scores = retriever.score(self.queries[start:start + chunk])
            k = min(depth, scores.shape[1])
            top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
            for row, qid in enumerate(self.qids[start:start + chunk]):
                run[qid] = {self.doc_ids[j]: float(scores[row, j]) for j in top[row]}
        return evaluate_run(run, self.qrels, self.columns)


class MultiAnswerRanking(QrelsRanking):
    """Several right answers per query (CoSQA+): the whole corpus ranked; MMRR as CoSQA+'s
    ``run_MMRR_transformer.py`` computes it, beside the ``qrels-ranking`` measures.

    MMRR: for a query whose relevant documents rank r_1 < r_2 < ... < r_m, the mean of
    1 / (r_i - (i - 1)) -- each answer's reciprocal rank among the non-answers -- then the
    mean over queries. A non-answer scoring as high as an answer is ranked ahead of it."""

    name = "multi-answer ranking"
    columns = ["MMRR", "nDCG@10", "R@100", "MRR@10"]

    def __init__(self, dataset: Dataset, limit: int | None = None):
        super().__init__(dataset, limit)
        self.columns = list(MultiAnswerRanking.columns)
        self.position = {d: i for i, d in enumerate(self.doc_ids)}
        self.notes = self.notes + ["MMRR (CoSQA+): each answer's reciprocal rank among the non-answers (ties count "
                                   "against the model), averaged over a query's answers, then over queries."]

    def evaluate(self, retriever: Retriever, chunk: int = 256) -> dict[str, Any]:
        columns, self.columns = self.columns, [c for c in self.columns if c != "MMRR"]
        try:
            row = super().evaluate(retriever, chunk)
        finally:
            self.columns = columns
        per_query = []
        for start in range(0, len(self.queries), chunk):
            scores = retriever.score(self.queries[start:start + chunk])
            for r, qid in enumerate(self.qids[start:start + chunk]):
                answers = [self.position[d] for d, level in self.qrels[qid].items() if level > 0]
                if not answers:
                    continue
                others = np.delete(scores[r], answers)
                per_query.append(np.mean([1.0 / (1 + np.count_nonzero(others >= scores[r, j])) for j in answers]))
        row["MMRR"] = float(np.mean(per_query)) if per_query else None
        return row


class CoirRanking(QrelsRanking):
    """A CoIR task, scored as CoIR's ``COIR.run`` scores it: BEIR's ``EvaluateRetrieval.evaluate``
    with its default ``ignore_identical_ids=True`` (a retrieved document whose id is the query's
    is dropped from that query's ranking), pytrec_eval ``ndcg_cut.10`` per query, the mean over
    the queries pytrec_eval scores (every judged query: each has a ranking)."""

    name = "CoIR ranking"
    columns = ["nDCG@10"]
    # ranks kept per query: nDCG@10 needs 10 after dropping the identical id; the rest
    # keeps documents tied at the 10th score in the run, where trec_eval orders ties
    depth = 100

    def __init__(self, dataset: Dataset, limit: int | None = None):
        super().__init__(dataset, limit)
        self.columns = list(CoirRanking.columns)
        self.notes = ["nDCG@10 as CoIR computes it: the whole corpus ranked, a document whose id equals the "
                      "query's ignored, pytrec_eval ndcg_cut.10 per query, mean over queries."]

    def evaluate(self, retriever: Retriever, chunk: int = 256) -> dict[str, Any]:
        import pytrec_eval

        run: dict[str, dict[str, float]] = {}
        dropped = 0
        for start in range(0, len(self.queries), chunk):
            scores = retriever.score(self.queries[start:start + chunk])
            k = min(self.depth + 1, scores.shape[1])
            top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
            for row, qid in enumerate(self.qids[start:start + chunk]):
                ranked = {self.doc_ids[j]: float(scores[row, j]) for j in top[row]}
                dropped += ranked.pop(qid, None) is not None
                run[qid] = ranked
        per_query = pytrec_eval.RelevanceEvaluator(self.qrels, {"ndcg_cut.10"}).evaluate(run)
        if not per_query:
            raise EvaluationError("CoIR ranking: pytrec_eval scored no query (the run and the qrels share none).")
        values = [m["ndcg_cut_10"] for m in per_query.values()]
        return {"nDCG@10": float(np.mean(values)), "identical_ids_dropped": dropped}


def _missing(dataset: Dataset, task: str, what: str) -> EvaluationError:
    return EvaluationError(f"dataset '{dataset.name}' declares the task '{task}', which needs {what}; "
                           f"it has none. Fix the reader's Dataset(task=...) or its data.")
