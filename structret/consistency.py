"""Consistency-filtered training pairs: keep a (query, code) pair only if a teacher model,
asked the query, ranks its own code in the top k of the training pool.

CodeRankEmbed / CoRNStack and CodeSage v2 credit much of their gain to this filter: mined
docstrings are often not what a person would ask for ("TODO", a license line, a parameter
list), and a pair whose query does not find its code even under a decent retriever teaches
the model noise. The pool is the training split itself, per language by default (a Python
docstring competes with Python functions). Not issue 18's false-negative filter, which
drops *negatives* that score too close to a positive: this drops *pairs*.

``structret filter-pairs`` writes the kept pairs as CodeSearchNet rows (what ``structret
train --data codesearchnet:OUT`` reads) and the counts per language beside them.
"""

from __future__ import annotations

import gzip
import json
import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from structret.contracts import Retriever
from structret.errors import StructretError
from structret.negatives import report_path_for as report_path
from structret.records import CodeRecord, Dataset
from structret.search.system import DenseRetriever


@dataclass
class ConsistencyReport:
    """What the filter kept and dropped, per language, and under which teacher and k."""

    teacher: str
    k: int
    within: str
    min_score: float | None = None  # also required: the teacher's score of the pair above this
    kept: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)
    pool: dict[str, int] = field(default_factory=dict)  # documents each language's queries were ranked against
    # by where the query came from: docstring, or a --structure-pairs kind
    kept_by_kind: dict[str, int] = field(default_factory=dict)
    dropped_by_kind: dict[str, int] = field(default_factory=dict)
    out: str = ""

    def summary(self) -> str:
        pool = "its language's training pool" if self.within == "language" else "the whole training pool"
        above = f" and scores it above {self.min_score:g}" if self.min_score is not None else ""
        lines = [f"kept the pairs whose query ranks its own code in the top {self.k} of {pool}{above} "
                 f"under {self.teacher}:"]
        for language in sorted(set(self.kept) | set(self.dropped)):
            kept, dropped = self.kept.get(language, 0), self.dropped.get(language, 0)
            total = kept + dropped
            lines.append(f"  {language or '(no language)'}: {kept} of {total} kept, {dropped} dropped "
                         f"({100 * dropped / max(total, 1):.1f}%), pool {self.pool.get(language, 0)}")
        if set(self.kept_by_kind) | set(self.dropped_by_kind) != {"docstring"}:
            for kind in sorted(set(self.kept_by_kind) | set(self.dropped_by_kind)):
                kept, dropped = self.kept_by_kind.get(kind, 0), self.dropped_by_kind.get(kind, 0)
                lines.append(f"  queries from {kind}: {kept} of {kept + dropped} kept")
        kept, dropped = sum(self.kept.values()), sum(self.dropped.values())
        lines.append(f"  all: {kept} of {kept + dropped} kept; wrote {self.out}")
        return "\n".join(lines)


def own_ranks(retriever: Retriever, dataset: Dataset, *, within: str = "language", chunk: int = 512) -> dict[str, int]:
    """For every aligned pair (query id, document id) of ``dataset``: the rank of its own
    document among the pool (its language's documents, or all), 1 + #{others scoring >= it}."""
    return {qid: rank for qid, (rank, _) in own_ranks_and_scores(retriever, dataset, within=within,
                                                                  chunk=chunk).items()}


