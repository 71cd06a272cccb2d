"""Evaluation in one place: the measures, the protocol a dataset's task names, and ``evaluate``.

* ``metrics``: measures, gain maps, tie handling and the papers' ranking procedures.
* ``protocols``: the built-in protocols (their contract is ``structret.contracts.EvaluationProtocol``).
* here: ``task_of`` (which protocol a dataset asks for), ``make_protocol`` (built through
  the registry, kind ``protocol``, so a plugin adds one for its own task),
  ``evaluate_retriever`` (one system through a protocol) and ``evaluate``, the public entry.

``structret bench``, the suites' tables and ``structret.evaluate`` all go through here.
"""

from __future__ import annotations

import math
import sys
import time
from typing import TYPE_CHECKING, Any

from structret.contracts import HasFormatDocument, HasFormatQuery
from structret.errors import PluginError
from structret.evaluation.metrics import (
    GAIN_MAPS,
    EvaluationError,
    ProtocolNotApplicable,
    csn_mrr,
    evaluate_run,
    full_pool_ranks,
    gain_levels,
    mrr,
    rerank_run,
)
from structret.evaluation.protocols import EvaluationProtocol, own_text, query_text
from structret.records import CODE_SEARCH, GRADED_RERANK, QRELS_RANKING, Dataset
from structret.registry import get_registry
from structret.search.system import DenseRetriever, HybridRetriever, make_retriever

if TYPE_CHECKING:
    from structret.contracts import Retriever

__all__ = [
    "GAIN_MAPS", "EvaluationError", "EvaluationProtocol", "ProtocolNotApplicable", "csn_mrr", "evaluate",
    "evaluate_retriever", "evaluate_run", "full_pool_ranks", "gain_levels", "make_protocol", "mrr",
    "rerank_run", "task_of", "tune_fusion",
]


def task_of(dataset: Dataset) -> str:
    """The task ``dataset`` declares; for one built without (a reader written before tasks),
    the task its fields imply: aligned pairs are code search, named label levels graded
    reranking, anything else ranking against its qrels."""
    if dataset.task:
        return dataset.task
    if dataset.pairs:
        return CODE_SEARCH
    if dataset.labels:
        return GRADED_RERANK
    return QRELS_RANKING


def make_protocol(dataset: Dataset, limit: int | None = None) -> EvaluationProtocol:
    """The protocol registered for the dataset's task, over its first ``limit`` queries (all: ``None``)."""
    registry = get_registry()
    task = task_of(dataset)
    try:
        registry.get("protocol", task)
    except PluginError as exc:
        raise PluginError(
            f"cannot evaluate dataset '{dataset.name}' (task '{task}'): {exc} A plugin adds the protocol "
            "for a task with the register_protocols hook (docs/plugins.md)."
        ) from None
    return registry.create("protocol", task, dataset, limit)


def evaluate_retriever(protocol: EvaluationProtocol, retriever: Retriever, system: str, *,
                       announce: bool = True) -> dict[str, Any]:
    """One system's row: index the protocol's documents as the system reads them, then score.

    The row holds every column of the protocol (``None``: n/a), any extra keys it
    reports, and ``seconds`` (fitting and scoring; building the retriever is not timed).
    """
    # each system reads records its own way (a run trained on SANTA's product template
    # is scored on that template); BM25 and zero-shot models read their text()
    protocol.bind(retriever.format_document if isinstance(retriever, HasFormatDocument) else own_text,
                  retriever.format_query if isinstance(retriever, HasFormatQuery) else query_text)
    start = time.perf_counter()
    if announce:
        print(f"{system}: indexing {len(protocol.doc_texts)} documents", file=sys.stderr)
    retriever.fit(protocol.doc_texts)
    if isinstance(retriever, (DenseRetriever, HybridRetriever)):
        # every query once, under one progress bar; the protocol's batches then hit the cache
        retriever.encode_queries(protocol.query_texts())
    row = protocol.evaluate(retriever)
    missing = [c for c in protocol.columns if c not in row] if isinstance(row, dict) else list(protocol.columns)
    if missing:
        raise PluginError(
            f"evaluation protocol {type(protocol).__name__} ('{protocol.name}') broke its contract: "
            f"evaluate() must return a dict with a value (or None) for each of its columns; missing: "
            f"{', '.join(missing)}. This is a bug in the plugin that registers it."
        )
    row["seconds"] = time.perf_counter() - start
    return row


def evaluate(system: Retriever | str, dataset: Dataset, *, limit: int | None = None, batch_size: int = 32,
             show_progress: bool = True) -> dict[str, float]:
    """Score one system on ``dataset`` with the protocol its task names.

    ``system`` is a retriever (``fit(docs)`` and ``score(queries, doc_indices=None)``,
    e.g. ``structret.search.system.DenseRetriever`` or BM25) or a name ``structret bench
    --system`` takes (a registered retriever, a backbone, a run directory), built with
    ``batch_size`` and ``show_progress``. ``limit`` keeps the first N queries (or pairs).

    Returns ``{measure: value}`` for the protocol's columns, in order, values in [0, 1];
    a measure the data does not allow (CodeSearchNet's 999 distractors on fewer than
    1000 pairs) is NaN. Raises ``PluginError`` when no protocol is registered for the
    dataset's task.
    """
    protocol = make_protocol(dataset, limit)
    if isinstance(system, str):
        label = system
        retriever = make_retriever(system, batch_size=batch_size, show_progress=show_progress)
    else:
        label = type(system).__name__
        retriever = system
    row = evaluate_retriever(protocol, retriever, label, announce=show_progress)
    return {c: math.nan if row[c] is None else float(row[c]) for c in protocol.columns}


def tune_fusion(retriever: HybridRetriever, dataset: Dataset, *, limit: int | None = None, show_progress: bool = True,
                candidates: Any = None, measure: str | None = None) -> tuple[HybridRetriever, dict[str, Any]]:
    """Choose a hybrid retriever's fusion (structret.search.fusion) on ``dataset`` -- a validation
    split, never the test split that is reported: the retriever under the chosen fusion (a new one,
    ``HybridRetriever.tune``; the one given keeps its own) and what the choice was made on.

    Selection is by ``measure`` (default: the protocol's first column), ties broken by the
    columns after it (a recall saturated at 100 then leaves the choice to nDCG). The
    retriever is fitted on ``dataset``'s documents and each side scores every query once;
    each candidate fusion then re-ranks those scores. The report is ``{"fusion": spec, "measure":
    column, "scores": {spec: value}, "queries": n}``; fit the tuned retriever on the test documents
    afterwards, as ``structret bench --tune`` does.
    """
    protocol = make_protocol(dataset, limit)
    columns = list(protocol.columns)
    if measure is not None and measure not in columns:
        raise EvaluationError(f"cannot tune on {measure!r}: the '{protocol.name}' protocol measures "
                              f"{', '.join(columns)}.")
    order = columns[columns.index(measure or columns[0]):] + columns[:columns.index(measure or columns[0])]

    def score(candidate: HybridRetriever) -> tuple[float, ...]:
        row = protocol.evaluate(candidate)
        return tuple(math.nan if row[c] is None else float(row[c]) for c in order)

    retriever.remember_rows(True)
    try:
        evaluate_retriever(protocol, retriever, "tuning", announce=show_progress)
        tuned, scores = retriever.tune(score, candidates)
    finally:
        retriever.remember_rows(False)
    return tuned, {"fusion": tuned.fusion.spec, "measure": order[0], "scores": scores,
                   "queries": protocol.sizes.get("queries")}
