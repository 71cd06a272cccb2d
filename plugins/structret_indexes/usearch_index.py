"""Approximate search with usearch's HNSW graph: f32, bf16 or i8 vectors, removable by id."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from usearch.index import Index as _Graph

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

INDEX_FILE = "index.usearch"
KEYS_FILE = "keys.npy"  # usearch key of each id in ids.json, same order
# graphs added by updates of a saved index: one per update (segments/NNNNN.usearch), searched beside
# the first and merged, so an update writes its own graph and hard-links the others. A graph that
# loses ids to a removal is written again; the keys and ids files are written whole (small).
SEGMENTS_DIR = "segments"
DTYPES = ("f32", "bf16", "i8")
# i8 keeps unit vectors: a row this far from length 1 would be clipped or lose its precision
_UNIT_TOLERANCE = 1e-2


class USearchIndex:
    """usearch HNSW graph. Scores are similarities (1 - usearch's distance), higher is better.

    usearch keys are integers: each string id gets the next free key, and the id <-> key map
    is saved beside the graph (ids.json, keys.npy). ``remove`` marks ids deleted in the graph
    (usearch keeps the node as a tombstone, so many removals slowly cost recall; rebuilding
    drops them). i8 is usearch's cosine over vectors scaled to [-127, 127]: with
    ``metric="ip"`` it takes only unit rows (then cosine equals the inner product).

    Searches that find fewer than ``min(k, len)`` results (a small graph, many tombstones)
    are answered again by usearch's exact scan, so every row has ``k'`` results.
    """

    name = "usearch"
    exact = False

    def __init__(self, dim: int, metric: str = "ip", dtype: str = "f32", connectivity: int = 16,
                 expansion_add: int = 128, expansion_search: int = 64, threads: int = 0):
        if int(dim) < 1:
            raise IndexInputError(f"dim must be a positive number of dimensions, got {dim}.")
        if dtype not in DTYPES:
            raise IndexInputError(f"dtype {dtype!r} is not supported; use one of: {', '.join(DTYPES)}.")
        for option, value in (("connectivity", connectivity), ("expansion_add", expansion_add),
                              ("expansion_search", expansion_search)):
            if int(value) < 1:
                raise IndexInputError(f"{option} must be at least 1, got {value}.")
        if int(threads) < 0:
            raise IndexInputError(f"threads must be 0 (every core) or more, got {threads}.")
        self.dim = int(dim)
        self.metric = check_metric(metric)
        self.dtype = dtype
        self.connectivity, self.expansion_add = int(connectivity), int(expansion_add)
        self.expansion_search, self.threads = int(expansion_search), int(threads)
        # the graphs, each with the file it was loaded from while it is unchanged (None: to be written);
        # adds go to the last one, which is a new graph if the last one came from a file
        self._graphs: list[list[Any]] = [[self._new_graph(), None]]
        self._saved: SavedFiles | None = None  # the files the graphs were loaded from
        self._key_of: dict[str, int] = {}  # insertion order: ids.json lists them in it
        self._id_of: dict[int, str] = {}
        self._next_key = 0

    def _new_graph(self) -> _Graph:
        # usearch's ip on i8 is a raw integer product; its cos is the cosine of the rounded vectors
        metric = "cos" if self.metric == "cosine" or self.dtype == "i8" else "ip"
        return _Graph(ndim=self.dim, metric=metric, dtype=self.dtype, connectivity=self.connectivity,
                      expansion_add=self.expansion_add, expansion_search=self.expansion_search)

    def __len__(self) -> int:
        return len(self._key_of)

    @property
    def ids(self) -> list[str]:
        return list(self._key_of)

    def add(self, ids: Sequence[str], vectors: Any) -> None:
        vectors = as_matrix(vectors, self.dim)
        ids = check_ids(ids, len(vectors), self._key_of.keys())
        if not ids:
            return
        if self.dtype == "i8" and self.metric == "ip":
            norms = np.linalg.norm(vectors, axis=1)
            off = np.flatnonzero(np.abs(norms - 1.0) > _UNIT_TOLERANCE)
            if len(off):
                raise IndexInputError(
                    f"dtype i8 with metric ip takes unit vectors, and {len(off)} row(s) are not (row {off[0]} has "
                    f"length {norms[off[0]]:.4g}); use metric=cosine, or dtype f32 or bf16."
                )
        elif self.metric == "cosine":
            vectors = normalize_rows(vectors)  # usearch's cos would too; the exact fallback must agree
        keys = np.arange(self._next_key, self._next_key + len(ids), dtype=np.uint64)
        if self._graphs[-1][1] is not None:  # the last graph is a saved file: it stays as it is
            self._graphs.append([self._new_graph(), None])
        self._graphs[-1][0].add(keys, vectors, threads=self.threads)
        self._next_key += len(ids)
        for i, key in zip(ids, keys.tolist()):
            self._key_of[i] = key
            self._id_of[key] = i

    def remove(self, ids: Sequence[str]) -> None:
        """Remove every id in ``ids``; an id not in the index (or repeated) raises ValueError and removes nothing."""
        ids = check_removal(ids, self._key_of)
        if not ids:
            return
        keys = np.array([self._key_of[i] for i in ids], dtype=np.uint64)
        for entry in self._graphs:
            held = keys[np.asarray(entry[0].contains(keys), dtype=bool).reshape(-1)]
            if len(held):
                entry[0].remove(held)
                entry[1] = None  # changed: written again on save
        for i in ids:
            del self._id_of[self._key_of.pop(i)]

    def search(self, queries: Any, k: int) -> tuple[np.ndarray, list[list[str]]]:
        """Scores [n, k'] best first and their ids; k' = min(k, len(self))."""
        k = check_k(k)
        queries = as_matrix(queries, self.dim, "queries")
        k = min(int(k), len(self))
        if k == 0 or len(queries) == 0:
            return np.empty((len(queries), k), dtype=np.float32), [[] for _ in queries]
        if self.metric == "cosine":
            queries = normalize_rows(queries)
        found = [self._search_graph(graph, queries, min(k, len(graph))) for graph, _ in self._graphs if len(graph)]
        keys, distances = found[0]
        if len(found) > 1:  # the best k of every graph's best k
            keys = np.concatenate([f[0] for f in found], axis=1)
            distances = np.concatenate([f[1] for f in found], axis=1)
            order = np.argsort(distances, axis=1, kind="stable")[:, :k]
            keys, distances = np.take_along_axis(keys, order, axis=1), np.take_along_axis(distances, order, axis=1)
        scores = (1.0 - distances).astype(np.float32)
        return scores, [[self._id_of[key] for key in row] for row in keys.tolist()]

    def _search_graph(self, graph: _Graph, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        # a beam narrower than k cannot return k
        graph.expansion_search = max(self.expansion_search, k)  # type: ignore[misc]  # usearch's setter: mypy misses it
        keys, distances, counts = self._search(graph, queries, k, exact=False)
        short = np.flatnonzero(counts < k)
        if len(short):
            keys[short], distances[short], _ = self._search(graph, queries[short], k, exact=True)
        return keys, distances

    def _search(self, graph: _Graph, queries: np.ndarray, k: int, *,
                exact: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Keys [n, k], distances [n, k] and how many of each row are real; one query or many alike
        (usearch answers a single row with a Matches, several with a BatchMatches)."""
        found = graph.search(queries, k, threads=self.threads, exact=exact)
        n = len(queries)
        keys = np.zeros((n, k), dtype=np.uint64)
        distances = np.ones((n, k), dtype=np.float32)
        got_keys, got_distances = np.asarray(found.keys).reshape(n, -1), np.asarray(found.distances).reshape(n, -1)
        keys[:, : got_keys.shape[1]], distances[:, : got_keys.shape[1]] = got_keys[:, :k], got_distances[:, :k]
        counts = np.asarray(getattr(found, "counts", [len(found.keys)])).reshape(n)
        return keys, distances, counts

    def save(self, path: str | os.PathLike, meta: dict[str, Any] | None = None) -> None:
        with atomic_dir(path) as tmp:
            graphs = self._write_graphs(tmp)
            write_ids(tmp, list(self._key_of))
            np.save(tmp / KEYS_FILE, np.fromiter(self._key_of.values(), dtype=np.uint64, count=len(self)),
                    allow_pickle=False)
            options = {"dtype": self.dtype, "connectivity": self.connectivity, "expansion_add": self.expansion_add,
                       "expansion_search": self.expansion_search, "threads": self.threads}
            write_meta(tmp, base_meta(self.name, self.dim, self.metric, len(self), options,
                                      {**(meta or {}), "graphs": graphs}))

    def _write_graphs(self, tmp: Path) -> list[list[Any]]:
        """Each graph as a file of ``tmp``: the first INDEX_FILE, the others under SEGMENTS_DIR; a graph
        unchanged since it was loaded is hard-linked from its file, the others written."""
        unchanged = self._saved is not None and self._saved.unchanged()
        kept = [entry for n, entry in enumerate(self._graphs) if len(entry[0]) or n == 0]
        graphs = []
        for n, (graph, source) in enumerate(kept):
            name = INDEX_FILE if n == 0 else f"{SEGMENTS_DIR}/{n:05d}.usearch"
            if source is not None and unchanged:
                assert self._saved is not None  # unchanged says so
                self._saved.link(source, tmp / name)
            else:
                (tmp / name).parent.mkdir(parents=True, exist_ok=True)
                graph.save(str(tmp / name))
            graphs.append([name, len(graph)])
        return graphs

    @classmethod
    def load(cls, path: str | os.PathLike) -> "USearchIndex":
        meta = read_index_meta(path, cls.name)
        dim, count = meta["dim"], meta["count"]
        options = meta.get("options") or {}
        known = ("dtype", "connectivity", "expansion_add", "expansion_search", "threads")
        index = cls(dim, meta["metric"], **{key: options[key] for key in known if key in options})
        try:
            files = [(str(name), int(n)) for name, n in meta.get("graphs") or [[INDEX_FILE, count]]]
        except (TypeError, ValueError):
            raise ArtifactError(f"{os.path.join(path, 'structret.json')}: its 'graphs' are damaged; rebuild the "
                                f"index.") from None
        if sum(n for _, n in files) != count:
            raise ArtifactError(f"{os.path.join(path, 'structret.json')}: its graphs do not add up to count={count}; "
                                f"the index is damaged, rebuild it.")
        index._graphs = [[index._read_graph(os.path.join(path, name), n, dim), name] for name, n in files]
        index._saved = SavedFiles.of(path, [name for name, _ in files])
        ids = read_ids(path, count)
        keys_file = os.path.join(path, KEYS_FILE)
        try:
            keys = np.load(keys_file, allow_pickle=False)
        except FileNotFoundError:
            raise ArtifactError(f"{keys_file} is missing; the index is incomplete, rebuild it.") from None
        except ValueError as exc:
            raise ArtifactError(f"{keys_file} is truncated or damaged ({exc}); rebuild the index.") from None
        if keys.shape != (count,) or keys.dtype != np.uint64 or len(set(ids)) != count \
                or len(np.unique(keys)) != count:
            raise ArtifactError(f"{keys_file} and ids.json do not map {count} distinct ids to {count} distinct keys; "
                                f"the index is damaged or was edited, rebuild it.")
        index._key_of = dict(zip(ids, keys.tolist()))
        index._id_of = {key: i for i, key in index._key_of.items()}
        index._next_key = int(keys.max()) + 1 if count else 0
        return index

    def _read_graph(self, file: str, count: int, dim: int) -> _Graph:
        if not os.path.isfile(file):
            raise ArtifactError(f"{file} is missing; the index is incomplete, rebuild it.")
        try:
            stored = _Graph.metadata(file)
        except Exception as exc:  # usearch raises RuntimeError or ValueError on a file it cannot parse
            raise ArtifactError(f"{file} is truncated or damaged ({exc}); rebuild the index.") from None
        if stored is None or (stored["count_present"], stored["dimensions"]) != (count, dim):
            found = "no header" if stored is None else \
                f"{stored['count_present']} vectors of dimension {stored['dimensions']}"
            raise ArtifactError(f"{file} holds {found}, but structret.json says {count} vectors of dimension "
                                f"{dim}; the index is damaged or was edited, rebuild it.")
        graph = self._new_graph()
        try:
            graph.load(file)
        except RuntimeError as exc:  # usearch reads the whole file; a short one fails here
            raise ArtifactError(f"{file} is truncated or damaged (usearch: {exc}); rebuild the index.") from None
        return graph

    def __repr__(self) -> str:
        return (f"USearchIndex(dim={self.dim}, metric={self.metric!r}, dtype={self.dtype!r}, len={len(self)}, "
                f"connectivity={self.connectivity}, expansion_search={self.expansion_search})")

