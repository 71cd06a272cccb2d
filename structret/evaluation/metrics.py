"""Retrieval measures, gain maps and the papers' ranking procedures.

These are the building blocks; ``structret.evaluation.protocols`` assembles them into
the protocol each dataset's task names. Two kinds of evaluation live here:

* ``evaluate_run`` scores a TREC-style run against graded qrels through ir-measures
  (pytrec_eval underneath), with named gain maps such as ESCI's.
* The protocols the papers report, reproduced exactly, because their numbers depend
  on details a generic run evaluation does not share:
  ``full_pool_ranks`` + ``mrr`` (CodeXGLUE Adv, SANTA's MRR@100), ``csn_mrr``
  (CodeSearchNet's 999-distractor MRR) and ``rerank_run`` (SANTA's ESCI reranking).
  In the first two a document scoring exactly as high as the right one is ranked
  ahead of it: ties count against the model, so a constant scorer gets no credit.

Nothing here imports torch; numpy and ir_measures are the only dependencies.
"""

from __future__ import annotations

import difflib
import math
import re
from fractions import Fraction
from typing import Callable, Hashable, Iterable, Mapping, Sequence

import numpy as np

from structret.errors import StructretError


class EvaluationError(StructretError, ValueError):
    """A metric, gain map or protocol was asked for something it cannot do."""


class ProtocolNotApplicable(EvaluationError):
    """The data is too small or of the wrong shape for a protocol (report it as n/a)."""


# --------------------------------------------------------------------------- gains

# Gains over ESCI label names. The paper's map is SANTA's Table 2 caption ("Four-C").
# The official one is amazon-science/esci-data ranking/prepare_trec_eval_files.py:
# it writes qrels with esci_label2relevance_pos = {E: 4, S: 2, C: 3, I: 1} and runs
# trec_eval with -m 'ndcg.1=0,2=0.01,3=0.1,4=1', i.e. E 1, S 0.01, C 0.1, I 0 --
# Substitute and Complement are swapped relative to the paper.
_LABEL_GAINS: dict[str, dict[str, float]] = {
    "esci-paper": {"E": 1.0, "S": 0.1, "C": 0.01, "I": 0.0},
    "esci-official": {"E": 1.0, "S": 0.01, "C": 0.1, "I": 0.0},
}
GAIN_MAPS = ("binary", *sorted(_LABEL_GAINS))

_ESCI_ALIASES = {
    "E": "E", "EXACT": "E",
    "S": "S", "SUBSTITUTE": "S",
    "C": "C", "COMPLEMENT": "C",
    "I": "I", "IRRELEVANT": "I",
}


def _unknown(kind: str, name: str, known: Iterable[str]) -> EvaluationError:
    known = sorted(known)
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return EvaluationError(f"unknown {kind} {name!r}; known: {', '.join(known)}.{hint}")


def gain_levels(labels: dict[int, str] | None, name: str, levels_present: Iterable[int]) -> dict[int, float]:
    """Map each relevance level of a dataset to its gain under the gain map ``name``.

    ``labels`` names the levels (``{3: "E", 2: "S", 1: "C", 0: "I"}`` for ESCI) or is
    ``None`` when the qrels carry bare levels; ``levels_present`` are the levels that
    occur in the qrels. ``"binary"`` gives the dataset's top level gain 1 and every
    other level 0 (ESCI two-class: only Exact is relevant).
    """
    present = {int(level) for level in levels_present}
    if name == "binary":
        levels = present | set(labels or ())
        if not levels:
            raise EvaluationError("gain map 'binary' needs at least one relevance level; the qrels are empty")
        top = max(labels) if labels else max(present)
        above = sorted(level for level in present if level > top)
        if above:
            raise EvaluationError(
                f"the qrels use levels {above} above the dataset's top labelled level {top}; "
                "fix the dataset's labels or the qrels"
            )
        return {level: 1.0 if level == top else 0.0 for level in sorted(levels)}

    if name not in _LABEL_GAINS:
        raise _unknown("gain map", name, GAIN_MAPS)
    by_label = _LABEL_GAINS[name]
    if not labels:
        raise EvaluationError(
            f"gain map {name!r} is defined over ESCI labels (E, S, C, I), but this dataset's "
            "levels have no label names; use 'binary' or evaluate with the levels as gains"
        )
    unlabelled = sorted(present - set(labels))
    if unlabelled:
        raise EvaluationError(f"the qrels use levels {unlabelled} that have no label name in {labels}")
    gains = {}
    for level, label in sorted(labels.items()):
        key = _ESCI_ALIASES.get(str(label).strip().upper())
        if key is None:
            raise EvaluationError(
                f"gain map {name!r} knows the labels E, S, C, I (or Exact, Substitute, Complement, "
                f"Irrelevant); level {level} is labelled {label!r}"
            )
        gains[level] = by_label[key]
    return gains


