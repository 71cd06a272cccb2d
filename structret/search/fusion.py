"""Hybrid retrieval: one ranking from a lexical and a dense one, and choosing how on validation data.

Both sides are reduced to their top ``depth`` candidates per query, as a hybrid search over
an index sees them (Pyserini's hybrid works the same way), so ``structret bench`` and
``structret search`` fuse alike. Then, per query:

* ``zscore`` / ``minmax``: each side's candidate scores normalized over its own list
  (mean 0 and std 1, or onto [0, 1]); a document missing from one side's list takes that
  side's lowest normalized score; fused = (1 - w) * dense + w * lexical.
* ``rrf``: reciprocal-rank fusion, (1 - w) / (k + dense rank) + w / (k + lexical rank), a
  side contributing nothing where the document is not on its list; w = 0.5 is plain RRF.

A document on neither list scores -inf: it ranks below every candidate. Scores are compared
within a query only. The weight is the lexical side's share: 0 is dense alone, 1 lexical alone.
Issue 27's measurements showed the best weight moving between languages and RRF at k = 60
losing to dense alone on Python, so ``tune`` chooses the method and weight on validation data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Generic, Sequence, TypeVar

import numpy as np

from structret.errors import StructretError

METHODS = ("zscore", "minmax", "rrf")
# what tune() tries: every method with these lexical weights
WEIGHTS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)


class FusionError(StructretError, ValueError):
    """A fusion spec or candidate list that cannot be used; the message says how to write it."""


@dataclass(frozen=True)
class Fusion:
    """How two rankings become one: ``method`` (zscore, minmax, rrf), the lexical side's
    ``weight`` in [0, 1], ``depth`` candidates per side and RRF's ``k``."""

    method: str = "zscore"
    # chosen on the six-language corpus' validation split (docs/results.md, "Hybrid retrieval")
    weight: float = 0.3
    depth: int = 1000
    k: int = 60

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise FusionError(f"unknown fusion method {self.method!r}; use one of: {', '.join(METHODS)}.")
        if not (isinstance(self.weight, (int, float)) and 0 <= self.weight <= 1):
            raise FusionError(f"fusion weight must lie in [0, 1] (the lexical side's share), not {self.weight!r}.")
        if not (isinstance(self.depth, int) and self.depth >= 1):
            raise FusionError(f"fusion depth must be a positive number of candidates, not {self.depth!r}.")
        if not (isinstance(self.k, int) and self.k >= 0):
            raise FusionError(f"RRF's k must be a non-negative integer, not {self.k!r}.")

    @property
    def spec(self) -> str:
        """``zscore:0.2`` -- what ``parse`` reads, ``--fusion`` takes and results record."""
        extra = "".join(f",{key}={value}" for key, value, default in
                        (("depth", self.depth, 1000), ("k", self.k, 60)) if value != default)
        return f"{self.method}:{self.weight:g}{extra}"

    def as_dict(self) -> dict:
        return {"method": self.method, "weight": self.weight, "depth": self.depth, "k": self.k}

    def describe(self) -> str:
        if self.method == "rrf":
            how = f"reciprocal-rank fusion (k={self.k})"
        else:
            how = f"{'z-score' if self.method == 'zscore' else 'min-max'} normalized scores"
        return f"{how}, lexical weight {self.weight:g}, top {self.depth} of each side"


def parse(spec: str | Fusion | dict | None) -> Fusion:
    """``"zscore:0.2"``, ``"rrf"``, ``"minmax:0.3,depth=200"``, a dict of Fusion's fields, or
    None (the default) as a Fusion."""
    if spec is None:
        return Fusion()
    if isinstance(spec, Fusion):
        return spec
    if isinstance(spec, dict):
        try:
            return Fusion(**spec)
        except TypeError as exc:
            raise FusionError(f"fusion settings {spec!r}: {exc}") from None
    text = str(spec).strip()
    head, _, rest = text.partition(",")
    method, _, weight = head.partition(":")
    fields: dict = {"method": method.strip()}
    try:
        if weight:
            fields["weight"] = float(weight)
        elif method.strip() == "rrf":
            fields["weight"] = 0.5
        for item in filter(None, (part.strip() for part in rest.split(","))):
            key, eq, value = item.partition("=")
            if not eq or key not in ("depth", "k"):
                raise FusionError(f"--fusion {text!r}: {item!r} is not depth=N or k=N.")
            fields[key] = int(value)
    except ValueError as exc:
        if isinstance(exc, FusionError):
            raise
        raise FusionError(f"--fusion {text!r}: write METHOD:WEIGHT[,depth=N][,k=N], e.g. zscore:0.2 or rrf:0.5,k=60 "
                          f"({exc}).") from None
    return Fusion(**fields)


def _normalized(scores: np.ndarray, method: str) -> np.ndarray:
    """Rows of candidate scores normalized over their own row (constant rows become 0)."""
    if method == "zscore":
        centred = scores - scores.mean(axis=1, keepdims=True)
        spread = scores.std(axis=1, keepdims=True)
    else:
        centred = scores - scores.min(axis=1, keepdims=True)
        spread = scores.max(axis=1, keepdims=True) - scores.min(axis=1, keepdims=True)
    return np.divide(centred, spread, out=np.zeros_like(centred), where=spread > 0)


def _ranks(scores: np.ndarray) -> np.ndarray:
    """1-based rank of each candidate in its row, equal scores sharing the best rank."""
    order = np.sort(scores, axis=1)[:, ::-1]  # descending
    return np.stack([np.searchsorted(-row, -s, side="left") + 1 for row, s in zip(order, scores)])


