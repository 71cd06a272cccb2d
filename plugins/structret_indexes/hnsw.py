"""Approximate search with an HNSW graph (hnswlib)."""

from __future__ import annotations

import os
import struct
from typing import Any, Sequence

import hnswlib
import numpy as np

from structret.plugin import atomic_dir, write_meta
from structret.errors import ArtifactError
from structret.plugin import (
    IndexInputError,
    as_matrix,
    base_meta,
    check_ids,
    check_k,
    check_metric,
    check_removal,
    read_ids,
    read_index_meta,
    write_ids,
)

INDEX_FILE = "index.bin"
_INITIAL_CAPACITY = 1024

# The first fields of hnswlib's file, all size_t: offsetLevel0, max_elements,
# cur_element_count, size_data_per_element, label_offset, offsetData. Then the
# rest of a 96-byte header, then each element's record and its 4-byte link count.
_HEADER = struct.Struct("@6N")
_HEADER_BYTES = 96


def _stored_shape(file: str) -> tuple[int, int]:
    """(count, dim) as hnswlib's own file records them.

    hnswlib trusts the dim it is given when loading: a wrong one reads garbage or
    crashes the process, so check the file before handing it over.
    """
    try:
        size = os.path.getsize(file)
        with open(file, "rb") as f:
            header = f.read(_HEADER.size)
    except FileNotFoundError:
        raise ArtifactError(f"{file} is missing; the index is incomplete, rebuild it.") from None
    if len(header) < _HEADER.size:
        raise ArtifactError(f"{file} is truncated ({size} bytes); rebuild the index.")
    _, _, count, per_element, label_offset, data_offset = _HEADER.unpack(header)
    if size < _HEADER_BYTES + count * (per_element + 4):
        raise ArtifactError(f"{file} is truncated ({size} bytes for {count} vectors); rebuild the index.")
    return count, (label_offset - data_offset) // 4  # float32 coordinates


