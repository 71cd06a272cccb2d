"""A hybrid index's lexical side: one contract, whoever holds the terms.

A side is either a structret retriever that searches, saves and loads itself (bm25 and its family:
``RetrieverSide``), or the index plugin holding a BM25 of its own (Milvus's BM25 Function:
``IndexHeldSide``), which is given the retriever's fields of every document and weighs them as the
retriever would; the retriever then only reads the queries. ``SearchIndex`` asks a side only what
``LexicalSide`` declares, so search code has no branch for who holds it: the choice is made once,
when a side is made (``new_side``) or loaded (``load_side``), by what the index plugin can do.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any, Protocol, Sequence

from structret.contracts import (HasFields, HasLoad, HasSave, HasSearch, HasSearchLexical, HasSetTexts, HasTerms,
                                 HasUpdate, Index)
from structret.errors import ArtifactError, StructretError
from structret.registry import get_registry

IDS = "ids.json"  # the side's documents by position, in its directory

# one query's candidates: (document ids, scores), best first
Candidates = tuple[list[str], Any]


class LexicalSide(Protocol):
    """What a hybrid index asks of its lexical side."""

    retriever: Any  # the registered retriever: it reads the queries (and, held by itself, the documents)
    ids: list[str]  # the documents by position

    def meta(self) -> dict[str, Any]:
        """What the index's structret.json records of this side, beside the retriever's name and options."""

    def fit(self, ids: list[str], documents: list[str]) -> None:
        """Index ``documents`` (one per id, in order), replacing what the side held."""

    def update(self, ids: list[str], rows: list[Any]) -> bool:
        """Become the fit of the corpus ``ids`` reading only its new documents (``rows``: per document, the
        position of one it holds, or a new one's text); False when it cannot (then refit it)."""

    def search(self, texts: Sequence[str], width: int) -> list[Candidates]:
        """Each query's top ``width`` (documents that match nothing count, score 0, as structret's BM25
        lists them: a per-query normalization counts them)."""

    def save(self, directory: Path) -> None:
        """Write the side into ``directory`` (created): what ``load_side`` reads."""

    def __len__(self) -> int:
        """The documents it holds."""


class RetrieverSide:
    """A structret retriever with search, save and load as the lexical side."""

    def __init__(self, retriever: Any, ids: list[str] | None = None):
        self.retriever = retriever
        self.ids = list(ids or [])

    def meta(self) -> dict[str, Any]:
        return {}

    def fit(self, ids: list[str], documents: list[str]) -> None:
        self.retriever.fit(documents)
        self.ids = list(ids)

    def update(self, ids: list[str], rows: list[Any]) -> bool:
        if not isinstance(self.retriever, HasUpdate) or not self.retriever.update(rows):
            return False
        self.ids = list(ids)
        return True

    def search(self, texts: Sequence[str], width: int) -> list[Candidates]:
        scores, positions = self.retriever.search(list(texts), width)
        return [([self.ids[p] for p in row], row_scores) for row_scores, row in zip(scores, positions)]

    def save(self, directory: Path) -> None:
        self.retriever.save(directory)
        _write_ids(directory, self.ids)

    def __len__(self) -> int:
        return len(self.retriever)


class IndexHeldSide:
    """The index plugin's own BM25 as the lexical side: given the retriever's fields of every document
    (``set_texts``), searched by the retriever's query terms and field weights (``search_lexical``)."""

    def __init__(self, retriever: Any, index: Index, ids: list[str] | None = None,
                 weights: dict[str, float] | None = None):
        self.retriever = retriever
        self.index = index
        self.ids = list(ids or [])
        self.weights = dict(weights or {"text": 1.0})

    def meta(self) -> dict[str, Any]:
        return {"in_index": True, "field_weights": self.weights}

    def fit(self, ids: list[str], documents: list[str]) -> None:
        # every text again, not only an update's: a function's callers field changes with other functions
        fields = self.retriever.fields(documents)
        assert isinstance(self.index, HasSetTexts)  # new_side and load_side made it so
        self.index.set_texts(list(ids), {field: [" ".join(t) for t in terms] for field, (_, terms) in fields.items()})
        self.weights = {field: weight for field, (weight, _) in fields.items()}
        self.ids = list(ids)

    def update(self, ids: list[str], rows: list[Any]) -> bool:
        return False  # the fields of every document are given again (fit)

    def search(self, texts: Sequence[str], width: int) -> list[Candidates]:
        terms = [" ".join(t) for t in self.retriever.terms(list(texts), "query")]
        assert isinstance(self.index, HasSearchLexical)  # new_side and load_side made it so
        scores, matched = self.index.search_lexical(terms, width, self.weights)
        return [self._with_zeros(list(row_ids), row_scores[:len(row_ids)], width)
                for row_scores, row_ids in zip(scores, matched)]

    def _with_zeros(self, ids: list[str], scores: Any, width: int) -> Candidates:
        """What matched, then documents that match nothing (score 0) in document order up to ``width``."""
        matched = set(ids)
        zeros = list(itertools.islice((i for i in self.ids if i not in matched),
                                     max(0, width - len(ids))))  # an index may give more than asked
        return ids + zeros, [*scores, *([0.0] * len(zeros))]

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)  # the index plugin saved its BM25 with the vectors
        _write_ids(directory, self.ids)

    def __len__(self) -> int:
        return len(self.index)