def own_ranks_and_scores(retriever: Retriever, dataset: Dataset, *, within: str = "language", chunk: int = 512
                         ) -> dict[str, tuple[int, float]]:
    """``own_ranks``, each with the teacher's score of the pair (a dense teacher's: their dot product)."""
    import numpy as np

    if within not in ("language", "all"):
        raise StructretError(f"within must be 'language' or 'all', not {within!r}.")
    if not dataset.pairs:
        raise StructretError(f"dataset '{dataset.name}' has no aligned (query, code) pairs to filter.")
    groups: dict[str, list[tuple[str, str]]] = {}
    for qid, did in dataset.pairs:
        key = _language(dataset.corpus[did]) if within == "language" else ""
        groups.setdefault(key, []).append((qid, did))
    ranks: dict[str, tuple[int, float]] = {}
    for pairs in groups.values():
        doc_ids = list(dict.fromkeys(d for _, d in pairs))
        position = {d: i for i, d in enumerate(doc_ids)}
        retriever.fit([dataset.corpus[d].text() for d in doc_ids])
        if isinstance(retriever, DenseRetriever):  # every query under one progress bar, not one per chunk
            retriever.encode_queries([dataset.queries[q].text for q, _ in pairs])
        for start in range(0, len(pairs), chunk):
            part = pairs[start:start + chunk]
            scores = np.asarray(retriever.score([dataset.queries[q].text for q, _ in part]))
            own = scores[np.arange(len(part)), [position[d] for _, d in part]]
            above = (scores >= own[:, None]).sum(axis=1)  # counts the pair's own document once
            for (qid, _), rank, score in zip(part, above, own):
                ranks[qid] = (int(rank), float(score))
    return ranks


def _language(record: Any) -> str:
    return record.language if isinstance(record, CodeRecord) else ""


def filter_pairs(retriever: Retriever, dataset: Dataset, out: str | os.PathLike, *, k: int = 20, within: str = "language",
                 teacher: str = "", partition: str = "train", min_score: float | None = None) -> ConsistencyReport:
    """Write the pairs of ``dataset`` that pass the filter to ``out`` (CodeSearchNet rows with
    ``partition``) and ``OUT.report.json``; ``retriever`` is the teacher (fit/score). A pair
    passes when its own code ranks within ``k`` and, with ``min_score``, the teacher scores
    the pair above it (CoRNStack keeps a pair in the top 2 with cosine above 0.7)."""
    if k < 1:
        raise StructretError(f"k must be at least 1 (the rank a pair's own code must reach), not {k}.")
    ranks = own_ranks_and_scores(retriever, dataset, within=within)
    assert dataset.pairs is not None  # own_ranks raised otherwise
    report = ConsistencyReport(teacher=teacher, k=k, within=within, out=str(out), min_score=min_score)
    report.pool = dict(Counter(_language(dataset.corpus[d]) if within == "language" else "" for _, d in
                               dict.fromkeys(dataset.pairs)))
    kept: Counter[str]
    dropped: Counter[str]
    kept_kind: Counter[str]
    dropped_kind: Counter[str]
    kept, dropped, kept_kind, dropped_kind = Counter(), Counter(), Counter(), Counter()
    partial = f"{out}.{os.getpid()}.part"
    with gzip.open(partial, "wt", encoding="utf-8") as f:
        for qid, did in dataset.pairs:
            record = dataset.corpus[did]
            language = _language(record)
            kind = getattr(record, "pair_kind", "") or "docstring"
            rank, score = ranks[qid]
            if rank > k or (min_score is not None and not score > min_score):
                dropped[language] += 1
                dropped_kind[kind] += 1
                continue
            kept[language] += 1
            kept_kind[kind] += 1
            f.write(json.dumps(_row(record, dataset.queries[qid].text, partition, rank), ensure_ascii=False) + "\n")
    os.replace(partial, out)
    report.kept, report.dropped = dict(kept), dict(dropped)
    report.kept_by_kind, report.dropped_by_kind = dict(kept_kind), dict(dropped_kind)
    with open(report_path(out), "w", encoding="utf-8") as f:
        json.dump(asdict(report), f, indent=1)
    return report


def _row(record: Any, query: str, partition: str, rank: int) -> dict[str, Any]:
    """A CodeSearchNet row of a kept pair (the reader reads it back to the same record and query)."""
    tokens = getattr(record, "docstring_tokens", None) or query.split()
    return {"repo": getattr(record, "repo", ""), "path": getattr(record, "path", ""),
            "func_name": getattr(record, "func_name", ""), "language": _language(record), "code": record.text(),
            "code_tokens": getattr(record, "code_tokens", None) or [], "docstring": getattr(record, "docstring", ""),
            "docstring_tokens": tokens, "url": getattr(record, "url", "") or record.id, "partition": partition,
            "teacher_rank": rank} | ({"pair_kind": record.pair_kind} if getattr(record, "pair_kind", "") else {})
