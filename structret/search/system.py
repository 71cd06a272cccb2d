"""Retrievers by name: a registered retriever (bm25), any backbone as a dense retriever, or
both fused (``bm25+minilm``, ``bm25+runs/x``: structret.search.fusion)."""

from __future__ import annotations

import copy
import difflib
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from structret.contracts import (Backbone, HasDtype, HasFingerprint, HasFormatDocument, HasMaxLength, HasNormalize,
                                 HasPooling, HasSettings)
from structret.errors import PluginError
from structret.models import TrainedModel, open_model, trained_model
from structret.registry import get_registry




class DenseRetriever:
    """A backbone used as a retriever: documents encoded once, scores are inner products."""

    def __init__(self, backbone: Backbone, *, batch_size: int = 32, show_progress: bool = True,
                 text_format: Any = None, cache: str | os.PathLike | None = None):
        self.backbone = backbone
        # where encoded vectors are kept between runs (structret.vector_cache); None: nowhere
        self.cache_root = cache
        self.caches: dict[str, Any] = {}  # kind -> VectorCache, made by fit()
        # how records become text (structret.linearization.TextFormat); None: record.text()
        self.text_format = text_format
        self.batch_size = batch_size
        self.show_progress = show_progress
        self.doc_vectors = None
        # protocols score the same queries more than once (full pool, then CSN batches)
        self._query_cache: dict[str, int] = {}
        self._query_vectors: list = []

    def format_document(self, record: Any) -> str:
        return self.text_format.document(record) if self.text_format is not None else record.text()

    def format_query(self, query: Any) -> str:
        return self.text_format.query(query) if self.text_format is not None else query.text

    def settings(self) -> str:
        """What changes this retriever's numbers, for the bench table's notes."""
        b = self.backbone
        parts = [f"model {b.name}"]
        if isinstance(b, HasMaxLength) and b.max_length:
            parts.append(f"max {b.max_length} tokens per query and document")
        if isinstance(b, HasPooling) and b.pooling:
            parts.append(f"{b.pooling} pooling")
        if isinstance(b, HasNormalize) and b.normalize is not None:
            parts.append("unit vectors" if b.normalize else "raw vectors")
        if isinstance(b, HasDtype):  # None is a value: fp32
            parts.append(f"{b.dtype or 'fp32'} encoding")
        if self.text_format is not None and self.text_format.name:
            parts.append(f"text format {self.text_format.name}")
        return ", ".join(parts)

    def fit(self, docs: Sequence[str]) -> None:
        self.caches = self._open_caches()
        self.doc_vectors = self._encode(list(docs), "document", self.show_progress)

    def _open_caches(self) -> dict[str, Any]:
        backbone = self.backbone
        if self.cache_root is None or not isinstance(backbone, HasFingerprint):
            return {}
        from structret.vector_cache import VectorCache, cache_key

        # taken now, once: the weights the documents are encoded with are the queries' too
        model = backbone.fingerprint()
        text_format = self.text_format.name if self.text_format is not None else ""
        return {kind: VectorCache(self.cache_root, cache_key(model, kind, text_format or ""))
                for kind in ("query", "document")}

    def _encode(self, texts: list[str], kind: str, show_progress: bool):
        def encode(new: list[str]):
            return self.backbone.encode(new, kind=kind, batch_size=self.batch_size, show_progress=show_progress)

        cache = self.caches.get(kind)
        return cache.encode(texts, encode) if cache is not None else encode(texts)

    def cache_summary(self) -> str | None:
        """What the vector cache saved this retriever, or None without one."""
        if not self.caches:
            return None
        return "; ".join(f"{kind}: {cache.summary()}" for kind, cache in self.caches.items())

    def encode_queries(self, queries: Sequence[str]):
        import numpy as np

        new = [q for q in dict.fromkeys(queries) if q not in self._query_cache]
        if new:
            vectors = self._encode(new, "query", self.show_progress and len(new) > self.batch_size)
            for text, vector in zip(new, vectors):
                self._query_cache[text] = len(self._query_vectors)
                self._query_vectors.append(vector)
        return np.stack([self._query_vectors[self._query_cache[q]] for q in queries])

    def score(self, queries: Sequence[str], doc_indices=None):
        if self.doc_vectors is None:
            raise RuntimeError("DenseRetriever.score called before fit()")
        docs = self.doc_vectors if doc_indices is None else self.doc_vectors[doc_indices]
        return self.encode_queries(queries) @ docs.T


class _TwoReadings(str):
    """A document as the dense side reads it (the string) and as the lexical side does (``lexical``)."""

    lexical: str

    def __new__(cls, dense: str, lexical: str) -> "_TwoReadings":
        made = super().__new__(cls, dense)
        made.lexical = lexical
        return made


