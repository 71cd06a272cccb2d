"""Building a search index: documents (a dataset, or vectors with ids and texts) encoded by a model
into an index plugin, with a lexical side if asked; ``structret encode``'s output indexed."""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

from structret import defaults
from structret.contracts import HasFormatDocument
from structret.datasets import dataset_split, require
from structret.errors import StructretError
from structret.linearization import TextFormat
from structret.models import Model
from structret.records import Dataset
from structret.registry import get_registry
from structret.search.index import SearchIndex
from structret.search.system import decide_fusion


def _model_meta(model: Model | None) -> dict[str, Any]:
    if model is None:
        return {"model": None}
    return {"model": model.name, "backbone": model.backbone_name, "model_override": model.model}


def choose_index(kind: str, count: int, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """The index to build for ``count`` vectors and its options: ``kind`` as given, or for ``"auto"``
    exact search below ``defaults.ANN_FROM`` vectors and the measured graph from there (defaults.py)."""
    if kind != defaults.AUTO:
        return kind, dict(options or {})
    if options:
        raise StructretError(f"index options ({', '.join(sorted(options))}) go with a named index, e.g. "
                             f"--index {defaults.ANN_INDEX} --index-option ef=300; --index {defaults.AUTO} picks "
                             f"{defaults.EXACT_INDEX} or {defaults.ANN_INDEX} with its own.")
    if count < defaults.ANN_FROM:
        return defaults.EXACT_INDEX, {}
    return defaults.ANN_INDEX, dict(defaults.ANN_OPTIONS)


def _new_index(kind: str, count: int, dim: int, metric: str, options: dict[str, Any]) -> tuple[Any, str]:
    """A new, empty index for ``count`` vectors of ``dim``, and the name of the plugin it is."""
    name, options = choose_index(kind, count, options)
    return get_registry().create("index", name, int(dim), metric=metric, **options), name


def build_index(model: Model | None, data: Any = None, *, split: str | None = None, kind: str = defaults.INDEX,
                metric: str = "ip", batch_size: int = 32, show_progress: bool = True, ids: Sequence[str] | None = None,
                texts: Sequence[str] | None = None, vectors: Any = None, lexical: str | None = None,
                fusion: Any = None, readings: Sequence[str] | None = None, default_fusion: Any = None,
                **index_options: Any) -> SearchIndex:
    """A search index of ``data``'s documents encoded by ``model``.

    ``data``: a Dataset, a ``"FORMAT:PATH"`` spec (read with ``split``), or a ``[n, dim]``
    array of vectors with ``ids=`` (one per row) and optionally ``texts=``; vectors may also
    be passed as ``vectors=`` (then ``model`` may be None, and search needs a model).
    ``kind`` is a registered index (flat, hnsw, ...), ``index_options`` go to it; ``"auto"`` picks
    one by the number of documents (``choose_index``).
    ``model`` None with a dataset and ``lexical=``: a lexical index, no vectors (searched by the lexical
    side alone; loading and searching it needs no model, so no torch).
    ``lexical="bm25"`` also indexes the texts with that retriever and fuses both sides in every
    search by ``fusion`` (structret.search.fusion: ``"zscore:0.2"``, a Fusion, or None: the fusion the model's
    recipe was shipped with, ``Recipe.fusion``, else ``default_fusion``, else the default).
    A lexical retriever that reads records its own way (``format_document``: bm25-fields reads a
    function with its file and class) reads a dataset's records so; with vectors, ``readings=``
    gives those readings (one per id; ``lexical_reader``), else it reads the texts.
    """
    # the lexical retriever made once: it reads the records here and becomes the index's lexical side
    retriever = get_registry().create("retriever", lexical) if lexical is not None else None
    reader = _reader(retriever)
    built = _build(model, data, split, kind, metric, batch_size, show_progress, ids, texts, vectors, index_options,
                   reader, lexical)
    if readings is not None:
        if lexical is None or reader is None:
            raise StructretError(f"readings= are how a lexical side that reads records its own way (format_document) "
                                 f"reads each document; {'give lexical= too' if lexical is None else repr(lexical) + ' reads texts'}.")
        if isinstance(data, (str, Dataset)):
            raise StructretError("readings= go with vectors and ids; a dataset's records are read by the lexical side.")
        if len(readings) != len(built.texts or ()):
            raise StructretError(f"got {len(readings)} readings for {len(built.texts or ())} texts; give one per id.")
        built.readings = dict(zip(built.texts or {}, readings))
    if lexical is not None:
        if built.index is None and fusion is not None:
            raise StructretError("fusion= says how vectors and a lexical side fuse; a lexical index (no model) "
                                 "has only the lexical side.")
        built.add_lexical(lexical, decide_fusion(fusion, model.recipe if model is not None else None, default_fusion),
                          retriever=retriever)
    elif fusion is not None:
        raise StructretError("fusion= is for a hybrid index; give lexical='bm25' too.")
    return built


def lexical_reader(lexical: Any) -> Callable[[Any], str] | None:
    """How a lexical retriever (a registered name, or one made already: an index's ``lexical.retriever``)
    reads a record (its ``format_document``), or None when it reads documents' texts."""
    return _reader(get_registry().create("retriever", lexical) if isinstance(lexical, str) else lexical)


def _reader(retriever: Any) -> Callable[[Any], str] | None:
    return retriever.format_document if isinstance(retriever, HasFormatDocument) else None


def _build(model, data, split, kind, metric, batch_size, show_progress, ids, texts, vectors,
           index_options, reader=None, lexical=None) -> SearchIndex:
    if vectors is None and data is not None and not isinstance(data, (str, Dataset)):
        data, vectors = None, data
    if vectors is not None:
        if data is not None:
            raise StructretError("build_index: give documents (a Dataset or FORMAT:PATH) or vectors, not both.")
        if ids is None:
            raise StructretError("build_index from vectors needs ids=, one per vector.")
        import numpy as np

        array = np.asarray(vectors)
        if array.ndim != 2:
            raise StructretError(f"vectors must be a 2-d array [n, dim], got shape {array.shape}.")
        if texts is not None and len(texts) != len(ids):
            raise StructretError(f"got {len(texts)} texts for {len(ids)} ids; give one text per id, or none.")
        index, name = _new_index(kind, array.shape[0], array.shape[1], metric, index_options)
        index.add(list(ids), array)
        kept = dict(zip(map(str, ids), texts)) if texts is not None else None
        return SearchIndex(index, meta=_model_meta(model) | {"index": name}, texts=kept, model=model)
    if model is None and not lexical:
        raise StructretError("build_index needs a model to encode the documents (structret.load_model(...)), "
                             "or lexical='bm25' without one for a lexical index.")
    if model is None and data is None and ids is not None and texts is not None:  # a lexical index of texts
        if len(texts) != len(ids):
            raise StructretError(f"got {len(texts)} texts for {len(ids)} ids; give one text per id.")
        return SearchIndex(None, meta=_model_meta(None) | {"index": None}, texts=dict(zip(map(str, ids), texts)))
    if ids is not None or texts is not None:
        raise StructretError("ids= and texts= go with vectors; a dataset brings its own.")
    dataset = documents_of(data, split)
    if model is None:  # a lexical index: the texts (and the lexical side's readings), nothing encoded
        kept = {i: TextFormat().document(r) for i, r in dataset.corpus.items()}
        built = SearchIndex(None, meta=_model_meta(None) | {"index": None}, texts=kept)
        if reader is not None:
            built.readings = {i: reader(r) for i, r in dataset.corpus.items()}
        return built
    doc_ids = list(dataset.corpus)
    doc_texts = [model.text(r, "document") for r in dataset.corpus.values()]
    encoded = model.backbone.encode(doc_texts, kind="document", batch_size=batch_size, show_progress=show_progress)
    index, name = _new_index(kind, encoded.shape[0], encoded.shape[1], metric, index_options)
    index.add(doc_ids, encoded)
    built = SearchIndex(index, meta=_model_meta(model) | {"index": name}, texts=dict(zip(doc_ids, doc_texts)),
                        model=model)
    if reader is not None:
        built.readings = {i: reader(r) for i, r in dataset.corpus.items()}
    return built


def documents_of(data: Any, split: str | None):
    """A Dataset with documents: ``data`` (read again for another ``split``), or read from a spec."""
    if data is None:
        raise StructretError("build_index: no documents; give a Dataset, a FORMAT:PATH spec or vectors with ids=.")
    dataset = dataset_split(data, split)
    # an empty index would answer every search with nothing
    require(dataset, "documents", spec=data if isinstance(data, str) else "", split=split)
    return dataset


def index_embeddings(paths: Sequence[str | os.PathLike], out: str | os.PathLike, *, kind: str = defaults.INDEX,
                     metric: str = "ip", verify: bool = True, **index_options: Any) -> tuple[int, int]:
    """Index the output of ``structret encode`` (one folder, or every shard of one corpus, in
    order) into ``out``, with the texts; return (vectors, parts). Shards are read one at a time,
    so the corpus need not fit in memory twice."""
    from structret.embeddings import collect_parts
    from structret.search.texts import concatenate_texts

    parts = collect_parts(paths, verify=verify)
    meta = parts[0].meta
    index, _ = _new_index(kind, sum(int(p.meta["count"]) for p in parts), int(meta["dim"]), metric, index_options)
    count = 0
    for part in parts:
        ids = part.ids()
        index.add(ids, part.vectors())
        count += len(ids)
    # "embeddings": what a rebuild starts from, for the messages about a damaged index
    index.save(str(out), meta={"model": meta["model"], "backbone": meta["backbone"],
                               "model_override": meta.get("model_override"), "embeddings": [str(p) for p in paths]})
    # the texts travel with the index (listed in its checksums) so a search can show what it found
    concatenate_texts(parts, out)
    return count, len(parts)