def _contributions(scores: np.ndarray, fusion: Fusion) -> tuple[np.ndarray, np.ndarray]:
    """Per-candidate values and the value of a document missing from the list, per row."""
    if fusion.method == "rrf":
        values = 1.0 / (fusion.k + _ranks(scores))
        return values, np.zeros((len(scores), 1))
    values = _normalized(scores.astype(np.float64), fusion.method)
    return values, values.min(axis=1, keepdims=True)


def _top(scores: np.ndarray, depth: int) -> np.ndarray:
    """Column indices of each row's ``depth`` best scores (ties: the lower index)."""
    width = scores.shape[1]
    if depth >= width:
        return np.broadcast_to(np.arange(width), scores.shape).copy()
    columns = np.argpartition(-scores, depth - 1, axis=1)[:, :depth]
    kth = np.take_along_axis(scores, columns, axis=1).min(axis=1, keepdims=True)
    for row in np.flatnonzero((scores >= kth).sum(axis=1) > depth):  # ties straddling the cut
        columns[row] = np.lexsort((np.arange(width), -scores[row]))[:depth]
    return columns


def _fuse(dense: tuple[np.ndarray, np.ndarray], lexical: tuple[np.ndarray, np.ndarray], fusion: Fusion,
          width: int) -> np.ndarray:
    """The one place two rankings become one: each side's candidates as ``(columns, scores)``, both
    [nq, d], columns in [0, width); fused scores [nq, width], -inf where neither side lists a column.
    Full score rows (``fuse_scores``) and top-k lists (``fuse_lists``) differ only in how they
    reach here: the rows' top ``depth`` columns, or the lists' documents numbered per query."""
    nq = len(dense[0])
    rows = np.arange(nq)[:, None]
    fused = np.zeros((nq, width))
    listed = np.zeros((nq, width), dtype=bool)
    for (columns, scores), share in ((dense, 1 - fusion.weight), (lexical, fusion.weight)):
        if columns.shape[1] == 0:  # a side that lists nothing adds nothing, to listed and unlisted alike
            continue
        values, missing = _contributions(scores, fusion)
        side = np.broadcast_to(missing, (nq, width)).copy()
        side[rows, columns] = values
        fused += share * side
        listed[rows, columns] = True
    fused[~listed] = -np.inf
    return fused


def fuse_scores(lexical: np.ndarray, dense: np.ndarray, fusion: Fusion) -> np.ndarray:
    """Fused scores [nq, n] from both sides' scores of the same documents [nq, n]: each side's top
    ``fusion.depth`` per query fused as a hybrid index's search fuses its lists (``_fuse``)."""
    lexical, dense = np.asarray(lexical, dtype=np.float64), np.asarray(dense, dtype=np.float64)
    if lexical.shape != dense.shape or lexical.ndim != 2:
        raise FusionError(f"the two sides scored different things: lexical {lexical.shape}, dense {dense.shape}.")
    sides = []
    for scores in (dense, lexical):
        columns = _top(scores, fusion.depth)
        sides.append((columns, np.take_along_axis(scores, columns, axis=1)))
    return _fuse(sides[0], sides[1], fusion, lexical.shape[1])


D = TypeVar("D")  # a document as the sides list it: its position or its id


@dataclass(frozen=True)
class FusedHit(Generic[D]):
    """One fused result: the document's position or id, its fused score and which sides listed it."""

    doc: D
    score: float
    sources: tuple[str, ...]


def fuse_lists(lexical: tuple[Sequence[D], Sequence[float]], dense: tuple[Sequence[D], Sequence[float]],
               fusion: Fusion, k: int) -> list[FusedHit[D]]:
    """The top ``k`` of one query from each side's candidate list ``(docs, scores)``, best
    first (equal scores: the dense side's order, then the lexical side's) -- what a hybrid
    index search returns; the same arithmetic as ``fuse_scores`` (``_fuse``)."""
    numbered: dict[D, int] = {}  # every listed document, dense side's order first: ties keep this order
    sides = []
    for name, (docs, side_scores) in (("dense", dense), ("lexical", lexical)):
        scores = np.asarray(side_scores, dtype=np.float64).reshape(-1)
        if len(docs) != len(scores):
            raise FusionError(f"the {name} side returned {len(docs)} documents but {len(scores)} scores.")
        columns = np.array([numbered.setdefault(doc, len(numbered)) for doc in docs], dtype=np.intp)
        sides.append((columns[None, :], scores[None, :]))
    fused = _fuse(sides[0], sides[1], fusion, len(numbered))[0]
    docs = list(numbered)
    listed_by = [set(columns[0].tolist()) for columns, _ in sides]
    order = np.argsort(-fused, kind="stable")[:k]
    return [FusedHit(docs[i], float(fused[i]),
                     tuple(name for name, listed in zip(("dense", "lexical"), listed_by) if i in listed))
            for i in order.tolist()]


def grid() -> list[Fusion]:
    """The fusions ``tune`` tries: every method with every weight of WEIGHTS (RRF at k = 60)."""
    return [Fusion(method, weight) for method in METHODS for weight in WEIGHTS]


def tune(score: Callable[[Fusion], float | tuple[float, ...]], candidates: Sequence[Fusion] | None = None,
         ) -> tuple[Fusion, dict[str, float]]:
    """The candidate with the highest ``score(fusion)`` (on validation data), and every
    candidate's score by spec. A score may be a tuple (the selection measure, then the measures
    that break its ties); the first of equal candidates wins, and NaN ranks last."""
    candidates = list(candidates or grid())
    keys = {}
    for fusion in candidates:
        value = score(fusion)
        values = tuple(value) if isinstance(value, tuple) else (value,)
        keys[fusion.spec] = tuple(-math.inf if math.isnan(float(v)) else float(v) for v in values)
    best = max(candidates, key=lambda f: keys[f.spec])
    return best, {spec: key[0] for spec, key in keys.items()}