class HybridRetriever:
    """A lexical retriever and a dense one fused per query (structret.search.fusion): both index the
    same documents, read as the dense side reads them (a run's text format, if it has one)."""

    def __init__(self, lexical: Any, dense: DenseRetriever, fusion: Any = None, *, name: str = "hybrid"):
        self.lexical, self.dense = lexical, dense
        self.fusion = decide_fusion(fusion)
        self.name = name
        # query text -> (lexical row, dense row) over every document; kept only while tuning,
        # which scores the same queries once per candidate fusion
        self._rows: dict[str, tuple[Any, Any]] | None = None

    def with_fusion(self, fusion: Any) -> "HybridRetriever":
        """This retriever fusing by ``fusion`` instead: a new one sharing both fitted sides (and the rows
        kept while tuning), so a choice among fusions costs no second fit."""
        other = copy.copy(self)
        other.fusion = decide_fusion(fusion)
        return other

    def tune(self, score: Callable[["HybridRetriever"], tuple[float, ...]], candidates: Any = None
             ) -> tuple["HybridRetriever", dict[str, float]]:
        """A new retriever under the candidate fusion that ``score`` (higher is better, compared as tuples)
        rates best (structret.search.fusion.tune; ``candidates`` None: its grid), and every candidate's score
        by spec. Each side scores a query once: the rows are kept while the candidates are scored (and
        from an earlier scoring, if ``remember_rows`` is on). This retriever's fusion is left as it was."""
        from structret.search.fusion import tune

        kept = self._rows
        self._rows = {} if kept is None else kept
        try:
            best, scores = tune(lambda fusion: score(self.with_fusion(fusion)), candidates)
        finally:
            self._rows = kept
        chosen = self.with_fusion(best)
        chosen._rows = None  # the rows are this dataset's; the chosen one is fitted on another next
        return chosen, scores

    def format_document(self, record: Any) -> str:
        text = self.dense.format_document(record)
        # a lexical side that reads records its own way (an item's aspects as fields) gets its
        # reading beside the dense one: the protocol hands fit() one text per document
        lexical = self.lexical
        return _TwoReadings(text, lexical.format_document(record)) if isinstance(lexical, HasFormatDocument) else text

    def format_query(self, query: Any) -> str:
        return self.dense.format_query(query)

    def settings(self) -> str:
        lexical = self.lexical.settings() if isinstance(self.lexical, HasSettings) else type(self.lexical).__name__
        return f"{self.fusion.describe()} ({self.fusion.spec}); lexical: {lexical}; dense: {self.dense.settings()}"

    def fit(self, docs: Sequence[str]) -> None:
        docs = list(docs)
        self.lexical.fit([getattr(d, "lexical", d) for d in docs])
        self.dense.fit([str(d) for d in docs])  # str() of a str subclass is the plain text
        self._rows = {} if self._rows is not None else None

    def encode_queries(self, queries: Sequence[str]):
        return self.dense.encode_queries(queries)

    def cache_summary(self) -> str | None:
        return self.dense.cache_summary()

    def remember_rows(self, on: bool = True) -> None:
        """Keep every query's full score rows (for scoring one set of queries under many
        fusions); memory: 8 bytes x queries x documents."""
        self._rows = {} if on else None

    def _side_rows(self, queries: Sequence[str], doc_indices):
        if self._rows is None:
            return self.lexical.score(queries, doc_indices), self.dense.score(queries, doc_indices)
        import numpy as np

        new = [q for q in dict.fromkeys(queries) if q not in self._rows]
        if new:
            for q, lex, dense in zip(new, self.lexical.score(new), self.dense.score(new)):
                self._rows[q] = (lex, dense)
        lex = np.stack([self._rows[q][0] for q in queries])
        dense = np.stack([self._rows[q][1] for q in queries])
        if doc_indices is not None:
            lex, dense = lex[:, doc_indices], dense[:, doc_indices]
        return lex, dense

    def score(self, queries: Sequence[str], doc_indices=None):
        from structret.search.fusion import fuse_scores

        lexical, dense = self._side_rows(queries, doc_indices)
        return fuse_scores(lexical, dense, self.fusion)


