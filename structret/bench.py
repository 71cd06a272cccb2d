"""``structret bench``: score named systems on one dataset with the papers' protocols."""

from __future__ import annotations

import json
import os
import sys
import sysconfig
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from structret.records import Dataset

POOL_COLUMN = "MRR@100 (full pool)"
# CodeSearchNet's model_test.py ranks, for each code, the batch's queries; the papers
# describe each query ranking codes. Both are reported so neither is mistaken for the other.
CSN_COLUMN = "MRR CSN-999 (model_test: code ranks queries)"
CSN_QUERY_COLUMN = "MRR 999 distractors (query ranks codes)"


def cache_dir() -> Path:
    return Path(os.environ.get("STRUCTRET_CACHE") or Path.home() / ".cache" / "structret")


def stdlib_path() -> Path:
    """The installed Python standard library mined into CodeSearchNet rows (mined once, cached)."""
    from structret.mining import mine

    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    out = cache_dir() / f"stdlib-python{version}.jsonl.gz"
    if not out.exists():
        print(f"mining the Python {version} standard library into {out} (once)", file=sys.stderr)
        report = mine(sysconfig.get_paths()["stdlib"], "python", out, repo=f"cpython-{version}-stdlib")
        print(report.summary(), file=sys.stderr)
    return out


def default_dataset(split: str | None = None) -> Dataset:
    """The installed Python standard library, mined once into CodeSearchNet format and cached.

    Zero-shot evaluation trains on none of it, so by default every split is test data:
    the test split alone (about 400 functions) is too small for CodeSearchNet's
    1000-pair batches.
    """
    from structret.data import load_dataset

    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    out = stdlib_path()
    dataset = load_dataset(f"codesearchnet:{out}", split=split)
    dataset.name = f"Python {version} standard library, mined ({f'{split} split' if split else 'all splits'})"
    print(dataset.stats.summary(), file=sys.stderr)
    return dataset


@dataclass
class BenchResult:
    dataset: str
    protocol: str
    columns: list[str]
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    sizes: dict[str, int] = field(default_factory=dict)
    # system -> what changes its numbers (tokenizer, lengths, dtype, ...)
    settings: dict[str, str] = field(default_factory=dict)

    def markdown(self) -> str:
        size = ", ".join(f"{n} {what}" for what, n in self.sizes.items())
        lines = [f"{self.dataset} — {self.protocol} ({size})", ""]
        header = ["system", *self.columns, "seconds"]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|")
        for system, row in self.rows.items():
            cells = [system]
            for c in self.columns:
                v = row.get(c)
                cells.append("n/a" if v is None else f"{100 * v:.2f}")
            cells.append(f"{row['seconds']:.1f}")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        lines.append("Scores ×100. " + " ".join(self.notes))
        if self.settings:
            lines.append("")
            lines += [f"- {system}: {text}" for system, text in self.settings.items()]
        return "\n".join(lines)

    def write_json(self, path: str | os.PathLike) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=2))


def run_bench(dataset: Dataset, systems: list[str], *, batch_size: int = 32,
              limit: int | None = None, show_progress: bool = True) -> BenchResult:
    from structret.retrieval import make_retriever

    protocol = make_protocol(dataset, limit)
    result = BenchResult(dataset.name, protocol.name, protocol.columns, sizes=protocol.sizes)
    for system in systems:
        # build every retriever before timing: model loading is not retrieval
        retriever = make_retriever(system, batch_size=batch_size, show_progress=show_progress)
        result.rows[system] = evaluate_retriever(protocol, retriever, system)
        describe = getattr(retriever, "settings", None)  # optional for third-party retrievers
        result.settings[system] = describe() if callable(describe) else "(its settings are not reported)"
    result.notes = protocol.notes
    return result


def make_protocol(dataset: Dataset, limit: int | None = None):
    """The papers' protocol for the dataset's shape: code search, graded reranking, or full ranking."""
    if dataset.pairs:
        return _CodeSearch(dataset, limit)
    if dataset.labels:
        return _Rerank(dataset, limit)
    return _FullRanking(dataset, limit)


def evaluate_retriever(protocol, retriever, system: str) -> dict[str, Any]:
    """One system's row: index the protocol's documents as the system reads them, then score."""
    # each system reads records its own way (a run trained on SANTA's product template
    # is scored on that template); BM25 and zero-shot models read their text()
    protocol.bind(getattr(retriever, "format_document", _own_text), getattr(retriever, "format_query", _query_text))
    start = time.perf_counter()
    print(f"{system}: indexing {len(protocol.doc_texts)} documents", file=sys.stderr)
    retriever.fit(protocol.doc_texts)
    from structret.retrieval import DenseRetriever

    if isinstance(retriever, DenseRetriever):
        # every query once, under one progress bar; the protocol's batches then hit the cache
        retriever.encode_queries(protocol.query_texts())
    row = protocol.evaluate(retriever)
    row["seconds"] = time.perf_counter() - start
    return row


