"""Search indexes as ``structret index`` writes them: vectors, ids, texts and the model that made them.

Over 400 lines because a SearchIndex is one object a search asks everything of: its two sides, its
texts, its ranking and its saved form; each part's own logic lives elsewhere (structret.search.lexical,
.fusion, .ranking, .texts)."""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import json
import zlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from structret import defaults
from structret.artifacts import (add_to_checksums, atomic_dir, checksummed, read_meta, rebuild_hint, verified,
                                 write_meta)
from structret.contracts import HasFormatDocument, Index
from structret.errors import ArtifactError, StructretError
from structret.models import Model, open_model
from structret.registry import get_registry
from structret.search.lexical import LexicalSide, load_side, new_side
from structret.search.ranking import Ranking, UnitView, is_symbol, rerank
from structret.search.system import decide_fusion

if TYPE_CHECKING:  # numpy comes with it: imported where an index is loaded
    from structret.search.saved import SavedFiles


@dataclass(frozen=True)
class Hit:
    """One search result: the document id, its score (the index's metric, or the fused score of
    a hybrid index), its text (None when the index keeps no texts) and, in a hybrid index, which
    sides listed it (``("dense",)``, ``("lexical",)`` or both)."""

    id: str
    score: float
    text: str | None = None
    sources: tuple[str, ...] = ()
    why: tuple[str, ...] = ()  # what the ranking's rules did to it (structret.search.ranking), in order