@dataclass(frozen=True)
class System:
    """A retrieval system as its name means it, resolved once (``resolve_system``): what it is (``kind``:
    ``retriever``, ``backbone``, ``run``, ``folder`` (a model folder) or ``hybrid``), its parts, and -- for a hybrid -- the fusion it
    uses, decided there (``decide_fusion``). ``retriever()`` builds it to score a dataset
    (structret.evaluation); an index is built and searched with the same fusion (structret.search.build)."""

    name: str
    kind: str
    lexical: str | None = None  # a retriever's name, or a hybrid's lexical side
    dense: "System | None" = None  # a hybrid's dense side: a backbone or a run
    run: TrainedModel | None = None  # a run's directory and backbone
    fusion: Any = None  # a hybrid's structret.search.fusion.Fusion; None otherwise

    @property
    def hybrid(self) -> bool:
        return self.kind == "hybrid"

    def with_fusion(self, fusion: Any) -> "System":
        """The same system fusing by ``fusion`` (a spec, a dict or a Fusion; None: the default rule)."""
        if not self.hybrid:
            raise PluginError(f"fusion settings are for a hybrid system (LEXICAL+DENSE, e.g. bm25+{self.name}), "
                              f"not '{self.name}'.")
        assert self.dense is not None
        return replace(self, fusion=decide_fusion(fusion, self.dense.run.recipe if self.dense.run else None))

    def retriever(self, *, model: str | None = None, show_progress: bool = True, batch_size: int = 32,
                  cache: str | os.PathLike | None = None, **options: Any):
        """The system built to score a dataset: the registered retriever, a DenseRetriever, or a
        HybridRetriever fusing by ``self.fusion``; ``options`` go to the backbone (a hybrid's dense side's)
        or to the retriever."""
        registry = get_registry()
        if self.hybrid:
            assert self.dense is not None and self.lexical is not None
            dense = self.dense.retriever(model=model, show_progress=show_progress, batch_size=batch_size,
                                         cache=cache, **options)
            return HybridRetriever(registry.create("retriever", self.lexical), dense, self.fusion, name=self.name)
        if self.kind == "retriever":
            return registry.create("retriever", self.name, **options)
        # a backbone name (with model= weights), a run or a model folder: the one route to a model, a run verified once
        if self.run is not None:
            opened = open_model(None, self.run, options)
        elif self.kind == "folder":
            opened = open_model(None, self.name, options)
        else:
            opened = open_model(self.name, model, options)
        return DenseRetriever(opened.backbone, batch_size=batch_size, show_progress=show_progress,
                              text_format=opened.text_format, cache=cache)


def _model_folder(name: str) -> bool:
    # what open_model reads without a backbone name: a saved model's folder (its config.json says which)
    folder = Path(name).expanduser()
    return folder.is_dir() and (folder / "config.json").is_file()


def resolve_system(name: str, fusion: Any = None) -> System:
    """What a system name means, without building it: a registered retriever (``bm25``), a backbone
    (``minilm``), a run of 'structret train' (``runs/x``) or ``LEXICAL+DENSE`` (``bm25+minilm``), which
    fuses by ``fusion`` (``decide_fusion``); unknown names, and ``fusion`` for what is not a hybrid, raise
    PluginError."""
    registry = get_registry()
    if registry.has("retriever", name):
        found = System(name, "retriever", lexical=name)
    elif registry.has("backbone", name):
        found = System(name, "backbone")
    elif (trained := trained_model(name)) is not None:  # a run directory or checkpoint: its backbone, its weights
        found = System(name, "run", run=trained)
    elif _model_folder(name):  # a model folder (a Hugging Face save, a static table): its config says the backbone
        found = System(name, "folder")
    else:
        lexical, plus, dense = name.partition("+")
        if not (plus and registry.has("retriever", lexical)):
            known = registry.names("retriever") + registry.names("backbone")
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise PluginError(
                f"unknown system '{name}': it is neither a retriever nor a backbone.{hint} "
                f"Known: {', '.join(sorted(known))}; a directory written by 'structret train' or a model folder also works, and "
                f"LEXICAL+DENSE (bm25+minilm) fuses two."
            )
        side = resolve_system(dense)
        if side.kind not in ("backbone", "run", "folder"):
            raise PluginError(f"system '{name}': a hybrid is LEXICAL+DENSE, and '{dense}' is not a dense system "
                              f"(a backbone such as minilm, or a directory written by 'structret train').")
        return System(name, "hybrid", lexical=lexical, dense=side).with_fusion(fusion)
    return found if fusion is None else found.with_fusion(fusion)


def decide_fusion(fusion: Any = None, recipe: Any = None, default: Any = None):
    """The one rule for which fusion a hybrid uses: ``fusion`` when given (a spec, a dict or a
    Fusion: structret.search.fusion.parse), else the one ``recipe`` (a trained run's) was shipped
    with (``Recipe.fusion``, chosen on validation), else ``default`` (an index of a source folder's:
    defaults.SOURCE_FUSION), else the default. Systems (resolve_system) and index builds (build_index)
    both decide here."""
    from structret.search.fusion import parse

    if fusion is None and recipe is not None:
        fusion = recipe.get("fusion") or None
    return parse(fusion if fusion is not None else default)


def make_retriever(name: str, *, model: str | None = None, show_progress: bool = True,
                   batch_size: int = 32, cache: str | os.PathLike | None = None, fusion: Any = None, **options: Any):
    """The system ``name`` built to score a dataset: ``resolve_system(name, fusion).retriever(...)``.
    ``bm25`` → the registered retriever; ``minilm`` (any backbone) → a DenseRetriever; ``bm25+minilm`` →
    a HybridRetriever. ``cache``: a directory where a dense retriever keeps its vectors between runs;
    ``options`` go to the backbone (of a hybrid's dense side too)."""
    return resolve_system(name, fusion).retriever(model=model, show_progress=show_progress, batch_size=batch_size,
                                                  cache=cache, **options)


def parse_fusion(spec: str) -> Any:
    """``"zscore:0.3"``, ``"rrf:0.5,k=60"``, ... as a ``structret.search.fusion.Fusion``; FusionError (a
    StructretError) saying what is wrong. Functions taking ``fusion=`` accept the string too."""
    return decide_fusion(spec)
