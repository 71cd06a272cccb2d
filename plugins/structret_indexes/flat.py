"""Exact inner-product search over all stored vectors, a chunk at a time, at the matmul's rate.

Search is one matrix product per block of queries and chunk of vectors, then a top-k of its
scores, both in torch (threaded; numpy's argpartition is single-threaded and took as long as
the product itself). Where the CPU multiplies bf16 clearly faster than fp32 (AMX: ~4x), the
product runs in bf16 and picks *candidates*, which are then scored again in fp32; the answer
is the fp32 one, and it is certified per query: bf16's rounding moves a score by at most
``bf16_error`` (a bound from the vectors' norms), so when the k-th best exact score beats the
best score any non-candidate could have, nothing was missed. The rare query that is not
certified is searched again in fp32. So both ways give the same ids in the same order.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from structret.plugin import atomic_dir, write_meta
from structret.errors import ArtifactError
from structret.plugin import (
    IndexInputError,
    SavedFiles,
    as_matrix,
    base_meta,
    check_ids,
    check_k,
    check_metric,
    check_removal,
    normalize_rows,
    read_ids,
    read_index_meta,
    write_ids,
)

VECTORS_FILE = "vectors.npy"
# vectors added by an update of a saved index, one segment (NAME.npy + NAME.ids.json) per update, so
# an update writes what it adds and hard-links the rest; a removal, or more segments than
# MAX_SEGMENTS, writes the index whole again (compaction)
SEGMENTS_DIR = "segments"
MAX_SEGMENTS = 32
# scores held at once per search step (float32): 4M = 16 MB, so they are still in cache when the
# top-k reads them (a 64 MB block made the top-k memory-bound)
_SCORE_BUDGET = 1 << 22
SCORINGS = ("auto", "fp32", "bf16")
# scores a search must compute before importing torch for it pays (numpy: ~1 s per 1e8 here)
_TORCH_WORTH = 10**8
# bf16 keeps 8 significant bits: each rounding moves a value by at most this fraction of it
_BF16_UNIT = 2.0 ** -8


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Column positions of the k largest scores in each row (unordered); ties go to the lower column.

    Ties are real (duplicate documents are common in code corpora); breaking them by
    position, here and when merging chunks, makes rankings reproducible.
    """
    width = scores.shape[1]
    if k >= width:
        return np.broadcast_to(np.arange(width), scores.shape).copy()
    picked = np.argpartition(scores, width - k, axis=1)[:, width - k :]
    kth = np.take_along_axis(scores, picked, axis=1).min(axis=1, keepdims=True)
    # rows where equal scores straddle the cut: argpartition chose among them arbitrarily
    for row in np.flatnonzero((scores >= kth).sum(axis=1) > k):
        picked[row] = np.lexsort((np.arange(width), -scores[row]))[:k]
    return picked


def bf16_error(query_norm: Any, max_vector_norm: float, max_abs_score: Any) -> Any:
    """Largest change bf16 makes to a score q.v: the operands rounded (each by at most u relative, so
    the products by 2u + u^2, summing to at most that times |q||v|), then the product's own rounding;
    fp32 accumulation adds ~dim * 2^-24 relative, covered by the slack."""
    u = _BF16_UNIT
    return (2 * u + u * u) * query_norm * max_vector_norm * 1.01 + u * max_abs_score + 1e-6


def bf16_scoring_pays() -> bool:
    """Whether this CPU multiplies bf16 clearly faster than fp32 (structret.precision's matmul timings)."""
    from structret.plugin import precision

    return precision.bf16_matmul_faster()