class SearchIndex:
    """An index plugin plus what searching it needs: the model whose vectors it holds (by
    name, loaded on first use) and the document texts. ``index`` None: a lexical index, no vectors
    (``build_index(None, data, lexical="bm25")``): searched by its lexical side alone, with no model."""

    def __init__(self, index: Index | None, *, meta: dict[str, Any] | None = None, texts: Mapping[str, str] | None = None,
                 model: Model | None = None, verify: bool = True, path: str | os.PathLike | None = None):
        self.index = index  # the plugin object
        # model, backbone, model_override: written to structret.json, read by 'structret search'
        self.meta = dict(meta or {})
        # id -> text, or None; a loaded index's is a stored_texts.TextStore (read-only, read on demand)
        self.texts = texts
        self._model = model
        self._verify = verify  # for a model loaded from the meta
        self.path = path  # where it was loaded from, for messages
        self.texts_note: str | None = None  # why no texts were loaded, a sentence for a warning
        # the lexical side of a hybrid index (structret.search.lexical: its retriever and the ids of its
        # documents by position); meta["lexical"] records it and how the two sides fuse
        self.lexical: LexicalSide | None = None
        # id -> the lexical side's own reading of a document (its format_document: a function with its
        # file and class), where it reads records its own way; None: it reads the texts. Needed only to
        # fit the lexical side (a build, an update), so a loaded index reads them on first need.
        self.readings: dict[str, str] | None = None
        self._readings_file: Path | None = None
        self._texts_origin: _TextsOrigin | None = None  # the texts files it was loaded with (load_index)
        self._units: UnitView | None = None  # what the ranking reads (units()), made on first need

    @property
    def fusion(self):
        """How a hybrid index fuses its two sides (structret.search.fusion.Fusion); None without a lexical side."""
        lexical = self.meta.get("lexical")
        return decide_fusion(lexical.get("fusion")) if lexical and self.index is not None else None

    def add_lexical(self, name: str = defaults.LEXICAL, fusion: Any = None, *, retriever: Any = None,
                    **options: Any) -> None:
        """Index the kept texts with the registered retriever ``name`` too, and fuse it with the
        vectors in every search (structret.search.fusion; ``fusion``: a spec, a Fusion or None for the
        default). ``options`` go to the retriever; ``retriever``: the retriever ``name`` made with them already
        (build_index makes one to read the records), used instead of another.

        An index plugin that holds a BM25 of its own (``set_texts`` and ``search_lexical``, such as
        milvus) is given the retriever's fields of every document instead (``fields``: each field's
        terms and weight) and searches them; the retriever then only reads the queries (``terms``).
        Both sides' candidates are fused here, as with a lexical side of structret's own."""
        if not self.texts:
            raise StructretError("a lexical side indexes the documents' texts, and this index keeps none; build it "
                                 "from a dataset, or with texts=.")
        side = new_side(self.index, name, options, self.kind, retriever=retriever)
        readings = self.load_readings() or {}  # matched to the saved lexical_ids first: they are about to change
        if self.meta.get("lexical") and self.meta["lexical"].get("retriever") != name:
            readings = {}  # another retriever's reading of a record is not this one's
        if readings and not isinstance(side.retriever, HasFormatDocument):
            readings = {}  # a retriever that reads texts: the readings of another's would be read as text
        self.readings = readings or None
        pairs = list(self.texts.items())  # one pass: a loaded index's texts are read from disk
        # a document added without a record (from vectors and texts) reads as its text
        side.fit([i for i, _ in pairs], [readings.get(i, text) for i, text in pairs])
        self.lexical = side
        self.meta["lexical"] = {"retriever": name, "options": options, "fusion": decide_fusion(fusion).as_dict(),
                                **side.meta()}

    def update_lexical(self, added: Iterable[str]) -> bool:
        """Bring the lexical side up to date with the kept texts after an update that ``added`` these ids (and
        removed others), reading only the added documents, where the retriever can (``update``); False where
        it cannot: refit it then (``add_lexical``). The order of documents is add_lexical's: the texts'."""
        if self.lexical is None or not self.texts:
            return False
        added = set(added)
        position = {i: p for p, i in enumerate(self.lexical.ids)}
        readings = self.readings or {}
        order = list(self.texts)
        if any(i not in position and i not in added for i in order):
            return False  # a document neither kept nor added: not an update of this side
        return self.lexical.update(order, [position[i] if i not in added else readings.get(i, self.texts[i])
                                           for i in order])

    @property
    def lexical_ids(self) -> list[str]:
        """The lexical side's documents by position ([] without one)."""
        return self.lexical.ids if self.lexical is not None else []

    def load_readings(self) -> dict[str, str] | None:
        """The lexical side's readings of the documents (``readings``), read from the saved index on first need."""
        if self.readings is None and self._readings_file is not None:
            try:
                with gzip.open(self._readings_file, "rt", encoding="utf-8") as rows:
                    read = [json.loads(row) for row in rows]
            except (OSError, EOFError, ValueError, zlib.error) as exc:
                raise ArtifactError(f"{self._readings_file}: the lexical side's readings cannot be read ({exc}); "
                                    f"rebuild the index: {rebuild_hint(self._readings_file.parent.parent)}.") from None
            if len(read) != len(self.lexical_ids):
                raise ArtifactError(f"{self._readings_file}: {len(read)} readings for {len(self.lexical_ids)} documents; "
                                    f"the index is damaged. Rebuild it: {rebuild_hint(self._readings_file.parent.parent)}.")
            self.readings = dict(zip(self.lexical_ids, read))
            self._readings_file = None
        return self.readings

    @property
    def ranking(self) -> Ranking:
        """The rules every search applies after fusion (structret.search.ranking; all off unless set)."""
        return Ranking.of(self.meta.get("ranking"))

    def set_ranking(self, ranking: Any) -> None:
        """Apply ``ranking`` (a Ranking, a dict or a ``"definition=1,penalty=0.3"`` spec) from now on (saved
        with the index)."""
        self.meta["ranking"] = Ranking.of(ranking).as_dict()
        self._units = None

    def units(self) -> UnitView:
        """What the ranking reads of the documents: each one's file, name (the lexical side's reading of a
        record, where it reads names) and text."""
        if self._units is None:
            texts = self.texts or {}
            self._units = UnitView.of(self.lexical_ids or list(texts), str((self.meta.get("source") or {}).get("path")
                                                                           or ""), self.load_readings() or {}, texts)
        return self._units

    def set_fusion(self, fusion: Any) -> None:
        """Fuse the two sides by ``fusion`` from now on (saved with the index)."""
        if self.lexical is None:
            raise StructretError("this index has no lexical side to fuse; add one with add_lexical('bm25').")
        self.meta["lexical"]["fusion"] = decide_fusion(fusion).as_dict()

    @property
    def kind(self) -> str:
        return self.meta.get("index", "")

    def __len__(self) -> int:
        if self.index is None:
            return len(self.lexical) if self.lexical is not None else len(self.texts or ())
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
        from structret.search.saved import check_same_model

        check_same_model(self.path or "(in memory)", self.meta.get("model"), model.name)

    def search(self, model: Model | str | Sequence[str], queries: str | Sequence[str] | None = None,
               k: int = 10) -> list[Hit] | list[list[Hit]]:
        """The top ``k`` hits for one query (a list of Hit) or for each of a list of queries.

        ``index.search(model, "q", k=5)``, or ``index.search("q", k=5)`` with the model that
        built the index. A model other than the index's raises ArtifactError: scores between
        different models mean nothing.
        """
        encoder: Model | None
        if not isinstance(model, Model):
            queries = model
            encoder = self.model if self.index is not None else None
        else:
            encoder = model
            if self.index is not None:
                self._check(model)
        if queries is None:
            raise StructretError("no queries: index.search(model, 'a query', k=10) or a list of queries.")
        from structret.search.saved import check_k

        check_k(k)  # before the queries are encoded
        single = isinstance(queries, str)
        texts = [queries] if isinstance(queries, str) else list(queries)
        if encoder is None:  # a lexical index: no vectors, no model
            hits = self._search_lexical(texts, k)
        else:
            hits = self.search_vectors(encoder.encode_query(texts), k, texts=texts)
        return hits[0] if single else hits

    def _search_lexical(self, texts: Sequence[str], k: int) -> list[list[Hit]]:
        """A lexical index's top ``k`` for each query text (the ranking's rules applied)."""
        if self.lexical is None:
            raise ArtifactError(f"{self.path or 'this index'} holds neither vectors nor a lexical side; rebuild it.")
        ranking = self.ranking
        width = min(max(k, ranking.depth) if ranking.active else k, len(self.lexical))
        found: list[list[tuple[str, float, tuple[str, ...]]]] = [
            [(i, float(s), ("lexical",)) for i, s in zip(ids[:width], scores)]  # a side may list more than asked
                 for ids, scores in self.lexical.search(texts, width)]
        return self._ranked(texts, found, ranking, k)

    def _ranked(self, texts: Sequence[str], found: list[list[tuple[str, float, tuple[str, ...]]]], ranking: Ranking,
                k: int) -> list[list[Hit]]:
        """Each query's candidates ``(id, score, sources)`` as its top ``k`` hits, through the ranking's rules."""
        texts_by_id = self.texts or {}
        if not ranking.active:
            return [[Hit(i, s, texts_by_id.get(i), src) for i, s, src in hits[:k]] for hits in found]
        units = self.units()
        return [[Hit(h.id, h.score, texts_by_id.get(h.id), h.sources, h.why)
                 for h in rerank(query, hits, ranking, units, k)] for query, hits in zip(texts, found)]

    def search_vectors(self, vectors: Any, k: int = 10, *, texts: Sequence[str] | None = None) -> list[list[Hit]]:
        """The top ``k`` hits for each row of ``vectors`` (``[n, dim]``, encoded by the index's
        model): search without encoding, for callers that time or batch the encoding themselves.
        A hybrid index also needs the query ``texts`` (one per row) for its lexical side."""
        from structret.search.saved import check_k

        k = check_k(k)
        texts_by_id = self.texts or {}
        if self.index is None:
            raise StructretError("this index is lexical (no vectors): search it with the query texts, "
                                 "index.search(['a query'], k).")
        if self.lexical is None:
            scores, ids = self.index.search(vectors, k)
            return [[Hit(str(i), float(s), texts_by_id.get(i)) for s, i in zip(row_scores, row_ids)]
                    for row_scores, row_ids in zip(scores, ids)]
        if texts is None or len(texts) != len(vectors):
            raise StructretError("this index is hybrid (a lexical side fused with the vectors): pass the query texts, "
                                 "one per vector: search_vectors(vectors, k, texts=[...]).")
        fusion = self.fusion
        ranking = self.ranking
        width = max(k, ranking.depth) if ranking.active else k
        found = []
        for query, pair in zip(texts, self.candidates(vectors, texts, fusion.depth, k=width)):
            # a symbol is found by its letters: fused with its own lexical weight where the ranking says so
            chosen = fusion if ranking.symbol_weight is None or not is_symbol(query) else \
                dataclasses.replace(fusion, weight=ranking.symbol_weight)
            found.append([(h.doc, h.score, h.sources) for h in fuse_candidates([pair], chosen, width)[0]])
        return self._ranked(texts, found, ranking, k)

    def candidates(self, vectors: Any, texts: Sequence[str], depth: int, *, k: int = 1,
                   ) -> list[tuple[tuple[list[str], Any], tuple[list[str], Any]]]:
        """Each query's ``(lexical, dense)`` candidates, each ``(ids, scores)`` best first, ``depth`` (at least
        ``k``) a side: the one route to both sides (a lexical side held by the index plugin too), for
        search_vectors and for callers that fuse the same lists many ways (the whole-project benchmark)."""
        if self.lexical is None or self.index is None:
            raise StructretError("candidates come from both sides of a hybrid index; this one has "
                                 f"{'no lexical side' if self.lexical is None else 'no vectors'}.")
        dense_scores, dense_ids = self.index.search(vectors, max(k, min(depth, len(self.index))))
        lexical = self.lexical.search(texts, max(k, min(depth, len(self.lexical.ids))))
        return [(lexical_side, ([str(i) for i in d_ids], d_scores))
                for lexical_side, d_scores, d_ids in zip(lexical, dense_scores, dense_ids)]

    def save(self, path: str | os.PathLike) -> None:
        """Write the index, its ``structret.json`` and its texts, checksummed, as ``structret index`` does."""
        from structret.search.texts import write_texts

        meta = {key: self.meta.get(key) for key in _SAVED if key in self.meta} | {"model": self.meta.get("model")}
        if self.index is None:  # a lexical index: its structret.json, texts and lexical side, sealed at once
            from structret.search.saved import FORMAT

            with atomic_dir(path) as tmp:
                write_meta(tmp, meta | {"index": None, "format": FORMAT, "count": len(self)})
                pairs = list((self.texts or {}).items())
                write_texts(tmp, [i for i, _ in pairs], [t for _, t in pairs])
                if self.lexical is not None:
                    self._save_lexical(tmp)
            return
        self.index.save(str(path), meta=meta)
        # the texts files it was loaded with linked and only the added texts written, else all of them
        if self.texts is not None and not self._save_added_texts(Path(path)) and self.texts:
            pairs = list(self.texts.items())  # one pass: a loaded index's texts are read from disk
            write_texts(path, [i for i, _ in pairs], [t for _, t in pairs])
        if self.lexical is not None:
            self._save_lexical(Path(path))

    def _save_added_texts(self, path: Path) -> bool:
        """Hard-link the texts files this index was loaded with and write only the texts added since, as one
        more file; False (write them all) if any was removed, or the files are not the ones loaded."""
        from structret.search.texts import TextStore, write_texts

        assert self.texts is not None  # save calls this only for an index with texts
        origin = self._texts_origin
        names = list(origin.files.identities) if origin is not None else []
        segments = sum(name.endswith(".jsonl.gz") for name in names)
        if origin is None or segments > _MAX_TEXT_FILES or not origin.files.unchanged():
            return False
        if isinstance(self.texts, TextStore):  # as loaded (a store cannot change): its files are the texts
            for name in names:
                origin.files.link(name, path / name)
            return True
        # origin.ids None: the saved texts were not read, and self.texts holds only the ones added since
        saved = len(origin.ids) if origin.ids is not None else 0
        if len(self.texts) < saved or not all(
                a is b or a == b for a, b in zip(itertools.islice(self.texts, saved), origin.ids or ())):
            return False
        for name in names:
            origin.files.link(name, path / name)
        added = list(itertools.islice(self.texts, saved, None))
        if added:
            write_texts(path, added, [self.texts[i] for i in added], segment=segments)
        return True

    def _save_lexical(self, path: Path) -> None:
        assert self.lexical is not None  # save calls this only for a hybrid index
        directory = path / LEXICAL_DIR
        self.lexical.save(directory)
        readings = self.load_readings()
        if readings:
            # level 1: written on every update and read only to refit; level 9 took 0.75 s of a 3 s refresh
            with gzip.open(directory / LEXICAL_READINGS, "wt", encoding="utf-8", compresslevel=1) as rows:
                for i in self.lexical_ids:  # in the lexical side's order, each the text when it has none
                    rows.write(json.dumps(readings.get(i, (self.texts or {}).get(i, "")), ensure_ascii=False) + "\n")
        if checksummed(path, "structret.json"):  # sealed already (not inside atomic_dir): list the new files
            for file in sorted(p for p in directory.rglob("*") if p.is_file()):
                add_to_checksums(path, file.relative_to(path).as_posix())

    def _load_lexical(self, path: Path) -> None:
        """The lexical side ``meta["lexical"]`` names, from ``path/lexical`` (checked by the caller)."""
        directory = path / LEXICAL_DIR
        self.lexical = load_side(self.index, self.meta["lexical"], directory, path, self.kind)
        if (directory / LEXICAL_READINGS).is_file():
            self._readings_file = directory / LEXICAL_READINGS