def _integer_gains(gains: Mapping[int, float]) -> dict[int, int]:
    """The same gains scaled by one constant to integers.

    trec_eval only takes integer relevance and uses it as a linear gain; ir_measures'
    nDCG(gains=...) passes the mapped floats straight to pytrec_eval, which rejects
    them ("Expected relevance to be integer"). nDCG is invariant to multiplying every
    gain by one constant, so exact decimal gains scaled to integers give the exact
    value (0.01/0.1/1 -> 1/10/100). Binary measures see "gain > 0" unchanged.
    """
    fractions = {}
    for level, gain in gains.items():
        g = float(gain)
        if not math.isfinite(g) or g < 0:
            raise EvaluationError(f"gain {gain!r} of level {level} must be a finite number >= 0")
        # repr() is the shortest decimal that round-trips, so 0.1 becomes exactly 1/10
        fractions[level] = Fraction(repr(g))
    scale = math.lcm(*(f.denominator for f in fractions.values())) if fractions else 1
    if scale > 10**9:
        # gains such as 1/3 have no short decimal; a close rational keeps the integers small
        fractions = {lv: f.limit_denominator(10**6) for lv, f in fractions.items()}
        scale = math.lcm(*(f.denominator for f in fractions.values()))
    ints = {lv: int(f * scale) for lv, f in fractions.items()}
    common = math.gcd(*ints.values())
    return {lv: v // common for lv, v in ints.items()} if common > 1 else ints


# --------------------------------------------------------------------------- runs

_METRIC_ALIASES = {"mrr": "RR", "rr": "RR", "r": "R", "recall": "R", "ndcg": "nDCG"}


def _parse_metric(name: str):
    import ir_measures

    m = re.fullmatch(r"\s*([A-Za-z_]+)\s*(?:@\s*(\d+))?\s*", name)
    if m and m.group(1).lower() in _METRIC_ALIASES:
        measure = getattr(ir_measures, _METRIC_ALIASES[m.group(1).lower()])
        if m.group(2) is None:
            if measure is ir_measures.R:
                raise EvaluationError(f"metric {name!r} needs a cut-off, e.g. R@100")
            return measure
        k = int(m.group(2))
        if k < 1:
            raise EvaluationError(f"metric {name!r}: the cut-off must be at least 1")
        return measure @ k
    try:
        return ir_measures.parse_measure(name)
    except (ValueError, KeyError, NameError, AttributeError, TypeError):
        raise EvaluationError(
            f"unknown metric {name!r}; use MRR@k, R@k or nDCG@k (or any ir_measures name, e.g. P@10, AP)"
        ) from None


def _ranked_run(run, qrels_int, ties: str) -> dict[str, dict[str, float]]:
    """Each query's documents re-scored n, n-1, ..., 1 in one fixed order.

    ir-measures hands RR@k to its MS MARCO provider, which breaks ties by docid
    ascending, and nDCG/R to trec_eval, which breaks them by docid descending; ranking
    once here makes every metric see the same list.
    """
    ranked = {}
    for qid, docs in run.items():
        if qid not in qrels_int or not docs:
            continue
        items = [(docid, float(score)) for docid, score in docs.items()]
        bad = [docid for docid, score in items if math.isnan(score)]
        if bad:
            raise EvaluationError(f"query {qid!r}: score of document {bad[0]!r} is NaN")
        judged = qrels_int[qid]
        # trec_eval's order: score descending, then docid descending (strcmp order)
        items.sort(key=lambda it: (it[1], it[0]), reverse=True)
        if ties == "against":
            # among equal scores, the least useful document first
            items.sort(key=lambda it: (-it[1], judged.get(it[0], 0)))
        n = len(items)
        ranked[qid] = {docid: float(n - i) for i, (docid, _) in enumerate(items)}
    return ranked


def evaluate_run(
    run: dict[str, dict[str, float]],
    qrels: dict[str, dict[str, int]],
    metrics: list[str],
    *,
    gains: dict[int, float] | None = None,
    ties: str = "docid",
) -> dict[str, float]:
    """Mean of each metric over the queries that have judgements.

    ``metrics`` are names such as ``"MRR@100"``, ``"R@100"``, ``"nDCG@10"`` (any
    ir_measures name also works); the result is keyed by the names as given.
    ``gains`` maps each qrels level to its gain (see ``gain_levels``); without it the
    level itself is the gain, as in trec_eval. A document counts as relevant for MRR
    and recall when its gain (or level) is > 0. (With ``gains``, the measures see the
    gains scaled to integers, so a ``rel=`` threshold in an ir_measures name refers to
    those, not to the levels.)

    A query in the qrels but absent from the run scores 0 (trec_eval -c). Equal
    scores are ordered as trec_eval orders them, by docid descending
    (``ties="docid"``); ``ties="against"`` instead puts the lowest-gain document
    first among equals, the pessimistic reading.
    """
    import ir_measures

    if ties not in ("docid", "against"):
        raise EvaluationError(f"ties must be 'docid' or 'against', not {ties!r}")
    if not metrics:
        raise EvaluationError("no metrics asked for")
    measures = {name: _parse_metric(name) for name in metrics}

    judged = {qid: docs for qid, docs in qrels.items() if docs}
    if not judged:
        raise EvaluationError("the qrels judge no documents; nothing to evaluate")
    if gains is None:
        qrels_int = {qid: {d: int(level) for d, level in docs.items()} for qid, docs in judged.items()}
    else:
        missing = sorted({lv for docs in judged.values() for lv in docs.values()} - set(gains))
        if missing:
            raise EvaluationError(f"the gain map has no gain for qrels level(s) {missing}; it covers {sorted(gains)}")
        scaled = _integer_gains(gains)
        qrels_int = {qid: {d: scaled[lv] for d, lv in docs.items()} for qid, docs in judged.items()}

    ranked = _ranked_run(run, qrels_int, ties)
    per_measure: dict = {m: {} for m in set(measures.values())}
    if ranked:
        for metric in ir_measures.iter_calc(list(per_measure), qrels_int, ranked):
            per_measure[metric.measure][metric.query_id] = metric.value
    n = len(qrels_int)
    return {
        name: sum(per_measure[m].get(qid, 0.0) for qid in qrels_int) / n
        for name, m in measures.items()
    }


# --------------------------------------------------------------------------- protocols


def full_pool_ranks(
    score_rows: Callable[[np.ndarray], np.ndarray],
    positives: np.ndarray,
    *,
    chunk: int = 256,
) -> np.ndarray:
    """Rank of each query's document among all documents (CodeXGLUE Adv protocol).

    ``score_rows(query_indices)`` returns the [len(query_indices), n_docs] scores of
    those queries against every document; query i's right document is column
    ``positives[i]``. rank_i = 1 + #{j != positives[i] : s_ij >= s_i,positives[i]}.
    """
    positives = np.asarray(positives)
    if positives.ndim != 1 or not np.issubdtype(positives.dtype, np.integer):
        raise EvaluationError("positives must be a 1-D array of document indices (integers)")
    if chunk < 1:
        raise EvaluationError(f"chunk must be at least 1, not {chunk}")
    n = len(positives)
    ranks = np.empty(n, dtype=np.int64)
    n_docs = None
    for start in range(0, n, chunk):
        idx = np.arange(start, min(start + chunk, n))
        scores = np.asarray(score_rows(idx))
        if scores.ndim != 2 or scores.shape[0] != len(idx):
            raise EvaluationError(
                f"score_rows returned shape {scores.shape} for {len(idx)} queries; expected ({len(idx)}, n_docs)"
            )
        if n_docs is None:
            n_docs = scores.shape[1]
            if positives.min(initial=0) < 0 or positives.max(initial=0) >= n_docs:
                raise EvaluationError(f"positives must index the {n_docs} documents; got values outside 0..{n_docs - 1}")
        elif scores.shape[1] != n_docs:
            raise EvaluationError(f"score_rows returned {scores.shape[1]} documents, earlier {n_docs}")
        nan_rows = np.flatnonzero(np.isnan(scores).any(axis=1))
        if len(nan_rows):
            raise EvaluationError(f"query {idx[nan_rows[0]]}: its scores contain NaN")
        right = scores[np.arange(len(idx)), positives[idx]]
        # the right document matches itself, which supplies the "1 +"
        ranks[idx] = (scores >= right[:, None]).sum(axis=1)
    return ranks


def mrr(ranks: np.ndarray, k: int | None = None) -> float:
    """Mean reciprocal rank; with ``k``, a rank beyond k contributes 0 (MRR@k)."""
    ranks = np.asarray(ranks)
    if ranks.size == 0:
        raise EvaluationError("no ranks to average")
    if (ranks < 1).any():
        raise EvaluationError("ranks start at 1; got a rank below 1")
    if k is not None and k < 1:
        raise EvaluationError(f"k must be at least 1, not {k}")
    reciprocal = 1.0 / ranks.astype(np.float64)
    if k is not None:
        reciprocal[ranks > k] = 0.0
    return float(reciprocal.mean())


def csn_mrr(
    score_block: Callable[[np.ndarray, np.ndarray], np.ndarray],
    n_pairs: int,
    *,
    batch_size: int = 1000,
    seed: int = 0,
    rank_among: str = "queries",
) -> tuple[float, int]:
    """CodeSearchNet's MRR against 999 distractors; returns (MRR, number of batches).

    Pair i is (query i, document i), in the test files' order. Reproduces
    github/CodeSearchNet src/model_test.py, ``MrrSearchTester.evaluate`` and
    ``compute_ranks``:

    * ``np.random.seed(0)`` then ``np.random.shuffle`` of the pair indices (the legacy
      global generator; ``RandomState(seed).shuffle`` draws the same permutation);
    * consecutive batches of 1000; the last, smaller batch is dropped;
    * in each batch, ``compute_ranks(code, query)`` counts with ``<=`` on cosine
      distances, i.e. ``>=`` on scores, so ties count against the model; the rank of
      the diagonal includes itself;
    * MRR per batch (mean of 1/rank), then the mean over batches.

    Note the direction: ``compute_ranks`` is called with the code representations as
    its source, so each *document* ranks the batch's 1000 queries (a column of the
    [query, document] score matrix here; ``rank_among="queries"``, the default).
    The papers describe the other direction -- each query against its document and
    999 distractor documents -- which is how src/models/model.py ``_make_loss``
    computes the training/validation MRR (rows of query x code); pass
    ``rank_among="documents"`` for that. With a symmetric similarity the two
    differ only in which axis is ranked.

    model_test.py shrinks the batch to the data size when there are fewer pairs than
    one batch; that is no longer "999 distractors", so this raises
    ``ProtocolNotApplicable`` instead.
    """
    if rank_among not in ("queries", "documents"):
        raise EvaluationError(f"rank_among must be 'queries' or 'documents', not {rank_among!r}")
    if batch_size < 1:
        raise EvaluationError(f"batch_size must be at least 1, not {batch_size}")
    if n_pairs < batch_size:
        raise ProtocolNotApplicable(
            f"CodeSearchNet's MRR needs at least {batch_size} query-code pairs "
            f"(one full batch of {batch_size}: each pair against {batch_size - 1} distractors); "
            f"this data has {n_pairs}"
        )
    order = np.arange(n_pairs)
    np.random.RandomState(seed).shuffle(order)
    n_batches = n_pairs // batch_size
    total = 0.0
    for b in range(n_batches):
        idx = order[b * batch_size : (b + 1) * batch_size]
        scores = np.asarray(score_block(idx, idx))
        if scores.shape != (batch_size, batch_size):
            raise EvaluationError(f"score_block returned shape {scores.shape}; expected ({batch_size}, {batch_size})")
        if np.isnan(scores).any():
            raise EvaluationError(f"batch {b}: the scores contain NaN")
        right = np.diag(scores)
        if rank_among == "queries":
            ranks = (scores >= right[None, :]).sum(axis=0)
        else:
            ranks = (scores >= right[:, None]).sum(axis=1)
        total += float(np.mean(1.0 / ranks))
    return total / n_batches, n_batches


def rerank_run(
    score_pairs: Callable[[Hashable, list[str]], np.ndarray],
    qrels: dict[str, dict[str, int]],
) -> dict[str, dict[str, float]]:
    """A run in which each query ranks only its own judged documents (SANTA on ESCI).

    ``score_pairs(qid, docids)`` returns one score per document id. Queries without
    judged documents are left out. Feed the result to ``evaluate_run``.
    """
    run: dict[str, dict[str, float]] = {}
    for qid, judged in qrels.items():
        docids: Sequence[str] = list(judged)
        if not docids:
            continue
        scores = np.asarray(score_pairs(qid, list(docids)), dtype=np.float64).reshape(-1)
        if len(scores) != len(docids):
            raise EvaluationError(
                f"query {qid!r}: score_pairs returned {len(scores)} scores for {len(docids)} documents"
            )
        run[qid] = {d: float(s) for d, s in zip(docids, scores)}
    return run