class FlatIndex:
    """Brute force, exact. ``metric="cosine"`` stores unit vectors and normalizes queries.

    Search walks the stored vectors ``chunk_size`` rows at a time, keeping a running top-k,
    so memory stays bounded however large the index grows.
    """

    name = "flat"
    exact = True

    def __init__(self, dim: int, metric: str = "ip", chunk_size: int = 65536, scoring: str = "auto"):
        if int(dim) < 1:
            raise IndexInputError(f"dim must be a positive number of dimensions, got {dim}.")
        if int(chunk_size) < 1:
            raise IndexInputError(f"chunk_size must be at least 1, got {chunk_size}.")
        if scoring not in SCORINGS:
            raise IndexInputError(f"scoring={scoring!r} is not one of {', '.join(SCORINGS)}.")
        self.dim = int(dim)
        self.metric = check_metric(metric)
        self.chunk_size = int(chunk_size)
        self.scoring = scoring
        self._scores_in_bf16: bool | None = None  # scoring="auto" resolved on the first search
        self._bf16: Any = None  # the bf16 copy of the vectors (and their largest norm), made on first use
        self._vectors = np.empty((0, self.dim), dtype=np.float32)  # capacity; rows past _count unused
        # a loaded index's vectors as its files hold them (base, then segments), memory-mapped, then
        # one part of what was added since (a view of _tail); searched part by part, joined into
        # _vectors only when a removal or a caller of .vectors needs them whole
        self._parts: list[np.ndarray] | None = None
        self._tail = np.empty((0, self.dim), dtype=np.float32)  # capacity, as _vectors
        self._subs: list[FlatIndex] | None = None  # one FlatIndex over each part, to search it in place
        self._origin: _Origin | None = None  # the saved files this index's first rows are, while true
        self._count = 0
        self._ids: list[str] = []
        self._seen: set[str] | None = set()  # None: not made yet (a loaded index), see _id_set

    def __len__(self) -> int:
        return self._count

    @property
    def _id_set(self) -> set[str]:
        """The ids as a set, made on the first add or remove: hashing 1M ids took 0.34 s of a 1 s load,
        and a search needs no set."""
        if self._seen is None:
            seen = set(self._ids)
            if len(seen) != len(self._ids):
                where = self._origin.files.folder / "ids.json" if self._origin else "the ids.json it was loaded from"
                raise ArtifactError(f"{where} repeats ids; the index is damaged, rebuild it.")
            self._seen = seen
        return self._seen

    @property
    def vectors(self) -> np.ndarray:
        """The stored vectors [len, dim] (unit length for cosine); a view, do not modify."""
        if self._parts is not None:
            self._vectors = self._parts[0] if len(self._parts) == 1 else np.concatenate(self._parts)
            self._parts = self._subs = None
        return self._vectors[: self._count]

    @property
    def ids(self) -> list[str]:
        return list(self._ids)

    def add(self, ids: Sequence[str], vectors: Any) -> None:
        vectors = as_matrix(vectors, self.dim)
        ids = check_ids(ids, len(vectors), self._id_set)
        if self.metric == "cosine":
            vectors = normalize_rows(vectors)
        if self._parts is not None:  # a loaded index: the saved rows stay where they are
            assert self._origin is not None  # set with the parts by load
            saved = len(self._origin.segments) + 1
            added = self._count - self._origin.count
            self._tail = _appended(self._tail, added, vectors)
            self._parts[saved:] = [self._tail[: added + len(vectors)]]
            self._subs = self._subs[:saved] if self._subs else None  # the tail's own is made again
        else:
            self._vectors = _appended(self._vectors, self._count, vectors)
        self._count += len(vectors)
        self._bf16 = None
        self._ids.extend(ids)
        self._id_set.update(ids)

    def remove(self, ids: Sequence[str]) -> None:
        """Drop ``ids`` (contracts.OPTIONAL["index"]["remove"]); the others keep their order, so ties still go
        to the earlier-added vector. Copies the kept vectors: O(len) per call, so remove in batches."""
        drop = set(check_removal(ids, self._id_set))
        if not drop:
            return
        keep = np.fromiter((i not in drop for i in self._ids), dtype=bool, count=self._count)
        self._vectors = np.ascontiguousarray(self.vectors[keep])  # also leaves a loaded index's memory map
        self._count = len(self._vectors)
        self._origin = None  # the saved rows are not this index's first rows any more
        self._bf16 = None
        self._ids = [i for i in self._ids if i not in drop]
        self._id_set.difference_update(drop)

    def search(self, queries: Any, k: int) -> tuple[np.ndarray, list[list[str]]]:
        """Scores [n, k'] best first and their ids; k' = min(k, len(self)). Ties go to the earlier-added vector."""
        k = check_k(k)
        queries = as_matrix(queries, self.dim, "queries")
        if self.metric == "cosine":
            queries = normalize_rows(queries)
        k = min(int(k), self._count)
        if k == 0 or len(queries) == 0:  # an empty index finds nothing
            return np.empty((len(queries), k), dtype=np.float32), [[] for _ in queries]
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        if self._parts is not None and len(self._parts) > 1:
            scores, rows = self._search_parts(queries, k)
        else:
            self.vectors  # noqa: B018  (one part: its memory map, searched in place)
            scores, rows = self._search_rows(queries, k)
        return scores, [[self._ids[r] for r in row] for row in rows.tolist()]

    def _search_parts(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Each saved segment (and what was added since) searched where it lies, the best k of all kept:
        the ranking of one array (the same dot products, equal to float rounding; ties to the lower row)."""
        assert self._parts is not None  # search calls this only for a loaded index's parts
        if self._subs is None or len(self._subs) != len(self._parts):
            subs = list(self._subs or [])
            for part in self._parts[len(subs):]:
                sub = FlatIndex(self.dim, self.metric, chunk_size=self.chunk_size, scoring=self.scoring)
                sub._vectors, sub._count, sub._scores_in_bf16 = part, len(part), self._scores_in_bf16
                subs.append(sub)
            self._subs = subs
        scores, rows, offset = [], [], 0
        for sub in self._subs:
            if sub._count:
                found, at = sub._search_rows(queries, min(k, sub._count))
                scores.append(found)
                rows.append(at + offset)
            offset += sub._count
        every, at_rows = np.concatenate(scores, axis=1), np.concatenate(rows, axis=1)
        order = np.lexsort((at_rows, -every), axis=1)[:, :k]
        return np.take_along_axis(every, order, axis=1), np.take_along_axis(at_rows, order, axis=1)

    def _search_rows(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Scores and row positions [n, k] in self._vectors, best first, ties to the lower row."""
        # serving an ONNX model loads no torch, and a few queries are not worth importing it (seconds)
        if "torch" not in sys.modules and len(queries) * self._count < _TORCH_WORTH:
            return self._search_numpy(queries, k)
        import torch

        with warnings.catch_warnings():  # a loaded index is a read-only memory map; torch only reads it
            warnings.simplefilter("ignore", UserWarning)
            stored = torch.from_numpy(self._vectors[: self._count])
        q = torch.from_numpy(queries)
        with torch.inference_mode():
            if self._use_bf16():
                scores, rows = self._search_bf16(q, stored, k)
            else:
                scores, rows = self._search(q, stored, k)
        return scores.numpy(), rows.numpy()

    def _search_numpy(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The fp32 search without torch: numpy's product, argpartition (single-threaded), the same ranking."""
        step, chunk = self._blocks()
        scores = np.empty((len(queries), k), dtype=np.float32)
        rows = np.empty((len(queries), k), dtype=np.int64)
        for start in range(0, len(queries), step):
            block = queries[start : start + step]
            best = np.empty((len(block), 0), dtype=np.int64)
            for first in range(0, self._count, chunk):
                part = block @ self._vectors[first : min(first + chunk, self._count)].T
                best = np.concatenate([best, top_k(part, k) + first], axis=1)
            exact = np.einsum("qd,qcd->qc", block, self._vectors[best])
            order = np.lexsort((best, -exact), axis=1)[:, :k]
            scores[start : start + step] = np.take_along_axis(exact, order, axis=1)
            rows[start : start + step] = np.take_along_axis(best, order, axis=1)
        return scores, rows

    def _use_bf16(self) -> bool:
        if self._scores_in_bf16 is None:
            self._scores_in_bf16 = bf16_scoring_pays() if self.scoring == "auto" else self.scoring == "bf16"
        return self._scores_in_bf16

    def _blocks(self) -> tuple[int, int]:
        """(queries, vectors) per step: the scores of one step fit the budget."""
        chunk = min(self.chunk_size, self._count)
        return max(1, _SCORE_BUDGET // chunk), chunk

    def _search(self, q: Any, stored: Any, k: int) -> tuple[Any, Any]:
        """Exact fp32 top-k of every query: best first, ties to the earlier-added vector."""
        import torch

        step, chunk = self._blocks()
        scores = torch.empty((len(q), k), dtype=torch.float32)
        rows = torch.empty((len(q), k), dtype=torch.int64)
        for start in range(0, len(q), step):
            block = q[start : start + step]
            found = [self._chunk_top(block @ stored[first : first + chunk].T, k, first)
                     for first in range(0, self._count, chunk)]
            _, best = _ranked(found, k)
            scores[start : start + step], rows[start : start + step] = _rescored(block, stored, best, k)
        return scores, rows

    def _chunk_top(self, scores: Any, k: int, offset: int) -> tuple[Any, Any]:
        """The k best of one chunk's scores, with ties at the cut broken by position."""
        import torch

        width = scores.shape[1]
        if k >= width:
            return scores, torch.arange(width).expand(len(scores), width) + offset
        # one more than asked: where the k-th and the (k+1)-th score are equal, a tie straddles the
        # cut and topk chose among the tied arbitrarily (counting scores >= the k-th instead costs a
        # second pass over the block, as long as the top-k itself)
        values, picked = _topk(scores, k + 1)
        for row in torch.nonzero(values[:, k - 1] == values[:, k]).flatten().tolist():
            order = np.lexsort((np.arange(width), -scores[row].float().numpy()))[:k]
            picked[row, :k] = torch.from_numpy(order)
            values[row, :k] = scores[row, picked[row, :k]]
        return values[:, :k], picked[:, :k] + offset

    def _search_bf16(self, q: Any, stored: Any, k: int) -> tuple[Any, Any]:
        """Candidates by bf16 scores, ranked by their fp32 scores; uncertified queries again in fp32."""
        import torch

        if self._bf16 is None:
            self._bf16 = (stored.to(torch.bfloat16), float(torch.linalg.vector_norm(stored, dim=1).max()))
        low, max_norm = self._bf16
        wanted = min(self._count, 2 * k + 32)  # candidates: enough that the k-th exact score clears the bound
        step, chunk = self._blocks()
        scores = torch.empty((len(q), k), dtype=torch.float32)
        rows = torch.empty((len(q), k), dtype=torch.int64)
        unsure: list[int] = []
        for start in range(0, len(q), step):
            block = q[start : start + step]
            found = []
            for first in range(0, self._count, chunk):
                approx = block.to(torch.bfloat16) @ low[first : first + chunk].T
                values, picked = _topk(approx, min(wanted, approx.shape[1]))
                found.append((values.float(), picked + first))
            approx_values = torch.cat([v for v, _ in found], dim=1)
            candidates = torch.cat([r for _, r in found], dim=1)
            if len(found) > 1:  # the best `wanted` over all chunks
                approx_values, keep = torch.topk(approx_values, wanted, dim=1)
                candidates = torch.gather(candidates, 1, keep)
            best_scores, best_rows = _rescored(block, stored, candidates, k)
            # any vector left out scored at most the last candidate's approximation, so its exact
            # score is at most that plus the error bound; the k-th found must beat it
            bound = approx_values[:, -1] + bf16_error(torch.linalg.vector_norm(block, dim=1), max_norm,
                                                      approx_values.abs().max(dim=1).values)
            certified = (best_scores[:, -1] > bound) | (wanted >= self._count)
            scores[start : start + step], rows[start : start + step] = best_scores, best_rows
            unsure.extend((start + torch.nonzero(~certified).flatten()).tolist())
        if unsure:
            again = torch.tensor(unsure)
            scores[again], rows[again] = self._search(q[again], stored, k)
        return scores, rows

    def save(self, path: str | os.PathLike, meta: dict[str, Any] | None = None) -> None:
        """Write the index to ``path``. Saving a loaded index whose saved rows are still its first rows
        (only adds since) hard-links those files and writes the added rows as one more segment."""
        with atomic_dir(path) as tmp:
            layout = self._save_appended(tmp)
            if layout is None:  # the whole index, one file
                np.save(tmp / VECTORS_FILE, self.vectors, allow_pickle=False)
                write_ids(tmp, self._ids)
                layout = {"base_count": self._count, "segments": []}
            options = {"chunk_size": self.chunk_size, "scoring": self.scoring}
            write_meta(tmp, base_meta(self.name, self.dim, self.metric, self._count, options,
                                      {**(meta or {}), "layout": layout}))

    def _save_appended(self, tmp: Path) -> dict[str, Any] | None:
        origin = self._origin
        if origin is None or len(origin.segments) >= MAX_SEGMENTS or not origin.files.unchanged():
            return None
        for name in origin.files.identities:
            origin.files.link(name, tmp / name)
        segments = list(origin.segments)
        if self._count > origin.count:
            name = f"{len(segments) + 1:05d}"
            (tmp / SEGMENTS_DIR).mkdir(exist_ok=True)
            added = self._tail if self._parts is not None else self._vectors[origin.count:]
            np.save(tmp / SEGMENTS_DIR / f"{name}.npy", added[: self._count - origin.count], allow_pickle=False)
            (tmp / SEGMENTS_DIR / f"{name}.ids.json").write_text(
                json.dumps(self._ids[origin.count:], ensure_ascii=False), encoding="utf-8")
            segments.append([name, self._count - origin.count])
        return {"base_count": origin.base_count, "segments": segments}

    @classmethod
    def load(cls, path: str | os.PathLike) -> "FlatIndex":
        meta = read_index_meta(path, cls.name)
        dim, count = meta["dim"], meta["count"]
        layout = meta.get("layout") or {"base_count": count, "segments": []}
        try:
            base_count = int(layout["base_count"])
            segments = [(str(name), int(rows)) for name, rows in layout["segments"]]
        except (KeyError, TypeError, ValueError):
            raise ArtifactError(f"{os.path.join(path, 'structret.json')}: its 'layout' is damaged; rebuild the "
                                f"index.") from None
        if base_count + sum(rows for _, rows in segments) != count:
            raise ArtifactError(f"{os.path.join(path, 'structret.json')}: its segments do not add up to count="
                                f"{count}; the index is damaged, rebuild it.")
        files = [(VECTORS_FILE, base_count)] + [(f"{SEGMENTS_DIR}/{name}.npy", rows) for name, rows in segments]
        parts = [_read_vectors(os.path.join(path, name), rows, dim) for name, rows in files]
        options = meta.get("options") or {}
        index = cls(dim, meta["metric"], chunk_size=options.get("chunk_size", 65536),
                    scoring=options.get("scoring", "auto"))
        index._ids = read_ids(path, base_count)
        for name, rows in segments:
            index._ids += _read_segment_ids(Path(path) / SEGMENTS_DIR / f"{name}.ids.json", rows)
        index._seen = None
        index._parts, index._count = parts, count
        names = [VECTORS_FILE, "ids.json"] + [f"{SEGMENTS_DIR}/{n}{ext}" for n, _ in segments
                                              for ext in (".npy", ".ids.json")]
        index._origin = _Origin(SavedFiles.of(path, names), count, base_count, [list(s) for s in segments])
        return index

    def __repr__(self) -> str:
        return f"FlatIndex(dim={self.dim}, metric={self.metric!r}, len={self._count})"


@dataclass
class _Origin:
    """The saved files (base, segments) that a loaded index's first ``count`` rows are."""

    files: SavedFiles
    count: int
    base_count: int
    segments: list[list[Any]]  # [name, rows] of each segment


def _appended(buffer: np.ndarray, count: int, rows: np.ndarray) -> np.ndarray:
    """``rows`` written after the first ``count`` rows of ``buffer``, grown geometrically when full, so
    many small adds cost amortized O(1) copies per row."""
    end = count + len(rows)
    if end > len(buffer):
        grown = np.empty((max(end, 2 * len(buffer)), buffer.shape[1]), dtype=np.float32)
        grown[:count] = buffer[:count]
        buffer = grown
    buffer[count:end] = rows
    return buffer


def _read_vectors(file: str, rows: int, dim: int) -> np.ndarray:
    try:
        # memory-mapped: searching streams chunks from disk instead of reading it all first
        vectors = np.load(file, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        raise ArtifactError(f"{file} is missing; the index is incomplete, rebuild it.") from None
    except ValueError as exc:
        raise ArtifactError(f"{file} cannot be read ({exc}); the file is damaged, rebuild the index.") from None
    if vectors.shape != (rows, dim) or vectors.dtype != np.float32:
        raise ArtifactError(
            f"{file} holds {vectors.dtype} vectors of shape {vectors.shape}, but structret.json says "
            f"{rows} vectors of dimension {dim}; the index is damaged or was edited, rebuild it."
        )
    return vectors


def _read_segment_ids(file: Path, rows: int) -> list[str]:
    try:
        ids = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ArtifactError(f"{file} cannot be read ({exc}); the index is damaged, rebuild it.") from None
    if not isinstance(ids, list) or len(ids) != rows:
        raise ArtifactError(f"{file} does not hold the {rows} ids structret.json says; the index is damaged, "
                            f"rebuild it.")
    return ids


GROUP = 64  # scores per group in _topk


def _topk(scores: Any, n: int) -> tuple[Any, Any]:
    """torch.topk(scores, n, dim=1) (values best first; among equal values any), twice as fast on wide rows:
    the n best scores of a row lie in the n groups (of GROUP columns) with the highest maxima (a group
    holding one of them has a maximum at least that score, and fewer than n groups can beat it), so
    only those groups are searched. The values are exactly topk's; which of equal scores is picked may
    differ, which the caller settles by position."""
    import torch

    rows, width = scores.shape
    if width % GROUP or width < 4 * GROUP * n:  # too narrow to gain, or a partial last chunk
        return torch.topk(scores, n, dim=1)
    groups = torch.topk(scores.view(rows, width // GROUP, GROUP).amax(dim=2), n, dim=1).indices
    columns = (groups.unsqueeze(-1) * GROUP + torch.arange(GROUP)).reshape(rows, n * GROUP)
    values, picked = torch.topk(torch.gather(scores, 1, columns), n, dim=1)
    return values, torch.gather(columns, 1, picked)


def _rescored(queries: Any, stored: Any, rows: Any, k: int) -> tuple[Any, Any]:
    """The k best of ``rows`` per query by their fp32 scores, each a dot product of its own: the same
    arithmetic whichever way the rows were found, so both scorings rank alike (a matrix product
    sums in another order, which moves scores by ~1e-7 and can swap near-ties)."""
    import torch

    return _ranked([(torch.einsum("qd,qcd->qc", queries, stored[rows]), rows)], k)


def _ranked(found: list[tuple[Any, Any]], k: int) -> tuple[Any, Any]:
    """The k best of several (scores, rows) lists per query, best first, ties to the lower row."""
    import torch

    scores = torch.cat([s for s, _ in found], dim=1).numpy()
    rows = torch.cat([r for _, r in found], dim=1).numpy()
    order = np.lexsort((rows, -scores), axis=1)[:, :k]
    return (torch.from_numpy(np.take_along_axis(scores, order, axis=1)),
            torch.from_numpy(np.take_along_axis(rows, order, axis=1)))
