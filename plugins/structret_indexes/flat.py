"""Exact inner-product search over all stored vectors, a chunk at a time."""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from structret.artifacts import atomic_dir, write_meta
from structret.errors import ArtifactError
from structret.indexing import (
    IndexInputError,
    as_matrix,
    base_meta,
    check_ids,
    check_metric,
    check_removal,
    normalize_rows,
    read_ids,
    read_index_meta,
    write_ids,
)

VECTORS_FILE = "vectors.npy"
# scores held at once per search step (float32): 16M = 64 MB whatever the index size
_SCORE_BUDGET = 1 << 24


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


class FlatIndex:
    """Brute force, exact. ``metric="cosine"`` stores unit vectors and normalizes queries.

    Search walks the stored vectors ``chunk_size`` rows at a time, keeping a running top-k,
    so memory stays bounded however large the index grows.
    """

    name = "flat"
    exact = True

    def __init__(self, dim: int, metric: str = "ip", chunk_size: int = 65536):
        if int(dim) < 1:
            raise IndexInputError(f"dim must be a positive number of dimensions, got {dim}.")
        if int(chunk_size) < 1:
            raise IndexInputError(f"chunk_size must be at least 1, got {chunk_size}.")
        self.dim = int(dim)
        self.metric = check_metric(metric)
        self.chunk_size = int(chunk_size)
        self._vectors = np.empty((0, self.dim), dtype=np.float32)  # capacity; rows past _count unused
        self._count = 0
        self._ids: list[str] = []
        self._id_set: set[str] = set()

    def __len__(self) -> int:
        return self._count

    @property
    def vectors(self) -> np.ndarray:
        """The stored vectors [len, dim] (unit length for cosine); a view, do not modify."""
        return self._vectors[: self._count]

    @property
    def ids(self) -> list[str]:
        return list(self._ids)

    def add(self, ids: Sequence[str], vectors: Any) -> None:
        vectors = as_matrix(vectors, self.dim)
        ids = check_ids(ids, len(vectors), self._id_set)
        if self.metric == "cosine":
            vectors = normalize_rows(vectors)
        end = self._count + len(vectors)
        if end > len(self._vectors):
            # grow geometrically so many small adds cost amortized O(1) copies per row
            grown = np.empty((max(end, 2 * len(self._vectors)), self.dim), dtype=np.float32)
            grown[: self._count] = self._vectors[: self._count]
            self._vectors = grown
        self._vectors[self._count : end] = vectors
        self._count = end
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
        self._ids = [i for i in self._ids if i not in drop]
        self._id_set -= drop

    def search(self, queries: Any, k: int) -> tuple[np.ndarray, list[list[str]]]:
        """Scores [n, k'] best first and their ids; k' = min(k, len(self)). Ties go to the earlier-added vector."""
        if int(k) < 1:
            raise IndexInputError(f"k must be at least 1, got {k}.")
        queries = as_matrix(queries, self.dim, "queries")
        if self.metric == "cosine":
            queries = normalize_rows(queries)
        k = min(int(k), self._count)
        scores = np.empty((len(queries), k), dtype=np.float32)
        rows = np.empty((len(queries), k), dtype=np.int64)
        chunk = min(self.chunk_size, max(self._count, 1))
        step = max(1, _SCORE_BUDGET // chunk)  # queries per block, so one block of scores fits the budget
        for start in range(0, len(queries) if k > 0 else 0, step):  # an empty index finds nothing
            block = slice(start, start + step)
            scores[block], rows[block] = self._search_block(queries[block], k, chunk)
        return scores, [[self._ids[r] for r in row] for row in rows]

    def _search_block(self, queries: np.ndarray, k: int, chunk: int) -> tuple[np.ndarray, np.ndarray]:
        best_scores = np.empty((len(queries), 0), dtype=np.float32)
        best_rows = np.empty((len(queries), 0), dtype=np.int64)
        for start in range(0, self._count, chunk):
            chunk_scores = queries @ self._vectors[start : min(start + chunk, self._count)].T
            keep = top_k(chunk_scores, k)
            # merge the chunk's best with the best so far: at most 2k per row, so a full
            # sort (by score, then insertion order) is cheap and leaves them ranked
            scores = np.concatenate([best_scores, np.take_along_axis(chunk_scores, keep, axis=1)], axis=1)
            rows = np.concatenate([best_rows, keep + start], axis=1)
            order = np.lexsort((rows, -scores), axis=1)[:, :k]
            best_scores = np.take_along_axis(scores, order, axis=1)
            best_rows = np.take_along_axis(rows, order, axis=1)
        return best_scores, best_rows

    def save(self, path: str | os.PathLike, meta: dict[str, Any] | None = None) -> None:
        with atomic_dir(path) as tmp:
            np.save(tmp / VECTORS_FILE, self.vectors, allow_pickle=False)
            write_ids(tmp, self._ids)
            options = {"chunk_size": self.chunk_size}
            write_meta(tmp, base_meta(self.name, self.dim, self.metric, self._count, options, meta))

    @classmethod
    def load(cls, path: str | os.PathLike) -> "FlatIndex":
        meta = read_index_meta(path, cls.name)
        dim, count = meta["dim"], meta["count"]
        file = os.path.join(path, VECTORS_FILE)
        try:
            # memory-mapped: searching streams chunks from disk instead of reading it all first
            vectors = np.load(file, mmap_mode="r", allow_pickle=False)
        except FileNotFoundError:
            raise ArtifactError(f"{file} is missing; the index is incomplete, rebuild it.") from None
        except ValueError as exc:
            raise ArtifactError(f"{file} cannot be read ({exc}); the file is damaged, rebuild the index.") from None
        if vectors.shape != (count, dim) or vectors.dtype != np.float32:
            raise ArtifactError(
                f"{file} holds {vectors.dtype} vectors of shape {vectors.shape}, but structret.json says "
                f"{count} vectors of dimension {dim}; the index is damaged or was edited, rebuild it."
            )
        options = meta.get("options") or {}
        index = cls(dim, meta["metric"], chunk_size=options.get("chunk_size", 65536))
        index._ids = read_ids(path, count)
        index._id_set = set(index._ids)
        if len(index._id_set) != count:
            raise ArtifactError(f"{os.path.join(path, 'ids.json')} repeats ids; the index is damaged, rebuild it.")
        index._vectors, index._count = vectors, count
        return index

    def __repr__(self) -> str:
        return f"FlatIndex(dim={self.dim}, metric={self.metric!r}, len={self._count})"