def holds_lexical(index: Index | None) -> bool:
    """Whether an index plugin holds a hybrid's lexical side itself (``set_texts`` and ``search_lexical``)."""
    return isinstance(index, HasSetTexts) and isinstance(index, HasSearchLexical)


def new_side(index: Index | None, name: str, options: dict[str, Any], kind: str = "", *, retriever: Any = None
             ) -> LexicalSide:
    """An unfitted lexical side for ``index``: the retriever ``name`` (with ``options``; or ``retriever``, made
    so already) held by the index plugin where it can hold one, else by itself; StructretError if the
    retriever cannot be that side."""
    if retriever is None:
        retriever = get_registry().create("retriever", name, **options)
    if holds_lexical(index):
        if not (isinstance(retriever, HasTerms) and isinstance(retriever, HasFields)):
            raise StructretError(f"this {kind} index holds its lexical side itself and needs the retriever's "
                                 f"terms and fields (terms(texts, kind), fields(texts)); '{name}' has not both. Use "
                                 f"bm25, bm25-fields or bm25-project, or another kind of index.")
        assert index is not None  # holds_lexical(None) is False
        return IndexHeldSide(retriever, index)
    if not all(isinstance(retriever, member) for member in (HasSearch, HasSave, HasLoad)):
        raise StructretError(f"the retriever '{name}' cannot be an index's lexical side: it needs search(queries, "
                             f"k), save(directory) and load(directory) (structret/contracts.py).")
    return RetrieverSide(retriever)


def load_side(index: Index | None, meta: dict[str, Any], directory: Path, path: Any, kind: str = "") -> LexicalSide:
    """The lexical side ``meta`` (an index's ``structret.json["lexical"]``) records, from ``directory``."""
    name = str(meta.get("retriever"))
    options = meta.get("options") or {}
    side: LexicalSide
    try:
        if meta.get("in_index"):
            if not holds_lexical(index):
                raise ArtifactError(f"{path}: its lexical side was held by its {kind} index, which now cannot "
                                    f"hold one; rebuild the index.")
            # held by the index: the retriever only reads the queries
            assert index is not None  # holds_lexical(None) is False
            side = IndexHeldSide(get_registry().create("retriever", name, **options), index,
                                 weights=meta.get("field_weights"))
        else:
            made = get_registry().get("retriever", name).load()  # the registered class: load makes one
            if not isinstance(made, HasLoad):
                raise ArtifactError(f"{path}: its lexical side is a '{name}' retriever, which cannot load a saved "
                                    f"index.")
            side = RetrieverSide(made.load(directory))
        side.ids = json.loads((directory / IDS).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        if isinstance(exc, ArtifactError):
            raise
        raise ArtifactError(f"{directory}: the index's lexical side cannot be read ({exc}); rebuild the index with "
                            f"'structret index ... --lexical {name}'.") from None
    if len(side.ids) != len(side):
        raise ArtifactError(f"{directory}: {len(side.ids)} ids for {len(side)} documents; the "
                            f"index is damaged, rebuild it.")
    return side


def _write_ids(directory: Path, ids: list[str]) -> None:
    (directory / IDS).write_text(json.dumps(ids, ensure_ascii=False), encoding="utf-8")