def _own_text(record) -> str:
    return record.text()


def _query_text(query) -> str:
    return query.text


class _CodeSearch:
    """One aligned document per query: full-pool MRR@100 and CodeSearchNet's 999-distractor MRR."""

    name = "code search"
    columns = [POOL_COLUMN, CSN_COLUMN, CSN_QUERY_COLUMN]

    def __init__(self, dataset: Dataset, limit: int | None):
        import numpy as np

        pairs = dataset.pairs[:limit] if limit else dataset.pairs
        if limit:
            doc_ids = list(dict.fromkeys(d for _, d in pairs))
        else:
            doc_ids = list(dataset.corpus)
        position = {d: i for i, d in enumerate(doc_ids)}
        self.doc_records = [dataset.corpus[d] for d in doc_ids]
        self.query_records = [dataset.queries[q] for q, _ in pairs]
        self.bind(_own_text, _query_text)
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

    def bind(self, document, query) -> None:
        self.doc_texts = [document(r) for r in self.doc_records]
        self.queries = [query(q) for q in self.query_records]

    def query_texts(self) -> list[str]:
        return self.queries

    def evaluate(self, retriever) -> dict[str, Any]:
        from structret.evaluation import csn_mrr, full_pool_ranks, mrr

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


class _Rerank:
    """Graded judgements per query (ESCI): rerank each query's judged documents, NDCG@100."""

    name = "reranking judged documents"

    def __init__(self, dataset: Dataset, limit: int | None):
        qids = [q for q in dataset.queries if dataset.qrels.get(q)]
        qids = qids[:limit] if limit else qids
        self.qrels = {q: dataset.qrels[q] for q in qids}
        doc_ids = list(dict.fromkeys(d for q in qids for d in self.qrels[q]))
        self.position = {d: i for i, d in enumerate(doc_ids)}
        self.doc_records = [dataset.corpus[d] for d in doc_ids]
        self.query_records = {q: dataset.queries[q] for q in qids}
        self.bind(_own_text, _query_text)
        self.labels = dataset.labels
        self.graded = dataset.default_gains or "binary"
        self.columns = ["NDCG@100 two-class", f"NDCG@100 four-class ({self.graded})"]
        self.sizes = {"queries": len(qids), "judged documents": len(doc_ids)}
        self.notes = [f"Two-class: only the top label is relevant. Four-class gains: '{self.graded}'."]

    def bind(self, document, query) -> None:
        self.doc_texts = [document(r) for r in self.doc_records]
        self.query_text = {q: query(r) for q, r in self.query_records.items()}

    def query_texts(self) -> list[str]:
        return list(self.query_text.values())

    def evaluate(self, retriever) -> dict[str, Any]:
        from structret.evaluation import evaluate_run, gain_levels, rerank_run

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


class _FullRanking:
    """Any qrels (BEIR-style): rank the whole corpus, nDCG@10, R@100, MRR@10, or the
    measures the dataset names (the Debian catalog: ATTEMPT's R@100, R@500, nDCG@50)."""

    name = "full ranking"
    columns = ["nDCG@10", "R@100", "MRR@10"]

    def __init__(self, dataset: Dataset, limit: int | None):
        if dataset.metrics:
            self.columns = list(dataset.metrics)
        qids = [q for q in dataset.queries if dataset.qrels.get(q)]
        self.qids = qids[:limit] if limit else qids
        self.doc_ids = list(dataset.corpus)
        self.doc_records = [dataset.corpus[d] for d in self.doc_ids]
        self.query_records = [dataset.queries[q] for q in self.qids]
        self.bind(_own_text, _query_text)
        self.qrels = {q: dataset.qrels[q] for q in self.qids}
        self.sizes = {"queries": len(self.qids), "documents": len(self.doc_ids)}
        self.notes = ["Graded labels used as trec_eval gains; ties broken by document id."]

    def bind(self, document, query) -> None:
        self.doc_texts = [document(r) for r in self.doc_records]
        self.queries = [query(q) for q in self.query_records]

    def query_texts(self) -> list[str]:
        return self.queries

    def evaluate(self, retriever, chunk: int = 256) -> dict[str, Any]:
        import numpy as np

        from structret.evaluation import evaluate_run

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