def fuse_candidates(candidates: Iterable[tuple[tuple[Sequence[str], Any], tuple[Sequence[str], Any]]], fusion: Any,
                    k: int) -> list[list[Any]]:
    """Each query's ``(lexical, dense)`` candidates (``SearchIndex.candidates``) fused by ``fusion`` (a spec, a
    dict or a Fusion) into its top ``k`` (structret.search.fusion.FusedHit: doc, score, sources): the one
    route from both sides' lists to a ranking, for searches and for the whole-project benchmark."""
    from structret.search.fusion import fuse_lists

    fusion = decide_fusion(fusion)
    return [fuse_lists(lexical, dense, fusion, k) for lexical, dense in candidates]


# what a SearchIndex keeps of its meta when saved (the index plugin writes the rest)
# texts files an index may have (its first, and one per update) before an update writes them as one again
_MAX_TEXT_FILES = 32


@dataclass
class _TextsOrigin:
    """The texts files an index was loaded with, and the ids they hold in order."""

    files: SavedFiles  # the texts files and their lookups
    ids: list[str] | None  # None: not read (an update that only adds, or a TextStore's)


_SAVED = ("model", "backbone", "model_override", "embeddings", "updates", "lexical", "source", "ranking")
LEXICAL_DIR = "lexical"
LEXICAL_READINGS = "readings.jsonl.gz"  # one JSON string per line, in the side's ids.json order


