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