class HNSWIndex:
    """hnswlib HNSW graph. Scores are similarities, higher is better, as in FlatIndex.

    ``M`` and ``ef_construction`` set graph quality at build time; ``ef`` is the search
    beam (raised to k when k is larger). Capacity grows as vectors are added;
    ``max_elements`` only presizes it. Adds use all cores, so two builds of the same data
    can differ slightly; a saved index always searches the same way.

    With ``metric="ip"`` on vectors of varying length (unnormalized CLS or T5 vectors)
    the graph is weaker than on unit vectors: raise ``ef`` (on clustered test data,
    recall@10 went from 0.91 at ef=100 to 0.97 at ef=200 and 0.99 at ef=400).

    ``remove`` marks vectors deleted (hnswlib's ``mark_deleted``: searches skip them, the graph
    keeps them as waypoints, its file keeps the marks); an id removed and added again gets a new
    label. Label i is the i-th vector ever added; ``ids.json`` lists every label's id and
    ``structret.json`` the removed labels, so a saved index removes alike.
    """

    name = "hnsw"
    exact = False

    def __init__(
        self,
        dim: int,
        metric: str = "ip",
        M: int = 16,
        ef_construction: int = 200,
        ef: int = 100,
        max_elements: int | None = None,
        seed: int = 100,
        threads: int = 0,
    ):
        if int(dim) < 1:
            raise IndexInputError(f"dim must be a positive number of dimensions, got {dim}.")
        for option, value in (("M", M), ("ef_construction", ef_construction), ("ef", ef)):
            if int(value) < 1:
                raise IndexInputError(f"{option} must be at least 1, got {value}.")
        self.dim = int(dim)
        self.metric = check_metric(metric)
        self.M, self.ef_construction, self.ef, self.seed = int(M), int(ef_construction), int(ef), int(seed)
        if int(threads) < 0:
            raise IndexInputError(f"threads must be 0 (every core) or more, got {threads}.")
        self.threads = int(threads)
        # hnswlib's "ip" and "cosine" spaces both report 1 - similarity (cosine normalizes
        # the vectors itself), so the score is 1 - distance for either
        self._graph = hnswlib.Index(space=self.metric, dim=self.dim)
        self._graph.init_index(
            max_elements=int(max_elements or _INITIAL_CAPACITY), M=self.M,
            ef_construction=self.ef_construction, random_seed=self.seed,
        )
        self._ids: list[str] = []  # by label, the removed ones too
        self._deleted: set[int] = set()  # labels marked deleted
        self._label: dict[str, int] = {}  # id -> its live label

    def __len__(self) -> int:
        return len(self._label)

    @property
    def ids(self) -> list[str]:
        return [i for label, i in enumerate(self._ids) if label not in self._deleted]

    def remove(self, ids: Sequence[str]) -> None:
        """Mark ``ids`` deleted (contracts.OPTIONAL["index"]["remove"])."""
        for i in check_removal(ids, self._label):
            label = self._label.pop(i)
            self._graph.mark_deleted(label)
            self._deleted.add(label)

    def add(self, ids: Sequence[str], vectors: Any) -> None:
        vectors = as_matrix(vectors, self.dim)
        ids = check_ids(ids, len(vectors), self._label)
        if not ids:
            return
        start, end = len(self._ids), len(self._ids) + len(ids)
        capacity = self._graph.get_max_elements()
        if end > capacity:
            self._graph.resize_index(max(end, 2 * capacity))
        # hnswlib labels are integers: label i is the i-th id added
        self._graph.add_items(vectors, np.arange(start, end, dtype=np.uint64), num_threads=self._threads)
        self._ids.extend(ids)
        self._label.update(zip(ids, range(start, end)))

    def search(self, queries: Any, k: int) -> tuple[np.ndarray, list[list[str]]]:
        """Scores [n, k'] best first and their ids; k' = min(k, len(self))."""
        k = check_k(k)
        queries = as_matrix(queries, self.dim, "queries")
        k = min(int(k), len(self))
        if k == 0 or len(queries) == 0:
            return np.empty((len(queries), k), dtype=np.float32), [[] for _ in queries]
        self._graph.set_ef(max(self.ef, k))  # a beam narrower than k cannot return k results
        try:
            labels, distances = self._graph.knn_query(queries, k=k, num_threads=self._threads)
        except RuntimeError as exc:  # the graph search ran out of candidates before finding k
            raise IndexInputError(
                f"HNSW search found fewer than k={k} neighbours ({exc}); raise ef (now {self.ef}) "
                f"or rebuild with a larger M / ef_construction."
            ) from None
        scores = (1.0 - distances).astype(np.float32)
        return scores, [[self._ids[label] for label in row] for row in labels]

    @property
    def _threads(self) -> int:
        return self.threads or -1  # hnswlib's -1: every core

    def save(self, path: str | os.PathLike, meta: dict[str, Any] | None = None) -> None:
        with atomic_dir(path) as tmp:
            self._graph.save_index(str(tmp / INDEX_FILE))
            write_ids(tmp, self._ids)
            options = {"M": self.M, "ef_construction": self.ef_construction, "ef": self.ef, "seed": self.seed,
                       "threads": self.threads}
            saved = base_meta(self.name, self.dim, self.metric, len(self), options, meta)
            if self._deleted:  # older indexes have none, and no such key
                saved["deleted_labels"] = sorted(self._deleted)
            write_meta(tmp, saved)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "HNSWIndex":
        meta = read_index_meta(path, cls.name)
        deleted = meta.get("deleted_labels") or []
        dim, count = meta["dim"], meta["count"] + len(deleted)  # the file holds the removed ones too
        file = os.path.join(path, INDEX_FILE)
        stored_count, stored_dim = _stored_shape(file)
        if (stored_count, stored_dim) != (count, dim) or not all(isinstance(d, int) and 0 <= d < count
                                                                 for d in deleted):
            raise ArtifactError(
                f"{file} holds {stored_count} vectors of dimension {stored_dim}, but structret.json says "
                f"{count} vectors of dimension {dim} ({len(deleted)} removed); the index is damaged or was "
                f"edited, rebuild it."
            )
        options = meta.get("options") or {}
        known = {key: options[key] for key in ("M", "ef_construction", "ef", "seed", "threads") if key in options}
        index = cls(dim, meta["metric"], max_elements=1, **known)
        index._graph = hnswlib.Index(space=index.metric, dim=dim)  # replaces the empty one just made
        try:
            index._graph.load_index(file, max_elements=count)
        except RuntimeError as exc:
            raise ArtifactError(f"hnswlib cannot read {file} ({exc}); rebuild the index.") from None
        index._ids = read_ids(path, count)
        index._deleted = set(deleted)
        index._label = {i: label for label, i in enumerate(index._ids) if label not in index._deleted}
        if len(index._label) != count - len(index._deleted):
            raise ArtifactError(f"{os.path.join(path, 'ids.json')} repeats ids; the index is damaged, rebuild it.")
        return index

    def __repr__(self) -> str:
        return f"HNSWIndex(dim={self.dim}, metric={self.metric!r}, len={len(self)}, M={self.M}, ef={self.ef})"
