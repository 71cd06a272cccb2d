"""Search indexes as ``structret index`` writes them: vectors, ids, texts and the model that made them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

from structret.api.models import Model, open_model
from structret.errors import StructretError
from structret.registry import get_registry


@dataclass(frozen=True)
class Hit:
    """One search result: the document id, its score under the index's metric, and its text
    (None when the index keeps no texts)."""

    id: str
    score: float
    text: str | None = None


class SearchIndex:
    """An index plugin plus what searching it needs: the model whose vectors it holds (by
    name, loaded on first use) and the document texts."""

    def __init__(self, index: Any, *, meta: dict[str, Any] | None = None, texts: dict[str, str] | None = None,
                 model: Model | None = None, verify: bool = True, path: str | os.PathLike | None = None):
        self.index = index  # the plugin object (structret.contracts.Index)
        # model, backbone, model_override: written to structret.json, read by 'structret search'
        self.meta = dict(meta or {})
        self.texts = texts  # id -> text, or None
        self._model = model
        self._verify = verify  # for a model loaded from the meta
        self.path = path  # where it was loaded from, for messages
        self.texts_note: str | None = None  # why no texts were loaded, a sentence for a warning

    @property
    def kind(self) -> str:
        return self.meta.get("index", "")

    def __len__(self) -> int:
        return len(self.index)

    @property
    def model(self) -> Model:
        """The model that built the index (loaded from its metadata on first use)."""
        if self._model is None:
            if not self.meta.get("backbone"):
                raise StructretError("this index records no backbone, so queries cannot be encoded; pass the "
                                     "model: index.search(model, queries), or build it with a model.")
            model = open_model(self.meta["backbone"], self.meta.get("model_override"), verify=self._verify)
            self._check(model)
            self._model = model
        return self._model

    def use(self, model: Model) -> None:
        """Search with ``model`` when none is passed, instead of loading the one the metadata
        names; ArtifactError if it is not the model that built the index."""
        self._check(model)
        self._model = model

    def _check(self, model: Model) -> None:
        from structret.indexing import check_same_model

        check_same_model(self.path or "(in memory)", self.meta.get("model"), model.name)

    def search(self, model: Model | str | Sequence[str], queries: str | Sequence[str] | None = None,
               k: int = 10) -> list[Hit] | list[list[Hit]]:
        """The top ``k`` hits for one query (a list of Hit) or for each of a list of queries.

        ``index.search(model, "q", k=5)``, or ``index.search("q", k=5)`` with the model that
        built the index. A model other than the index's raises ArtifactError: scores between
        different models mean nothing.
        """
        if not isinstance(model, Model):
            model, queries = self.model, model
        else:
            self._check(model)
        if queries is None:
            raise StructretError("no queries: index.search(model, 'a query', k=10) or a list of queries.")
        single = isinstance(queries, str)
        texts = [queries] if single else list(queries)
        hits = self.search_vectors(model.encode_query(texts), k)
        return hits[0] if single else hits

    def search_vectors(self, vectors: Any, k: int = 10) -> list[list[Hit]]:
        """The top ``k`` hits for each row of ``vectors`` (``[n, dim]``, encoded by the index's
        model): search without encoding, for callers that time or batch the encoding themselves."""
        scores, ids = self.index.search(vectors, k)
        texts_by_id = self.texts or {}
        return [[Hit(str(i), float(s), texts_by_id.get(i)) for s, i in zip(row_scores, row_ids)]
                for row_scores, row_ids in zip(scores, ids)]

    def save(self, path: str | os.PathLike) -> None:
        """Write the index, its ``structret.json`` and its texts, checksummed, as ``structret index`` does."""
        from structret.embeddings import write_texts

        self.index.save(str(path), meta={key: self.meta.get(key) for key in _SAVED if key in self.meta}
                        | {"model": self.meta.get("model")})
        if self.texts:
            write_texts(path, list(self.texts), list(self.texts.values()))


# what a SearchIndex keeps of its meta when saved (the index plugin writes the rest)
_SAVED = ("model", "backbone", "model_override", "embeddings", "updates")


def _model_meta(model: Model | None) -> dict[str, Any]:
    if model is None:
        return {"model": None}
    return {"model": model.name, "backbone": model.backbone_name, "model_override": model.model}


def _new_index(kind: str, dim: int, metric: str, options: dict[str, Any]):
    return get_registry().create("index", kind, int(dim), metric=metric, **options)


def build_index(model: Model | None, data: Any = None, *, split: str | None = None, kind: str = "flat",
                metric: str = "ip", batch_size: int = 32, show_progress: bool = True, ids: Sequence[str] | None = None,
                texts: Sequence[str] | None = None, vectors: Any = None, **index_options: Any) -> SearchIndex:
    """A search index of ``data``'s documents encoded by ``model``.

    ``data``: a Dataset, a ``"FORMAT:PATH"`` spec (read with ``split``), or a ``[n, dim]``
    array of vectors with ``ids=`` (one per row) and optionally ``texts=``; vectors may also
    be passed as ``vectors=`` (then ``model`` may be None, and search needs a model).
    ``kind`` is a registered index (flat, hnsw, ...), ``index_options`` go to it.
    """
    from structret.records import Dataset

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
        index = _new_index(kind, array.shape[1], metric, index_options)
        index.add(list(ids), array)
        kept = dict(zip(map(str, ids), texts)) if texts is not None else None
        return SearchIndex(index, meta=_model_meta(model) | {"index": kind}, texts=kept, model=model)
    if model is None:
        raise StructretError("build_index needs a model to encode the documents (structret.load_model(...)).")
    if ids is not None or texts is not None:
        raise StructretError("ids= and texts= go with vectors; a dataset brings its own.")
    dataset = _dataset(data, split)
    doc_ids = list(dataset.corpus)
    doc_texts = [model.text(r, "document") for r in dataset.corpus.values()]
    encoded = model.backbone.encode(doc_texts, kind="document", batch_size=batch_size, show_progress=show_progress)
    index = _new_index(kind, encoded.shape[1], metric, index_options)
    index.add(doc_ids, encoded)
    return SearchIndex(index, meta=_model_meta(model) | {"index": kind}, texts=dict(zip(doc_ids, doc_texts)),
                       model=model)


def _dataset(data: Any, split: str | None):
    """A Dataset with documents: ``data`` (read again for another ``split``), or read from a spec."""
    from structret.api.datasets import dataset_split
    from structret.data import require

    if data is None:
        raise StructretError("build_index: no documents; give a Dataset, a FORMAT:PATH spec or vectors with ids=.")
    dataset = dataset_split(data, split)
    # an empty index would answer every search with nothing
    require(dataset, "documents", spec=data if isinstance(data, str) else "", split=split)
    return dataset


def index_embeddings(paths: Sequence[str | os.PathLike], out: str | os.PathLike, *, kind: str = "flat",
                     metric: str = "ip", verify: bool = True, **index_options: Any) -> tuple[int, int]:
    """Index the output of ``structret encode`` (one folder, or every shard of one corpus, in
    order) into ``out``, with the texts; return (vectors, parts). Shards are read one at a time,
    so the corpus need not fit in memory twice."""
    from structret.embeddings import collect_parts, concatenate_texts

    parts = collect_parts(paths, verify=verify)
    meta = parts[0].meta
    index = _new_index(kind, int(meta["dim"]), metric, index_options)
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


def load_index(path: str | os.PathLike, *, verify: bool = True, texts: bool = True) -> SearchIndex:
    """An index written by ``structret index`` or ``SearchIndex.save``, checked against its
    checksums.json (``verify=False``: used anyway, with a warning). Its model is loaded on
    the first search without one. ``texts=False`` skips reading the texts."""
    from structret.artifacts import read_meta, verified
    from structret.embeddings import read_index_texts
    from structret.indexing import load_index as load_plugin_index

    with verified(path, verify=verify):  # checked once, though read three times
        meta = read_meta(path)
        index = load_plugin_index(path, verify=verify)
        kept, why_not = read_index_texts(path, verify=verify) if texts else ({}, None)
    loaded = SearchIndex(index, meta=meta, texts=kept or None, verify=verify, path=path)
    loaded.texts_note = why_not
    return loaded


@dataclass(frozen=True)
class UpdateResult:
    """What ``update_index`` did: vectors added and removed, and how many the index holds now."""

    added: int
    removed: int
    count: int


def update_index(path: str | os.PathLike, *, add: str | os.PathLike | None = None, remove: Sequence[str] = (),
                 split: str | None = None, batch_size: int = 32, verify: bool = True,
                 show_progress: bool = True) -> UpdateResult:
    """Remove ids from, then add documents to, the index saved at ``path``, atomically.

    ``add``: the output folder of ``structret encode`` (vectors made by the index's model), or a
    ``FORMAT:PATH`` dataset spec (read with ``split``) whose documents the index's recorded model
    encodes. ``remove``: ids the index holds; removing and adding the same id replaces its
    document. Removing needs an index kind with ``remove`` (flat, usearch). The updated index,
    texts and checksums are written beside the old one and swapped in with one rename, so an
    interrupted update leaves the previous index whole; two updates of one index at once keep
    only the last one's changes.
    """
    remove = [str(i) for i in remove]
    if add is None and not remove:
        raise StructretError("update_index: nothing to do; give add= (an encode folder or FORMAT:PATH), remove= "
                             "ids, or both.")
    found = load_index(path, verify=verify)
    try:
        _update(found, path, add, remove, split, batch_size, verify, show_progress)
    finally:
        close = getattr(found.index, "close", None)
        if close is not None:
            close()
    last = found.meta["updates"][-1]
    return UpdateResult(last["added"], last["removed"], len(found))


def _update(found: SearchIndex, path, add, remove, split, batch_size, verify, show_progress) -> None:
    from structret.artifacts import atomic_dir
    from structret.contracts import optional
    from structret.indexing import IndexInputError

    if remove and optional("index", found.index, "remove") is None:
        raise StructretError(
            f"the index at {path} is a {found.kind!r} index, which cannot remove ids; rebuild it with an index "
            f"that can (flat, usearch; 'structret plugins --kind index'), or rebuild it without those documents."
        )
    ids, vectors, texts = _to_add(found, path, add, split, batch_size, verify, show_progress) if add is not None \
        else ([], None, None)
    if remove:
        found.index.remove(remove)  # checks every id first: an unknown one raises and changes nothing
        if found.texts is not None:
            for i in remove:
                found.texts.pop(i, None)
    if ids:
        try:
            found.index.add(ids, vectors)
        except IndexInputError as exc:
            raise IndexInputError(f"{add}: {exc} To replace a document, also --remove its id.") from None
        if found.texts is not None and texts is not None:
            found.texts.update(zip(ids, texts))
    update = {"added": len(ids), "removed": len(remove), "source": str(add) if add is not None else None}
    found.meta["updates"] = [*(found.meta.get("updates") or []), update]
    with atomic_dir(path) as staged:  # the old index stays in place until the new one is whole
        found.save(staged)


def _to_add(found: SearchIndex, path, add, split, batch_size, verify, show_progress):
    """(ids, vectors, texts or None) of what ``add`` names, made by the index's model."""
    from structret.artifacts import META_FILE
    from structret.indexing import check_same_model

    if os.path.isdir(add) and (os.path.isfile(os.path.join(add, META_FILE))
                               or any(name.startswith("shard-") for name in os.listdir(add))):
        import numpy as np

        from structret.embeddings import collect_parts, read_index_texts

        parts = collect_parts([add], verify=verify)
        check_same_model(path, found.meta.get("model"), parts[0].meta.get("model"))
        ids = [i for part in parts for i in part.ids()]
        vectors = np.concatenate([np.asarray(part.vectors()) for part in parts])
        by_id = {i: t for part in parts for i, t in read_index_texts(part.path, verify=verify)[0].items()}
        return ids, vectors, [by_id.get(i) for i in ids] if by_id else None
    if isinstance(add, os.PathLike) or ":" not in str(add):
        raise StructretError(f"cannot add {add}: give the output folder of 'structret encode' or a FORMAT:PATH "
                             f"dataset spec (e.g. codesearchnet:new.jsonl.gz).")
    model = found.model  # the index's own model, checked against its metadata
    dataset = _dataset(str(add), split)
    ids = list(dataset.corpus)
    texts = [model.text(r, "document") for r in dataset.corpus.values()]
    vectors = model.backbone.encode(texts, kind="document", batch_size=batch_size, show_progress=show_progress)
    return ids, vectors, texts
