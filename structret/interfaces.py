"""The shapes plugins implement. Structural (``typing.Protocol``): no base class to inherit."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Protocol, Sequence, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

    from structret.records import Entity, Record
    from structret.records import Sequence as Linearized


@runtime_checkable
class Backbone(Protocol):
    name: str  # the model id or path, recorded in index metadata
    dim: int
    capabilities: frozenset[str]

    def encode(
        self,
        texts: Sequence[str],
        *,
        kind: Literal["query", "document"] = "document",
        batch_size: int = 32,
        show_progress: bool = False,
    ) -> "np.ndarray":
        """float32 matrix [len(texts), dim], row i for texts[i]."""


@runtime_checkable
class Index(Protocol):
    """A vector index. ``tests/test_index_contract.py`` checks every registered one against this.

    - ``Index(dim, metric="ip", **options)``: ``metric`` is ``"ip"`` (scores are inner
      products) or ``"cosine"`` (inner products of unit vectors; scale does not matter).
    - ``add(ids, vectors)``: string ids (any unicode), one per row of a ``[n, dim]`` matrix;
      several adds equal one. A repeated id, a count mismatch, a wrong dimension or a NaN
      raises ``ValueError`` (``structret.indexing.IndexInputError``) naming the problem, and
      leaves the index as it was. Zero rows are a no-op.
    - ``search(queries, k)``: ``(scores, ids)``, scores float32 ``[n, k']`` best first with
      ``k' = min(k, len(self))`` for every row (an empty index gives ``[n, 0]``), each score
      the metric's value for the id beside it. ``[0, dim]`` queries give an empty result;
      ``k < 1``, a 1-d vector or a wrong dimension raise ``ValueError``.
    - ``exact`` (optional attribute): ``True`` if search returns the true top k (recall@10
      must be 1.0); an index without it is approximate (recall@10 >= 0.9 on unit vectors with
      its default options).
    - ``save(path, meta)`` through ``structret.artifacts.atomic_dir``: ``structret.json``
      (``structret.indexing.base_meta``, the caller's ``meta`` kept) plus checksummed files;
      an interrupted save leaves the previous index. Classmethod ``load(path)`` gives the
      same results as the saved index (an exact one: as before saving) and rejects a
      truncated file; using a loaded index never changes the saved files (an index kept on a
      server, like ``milvus`` with ``uri=``, points at data that is not a snapshot).
    - ``close()`` (optional): release connections or working files; called when done.
    """

    dim: int
    metric: str

    def add(self, ids: Sequence[str], vectors: "np.ndarray") -> None: ...

    def search(self, queries: "np.ndarray", k: int) -> tuple["np.ndarray", list[list[str]]]:
        """Scores [n, k'] (best first) and the matching ids; k' = min(k, len(self))."""

    def save(self, path: str, meta: dict[str, Any] | None = None) -> None: ...

    def __len__(self) -> int: ...


@runtime_checkable
class Retriever(Protocol):
    def fit(self, docs: Sequence[str]) -> None:
        """Index the collection; document i is ``docs[i]``."""

    def score(self, queries: Sequence[str], doc_indices: "np.ndarray | None" = None) -> "np.ndarray":
        """Scores [len(queries), n] against all fitted documents, or those in ``doc_indices``."""


@runtime_checkable
class Extractor(Protocol):
    def extract(self, text: str, language: str | None = None) -> "list[Entity]": ...


@runtime_checkable
class Linearizer(Protocol):
    def linearize(self, record: "Record") -> "Linearized | None": ...
