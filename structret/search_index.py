"""Search indexes as ``structret index`` writes them: vectors, ids, texts and the model that made them."""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from structret import defaults
from structret.artifacts import add_to_checksums, checksummed, read_meta, verified
from structret.contracts import Index, optional
from structret.datasets import dataset_split, require
from structret.errors import ArtifactError, StructretError
from structret.models import Model, open_model
from structret.records import Dataset
from structret.registry import get_registry

if TYPE_CHECKING:  # numpy comes with it: imported where an index is loaded
    from structret.indexing import SavedFiles


@dataclass(frozen=True)
class Hit:
    """One search result: the document id, its score (the index's metric, or the fused score of
    a hybrid index), its text (None when the index keeps no texts) and, in a hybrid index, which
    sides listed it (``("dense",)``, ``("lexical",)`` or both)."""

    id: str
    score: float
    text: str | None = None
    sources: tuple[str, ...] = ()


class SearchIndex:
    """An index plugin plus what searching it needs: the model whose vectors it holds (by
    name, loaded on first use) and the document texts."""

    def __init__(self, index: Index, *, meta: dict[str, Any] | None = None, texts: dict[str, str] | None = None,
                 model: Model | None = None, verify: bool = True, path: str | os.PathLike | None = None):
        self.index = index  # the plugin object
        # model, backbone, model_override: written to structret.json, read by 'structret search'
        self.meta = dict(meta or {})
        self.texts = texts  # id -> text, or None
        self._model = model
        self._verify = verify  # for a model loaded from the meta
        self.path = path  # where it was loaded from, for messages
        self.texts_note: str | None = None  # why no texts were loaded, a sentence for a warning
        # the lexical side of a hybrid index: a fitted retriever with search/save/load, the ids of
        # its documents by position, and how the two sides fuse (meta["lexical"] records both)
        self.lexical: Any = None
        self.lexical_ids: list[str] = []
        self._texts_origin: _TextsOrigin | None = None  # the texts files it was loaded with (load_index)

    @property
    def fusion(self):
        """How a hybrid index fuses its two sides (structret.fusion.Fusion); None without a lexical side."""
        from structret.fusion import parse  # numpy: kept out of import structret.api

        lexical = self.meta.get("lexical")
        return parse(lexical.get("fusion")) if lexical else None

    def add_lexical(self, name: str = defaults.LEXICAL, fusion: Any = None, **options: Any) -> None:
        """Index the kept texts with the registered retriever ``name`` too, and fuse it with the
        vectors in every search (structret.fusion; ``fusion``: a spec, a Fusion or None for the
        default). ``options`` go to the retriever."""
        from structret.fusion import parse  # numpy: kept out of import structret.api

        if not self.texts:
            raise StructretError("a lexical side indexes the documents' texts, and this index keeps none; build it "
                                 "from a dataset, or with texts=.")
        retriever = get_registry().create("retriever", name, **options)
        if not all(callable(optional("retriever", retriever, member)) for member in ("search", "save", "load")):
            raise StructretError(f"the retriever '{name}' cannot be an index's lexical side: it needs search(queries, "
                                 f"k), save(directory) and load(directory) (structret/contracts.py).")
        self.lexical_ids = list(self.texts)
        retriever.fit(list(self.texts.values()))
        self.lexical = retriever
        self.meta["lexical"] = {"retriever": name, "options": options, "fusion": parse(fusion).as_dict()}

    def set_fusion(self, fusion: Any) -> None:
        """Fuse the two sides by ``fusion`` from now on (saved with the index)."""
        from structret.fusion import parse  # numpy: kept out of import structret.api

        if self.lexical is None:
            raise StructretError("this index has no lexical side to fuse; add one with add_lexical('bm25').")
        self.meta["lexical"]["fusion"] = parse(fusion).as_dict()

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
        from structret.indexing import check_same_model  # numpy: kept out of import structret.api

        check_same_model(self.path or "(in memory)", self.meta.get("model"), model.name)

    def search(self, model: Model | str | Sequence[str], queries: str | Sequence[str] | None = None,
               k: int = 10) -> list[Hit] | list[list[Hit]]:
        """The top ``k`` hits for one query (a list of Hit) or for each of a list of queries.

        ``index.search(model, "q", k=5)``, or ``index.search("q", k=5)`` with the model that
        built the index. A model other than the index's raises ArtifactError: scores between
        different models mean nothing.
        """
        if not isinstance(model, Model):
            queries = model
            model = self.model
        else:
            self._check(model)
        if queries is None:
            raise StructretError("no queries: index.search(model, 'a query', k=10) or a list of queries.")
        from structret.indexing import check_k  # numpy: not at import time, see the module's top

        check_k(k)  # before the queries are encoded
        single = isinstance(queries, str)
        texts = [queries] if isinstance(queries, str) else list(queries)
        hits = self.search_vectors(model.encode_query(texts), k, texts=texts)
        return hits[0] if single else hits

    def search_vectors(self, vectors: Any, k: int = 10, *, texts: Sequence[str] | None = None) -> list[list[Hit]]:
        """The top ``k`` hits for each row of ``vectors`` (``[n, dim]``, encoded by the index's
        model): search without encoding, for callers that time or batch the encoding themselves.
        A hybrid index also needs the query ``texts`` (one per row) for its lexical side."""
        from structret.indexing import check_k  # numpy: kept out of import structret.api

        k = check_k(k)
        texts_by_id = self.texts or {}
        if self.lexical is None:
            scores, ids = self.index.search(vectors, k)
            return [[Hit(str(i), float(s), texts_by_id.get(i)) for s, i in zip(row_scores, row_ids)]
                    for row_scores, row_ids in zip(scores, ids)]
        from structret.fusion import fuse_lists  # numpy: kept out of import structret.api

        if texts is None or len(texts) != len(vectors):
            raise StructretError("this index is hybrid (a lexical side fused with the vectors): pass the query texts, "
                                 "one per vector: search_vectors(vectors, k, texts=[...]).")
        fusion = self.fusion
        depth = max(k, min(fusion.depth, len(self.index)))
        dense_scores, dense_ids = self.index.search(vectors, depth)
        lexical_scores, positions = self.lexical.search(list(texts), max(k, min(fusion.depth, len(self.lexical_ids))))
        found = []
        for d_scores, d_ids, l_scores, l_positions in zip(dense_scores, dense_ids, lexical_scores, positions):
            lexical_ids = [self.lexical_ids[p] for p in l_positions]
            fused = fuse_lists((lexical_ids, l_scores), ([str(i) for i in d_ids], d_scores), fusion, k)
            found.append([Hit(h.doc, h.score, texts_by_id.get(h.doc), h.sources) for h in fused])
        return found

    def save(self, path: str | os.PathLike) -> None:
        """Write the index, its ``structret.json`` and its texts, checksummed, as ``structret index`` does."""
        from structret.embeddings import write_texts  # numpy: kept out of import structret.api

        self.index.save(str(path), meta={key: self.meta.get(key) for key in _SAVED if key in self.meta}
                        | {"model": self.meta.get("model")})
        # the texts files it was loaded with linked and only the added texts written, else all of them
        if self.texts is not None and not self._save_added_texts(Path(path)) and self.texts:
            write_texts(path, list(self.texts), list(self.texts.values()))
        if self.lexical is not None:
            self._save_lexical(Path(path))

    def _save_added_texts(self, path: Path) -> bool:
        """Hard-link the texts files this index was loaded with and write only the texts added since, as one
        more file; False (write them all) if any was removed, or the files are not the ones loaded."""
        from structret.embeddings import write_texts  # numpy: kept out of import structret.api

        assert self.texts is not None  # save calls this only for an index with texts
        origin = self._texts_origin
        names = list(origin.files.identities) if origin is not None else []
        if origin is None or len(names) > _MAX_TEXT_FILES or not origin.files.unchanged():
            return False
        # origin.ids None: the saved texts were not read, and self.texts holds only the ones added since
        saved = len(origin.ids) if origin.ids is not None else 0
        if len(self.texts) < saved or not all(
                a is b or a == b for a, b in zip(itertools.islice(self.texts, saved), origin.ids or ())):
            return False
        for name in names:
            origin.files.link(name, path / name)
        added = list(itertools.islice(self.texts, saved, None))
        if added:
            write_texts(path, added, [self.texts[i] for i in added], segment=len(names))
        return True

    def _save_lexical(self, path: Path) -> None:
        directory = path / LEXICAL_DIR
        self.lexical.save(directory)
        (directory / LEXICAL_IDS).write_text(json.dumps(self.lexical_ids, ensure_ascii=False), encoding="utf-8")
        if checksummed(path, "structret.json"):  # sealed already (not inside atomic_dir): list the new files
            for file in sorted(p for p in directory.rglob("*") if p.is_file()):
                add_to_checksums(path, file.relative_to(path).as_posix())

    def _load_lexical(self, path: Path) -> None:
        """The lexical side ``meta["lexical"]`` names, from ``path/lexical`` (checked by the caller)."""
        name = self.meta["lexical"].get("retriever")
        factory = get_registry().get("retriever", name).load()
        load = optional("retriever", factory, "load")
        if not callable(load):
            raise ArtifactError(f"{path}: its lexical side is a '{name}' retriever, which cannot load a saved index.")
        directory = path / LEXICAL_DIR
        try:
            self.lexical = load(directory)
            self.lexical_ids = json.loads((directory / LEXICAL_IDS).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ArtifactError(f"{directory}: the index's lexical side cannot be read ({exc}); rebuild the index with "
                                f"'structret index ... --lexical {name}'.") from None
        if len(self.lexical_ids) != len(self.lexical):
            raise ArtifactError(f"{directory}: {len(self.lexical_ids)} ids for {len(self.lexical)} documents; the "
                                f"index is damaged, rebuild it.")


# what a SearchIndex keeps of its meta when saved (the index plugin writes the rest)
# texts files an index may have (its first, and one per update) before an update writes them as one again
_MAX_TEXT_FILES = 32


@dataclass
class _TextsOrigin:
    """The texts files an index was loaded with, and the ids they hold in order."""

    files: SavedFiles
    ids: list[str] | None  # None: not read (an update that only adds)


_SAVED = ("model", "backbone", "model_override", "embeddings", "updates", "lexical", "source")
LEXICAL_DIR = "lexical"
LEXICAL_IDS = "ids.json"


def _model_meta(model: Model | None) -> dict[str, Any]:
    if model is None:
        return {"model": None}
    return {"model": model.name, "backbone": model.backbone_name, "model_override": model.model}


def _new_index(kind: str, dim: int, metric: str, options: dict[str, Any]):
    return get_registry().create("index", kind, int(dim), metric=metric, **options)


def build_index(model: Model | None, data: Any = None, *, split: str | None = None, kind: str = defaults.INDEX,
                metric: str = "ip", batch_size: int = 32, show_progress: bool = True, ids: Sequence[str] | None = None,
                texts: Sequence[str] | None = None, vectors: Any = None, lexical: str | None = None,
                fusion: Any = None, **index_options: Any) -> SearchIndex:
    """A search index of ``data``'s documents encoded by ``model``.

    ``data``: a Dataset, a ``"FORMAT:PATH"`` spec (read with ``split``), or a ``[n, dim]``
    array of vectors with ``ids=`` (one per row) and optionally ``texts=``; vectors may also
    be passed as ``vectors=`` (then ``model`` may be None, and search needs a model).
    ``kind`` is a registered index (flat, hnsw, ...), ``index_options`` go to it.
    ``lexical="bm25"`` also indexes the texts with that retriever and fuses both sides in every
    search by ``fusion`` (structret.fusion: ``"zscore:0.2"``, a Fusion, or None for the default).
    """
    built = _build(model, data, split, kind, metric, batch_size, show_progress, ids, texts, vectors, index_options)
    if lexical is not None:
        built.add_lexical(lexical, fusion)
    elif fusion is not None:
        raise StructretError("fusion= is for a hybrid index; give lexical='bm25' too.")
    return built


def _build(model, data, split, kind, metric, batch_size, show_progress, ids, texts, vectors,
           index_options) -> SearchIndex:
    if vectors is None and data is not None and not isinstance(data, (str, Dataset)):
        data, vectors = None, data
    if vectors is not None:
        if data is not None:
            raise StructretError("build_index: give documents (a Dataset or FORMAT:PATH) or vectors, not both.")
        if ids is None:
            raise StructretError("build_index from vectors needs ids=, one per vector.")
        import numpy as np  # numpy: kept out of import structret.api

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
    dataset = documents_of(data, split)
    doc_ids = list(dataset.corpus)
    doc_texts = [model.text(r, "document") for r in dataset.corpus.values()]
    encoded = model.backbone.encode(doc_texts, kind="document", batch_size=batch_size, show_progress=show_progress)
    index = _new_index(kind, encoded.shape[1], metric, index_options)
    index.add(doc_ids, encoded)
    return SearchIndex(index, meta=_model_meta(model) | {"index": kind}, texts=dict(zip(doc_ids, doc_texts)),
                       model=model)


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
    from structret.embeddings import collect_parts, concatenate_texts  # numpy: kept out of import structret.api

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
    # numpy: kept out of import structret.api
    from structret.embeddings import read_index_texts, text_files
    from structret.indexing import SavedFiles, load_index as load_plugin_index

    with verified(path, verify=verify):  # checked once, though read three times
        meta = read_meta(path)
        index = load_plugin_index(path, verify=verify)
        kept, why_not = read_index_texts(path, verify=verify) if texts else ({}, None)
        loaded = SearchIndex(index, meta=meta, texts=kept or None, verify=verify, path=path)
        if kept:
            loaded._texts_origin = _TextsOrigin(SavedFiles.of(path, text_files(path)), list(kept))
        if meta.get("lexical"):
            loaded._load_lexical(Path(path))
    loaded.texts_note = why_not
    return loaded


def parse_fusion(spec: str) -> Any:
    """``"zscore:0.3"``, ``"rrf:0.5,k=60"``, ... as a ``structret.fusion.Fusion``; FusionError (a
    StructretError) saying what is wrong. Functions taking ``fusion=`` accept the string too."""
    from structret.fusion import parse  # numpy: kept out of import structret.api

    return parse(spec)