def load_index(path: str | os.PathLike, *, verify: bool = True, texts: bool = True) -> SearchIndex:
    """An index written by ``structret index`` or ``SearchIndex.save``, checked against its
    checksums.json (``verify=False``: used anyway, with a warning). Its model is loaded on
    the first search without one. ``texts=False`` skips reading the texts."""
    from structret.search.saved import SavedFiles, load_index as load_plugin_index
    from structret.search.texts import TextStore, open_index_texts, stored_files

    with verified(path, verify=verify):  # checked once, though read three times
        meta = read_meta(path)
        # index null with a lexical side: a lexical index, no vectors (SearchIndex.save)
        lexical_only = meta.get("index") is None and bool(meta.get("lexical"))
        index = None if lexical_only else load_plugin_index(path, verify=verify)
        # a TextStore where the texts have their lookups: a text is read when a hit shows it
        kept, why_not = open_index_texts(path, verify=verify) if texts else ({}, None)
        loaded = SearchIndex(index, meta=meta, texts=kept or None, verify=verify, path=path)
        if kept:
            loaded._texts_origin = _TextsOrigin(SavedFiles.of(path, stored_files(path)),
                                                None if isinstance(kept, TextStore) else list(kept))
        if meta.get("lexical"):
            loaded._load_lexical(Path(path))
    loaded.texts_note = why_not
    return loaded

