"""A loaded index and model answering one query at a time: what the web app serves.

Loading is the slow part (seconds for a model, longer for a big index), so it happens
once, in :func:`open_searcher`; each query then costs one encoding and one index search.
Concurrent queries are encoded together: two forwards at once would only slow each other
down, and one forward of a few short queries costs little more than one of a single query
(the work is per call, not per token, at this size). So the first caller encodes and
searches for everyone waiting (up to ``max_batch``), and the others sleep until their
answer is there; a lone query goes straight through. Entity marks are drawn by each
caller's own thread, outside that turn.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from structret import defaults
from structret.artifacts import CHECKSUMS_FILE
from structret.errors import PluginError, StructretError
from structret.contracts import HasLayout
from structret.models import Model, load_model, open_model
from structret.records import Entity, Layout, Span
from structret.search.index import SearchIndex, load_index
from structret.serving.entities import NONE, Marker, choose_marker, looks_like_python
from structret.snippets import readable

log = logging.getLogger("structret.serve")


@dataclass(frozen=True)
class ShownHit:
    """One ranked hit with what the page shows of it: its layout and its entities."""

    rank: int
    id: str
    score: float
    text: str | None
    entities: tuple[Entity, ...] = ()
    layout: Layout | None = None
    entities_note: str | None = None  # why entities could not be found for this hit
    sources: tuple[str, ...] = ()  # in a hybrid index: which sides listed it (dense, lexical)
    location: str | None = None  # PATH:START-END of a function from a source folder (structret.snippets)
    snippet: tuple[dict[str, Any], ...] = ()  # its lines holding a query word first (structret.snippets)

    def as_json(self) -> dict[str, Any]:
        out = {"rank": self.rank, "id": self.id, "score": self.score, "text": self.text,
               "entities": [{"start": e.start, "end": e.end, "text": e.text, "kind": e.kind}
                            for e in self.entities]}
        if self.sources:
            out["found_by"] = list(self.sources)
        if self.location is not None:
            out["location"] = self.location
        if self.snippet:
            out["snippet"] = list(self.snippet)
        return out


@dataclass(frozen=True)
class Answer:
    query: str
    k: int  # hits asked for, after clamping to the index size
    took_ms: float  # encoding and search (of the whole batch this query was in)
    model_ms: float  # encoding alone (of the whole batch)
    hits: tuple[ShownHit, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    batch: int = 1  # queries encoded in the same forward as this one

    def as_json(self) -> dict[str, Any]:
        out = {"query": self.query, "k": self.k, "took_ms": round(self.took_ms, 3),
               "model_ms": round(self.model_ms, 3), "batch": self.batch, "hits": [h.as_json() for h in self.hits]}
        if self.notes:
            out["notes"] = list(self.notes)
        return out


class _Waiting:
    """One query in the queue, and what its batch found for it."""

    __slots__ = ("query", "k", "found", "error", "took_ms", "model_ms", "batch")

    def __init__(self, query: str, k: int):
        self.query, self.k = query, k
        self.found: list | None = None
        self.error: BaseException | None = None
        self.took_ms = self.model_ms = 0.0
        self.batch = 0

    @property
    def done(self) -> bool:
        return self.found is not None or self.error is not None


class Searcher:
    """An index, the model that built it and the extractor whose entities hits show."""

    def __init__(self, index: SearchIndex, model: Model, marker: Marker | None, *, highlight_language: str | None = None,
                 max_batch: int = 32, verify: bool = True):
        self.index = index
        self._verify = verify
        self._seen = self._loaded = self._identity()  # what the index folder was when it was loaded
        self.model = model
        self.marker = marker
        self.highlight_language = highlight_language  # a Pygments lexer name; None: plain text
        self.text_format = model.text_format.name or ""
        # the text format's linearizer reads its own texts back into fields, if it can
        linearizer = model.text_format.linearizer
        self._fields = linearizer.fields if isinstance(linearizer, HasLayout) else None
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        self.max_batch = max_batch
        self._turn = threading.Condition()  # guards _queue and _busy
        self._queue: list[_Waiting] = []
        self._busy = False
        self.no_marker_reason = ("the model records no entity extractor and the indexed texts are not Python "
                                 "code; --extractor NAME marks some")

    @property
    def size(self) -> int:
        return len(self.index)

    def health(self) -> dict[str, Any]:
        return {"status": "ok", "index_size": self.size, "index_kind": self.index.kind or None,
                "model": self.model.name, "backbone": self.model.backbone_name,
                "text_format": self.text_format or None,
                "extractor": self.marker.name if self.marker else None,
                "extractor_reason": self.marker.reason if self.marker else self.no_marker_reason,
                "texts": self.index.texts is not None,
                "fusion": self.index.fusion.spec if self.index.lexical is not None else None,
                "lexical": (self.index.meta.get("lexical") or {}).get("retriever")}

    def search(self, query: str, k: int) -> Answer:
        """The top ``k`` hits (``k`` clamped to the index size), with timings and entities."""
        mine = _Waiting(query, k)
        with self._turn:
            self._queue.append(mine)
        while not mine.done:
            with self._turn:
                while self._busy and not mine.done:
                    self._turn.wait()
                if mine.done:
                    break
                self._busy = True
                batch, self._queue = self._queue[:self.max_batch], self._queue[self.max_batch:]
            try:
                self._answer(batch)
            finally:
                with self._turn:
                    self._busy = False
                    self._turn.notify_all()
        if mine.error is not None:
            raise mine.error
        assert mine.found is not None  # done, without an error
        notes = []
        if mine.k < k:  # clamped in its turn, to the index it was answered from
            notes.append(f"the index holds {mine.k} documents, so all of them are ranked (k={k} asked for).")
        hits = tuple(self._shown(rank, hit, query) for rank, hit in enumerate(mine.found, 1))
        return Answer(query, mine.k, mine.took_ms, mine.model_ms, hits, tuple(notes), batch=mine.batch)

    def _identity(self) -> tuple[int, int, int] | None:
        """Which version of the index folder is on disk: an update writes a new folder and swaps it in,
        so its checksums.json is another file (inode), whatever its times."""
        if not self.index.path:  # built in memory: nothing on disk to follow
            return None
        try:
            st = os.stat(os.path.join(self.index.path, CHECKSUMS_FILE))
        except OSError:  # mid-swap, or gone: keep serving what is loaded
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def _reload_if_changed(self) -> None:
        """Serve an updated index from the next batch on (structret index --add/--remove while serving).
        Runs in the answering turn, so no query sees half of it; queries in flight keep the old one
        (its files stay readable after the swap). One that cannot be loaded is logged, not served."""
        now = self._identity()
        if now is None or now in (self._loaded, self._seen) or not self.index.path:
            return
        self._seen = now  # tried once per version on disk, not once per query
        try:
            fresh = load_index(self.index.path, verify=self._verify)
            fresh.use(self.model)
        except StructretError as exc:
            log.warning("%s changed on disk but cannot be served (%s); still serving the version loaded before",
                        self.index.path, exc)
            return
        old, self.index, self._loaded = self.index, fresh, now
        log.info("%s changed on disk: now serving %d documents (before: %d)", self.index.path, len(fresh), len(old))

    def _answer(self, batch: list[_Waiting]) -> None:
        """Encode ``batch`` in one forward and search it; each waiting query gets its hits or the error."""
        self._reload_if_changed()
        for w in batch:
            w.k = min(w.k, self.size)
        try:
            start = time.perf_counter()
            vectors = self.model.encode_query([w.query for w in batch])
            encoded = time.perf_counter()
            # one search per distinct k: a graph index's top 10 may differ when asked for 50
            for k in sorted({w.k for w in batch}):
                rows = [i for i, w in enumerate(batch) if w.k == k]
                # a hybrid index's lexical side reads the query texts too
                hybrid = {"texts": [batch[i].query for i in rows]} if self.index.lexical is not None else {}
                for i, found in zip(rows, self.index.search_vectors(vectors[rows], k, **hybrid)):
                    batch[i].found = list(found)
            done = time.perf_counter()
        except BaseException as exc:  # every waiting caller gets it; the server answers each with a 500
            for w in batch:
                w.error = exc
            return
        for w in batch:
            w.took_ms, w.model_ms, w.batch = (done - start) * 1000, (encoded - start) * 1000, len(batch)

    def _shown(self, rank: int, hit: Any, query: str) -> ShownHit:
        root = (self.index.meta.get("source") or {}).get("path")
        read = readable(hit, query, rank=rank, root=root)
        # only an index of a source folder has places in files; a dataset's ids stay ids, its code shown whole
        location = read["location"] if root and read["path"] is not None else None
        if hit.text is None:
            return ShownHit(rank, hit.id, hit.score, None, sources=hit.sources, location=location)
        layout = (self._fields(hit.text) if self._fields is not None else None) or Layout(
            "", (), Span("text", 0, len(hit.text)))
        entities: tuple[Entity, ...]
        entities, note = (), None
        if self.marker is not None:
            title = next((f for f in layout.fields if f.name == "title"), None)
            body = layout.body or Span("text", 0, len(hit.text))  # a Layout may name no body: mark the whole text
            try:
                entities = tuple(self.marker.entities(hit.text, body.start, body.end,
                                                      title=hit.text[title.start:title.end] if title else None))
            except Exception as exc:  # one text an extractor cannot read must not fail the whole answer
                log.warning("extractor %s failed on hit %s: %s", self.marker.name, hit.id, exc)
                note = f"the {self.marker.name} extractor could not read this text ({type(exc).__name__})"
        return ShownHit(rank, hit.id, hit.score, hit.text, entities, layout, note, hit.sources, location,
                        tuple(read["snippet"]) if location is not None else ())


def open_searcher(index: SearchIndex | str | os.PathLike, model: Model | str | None = None, *, extractor: str | None = None,
                  extractor_options: dict[str, Any] | None = None, language: str | None = None,
                  verify: bool = True, model_options: dict[str, Any] | None = None) -> Searcher:
    """Load ``index`` (a directory of ``structret index`` or a SearchIndex) and its model
    (``model``: a Model, a name/run/path for ``structret.load_model``, or None for the one
    the index records; ``model_options`` go to its backbone, e.g. ``runtime="onnx-int8"``),
    and choose the entity extractor. Raises StructretError with a sentence for the user when
    any of them cannot be used."""
    if not isinstance(index, SearchIndex):
        index = load_index(os.fspath(index), verify=verify)
        if index.texts_note:
            log.warning("%s", index.texts_note)
    if len(index) == 0:
        raise StructretError(f"{index.path or 'the index'} holds no documents; build it again with "
                             f"'structret index --data ...'.")
    if model is None:
        if not index.meta.get("backbone"):
            raise StructretError(f"{index.path or 'the index'} records no backbone, so queries cannot be encoded; "
                                 f"pass --model NAME_OR_RUN, the model that built it.")
        if model_options:
            index.use(open_model(index.meta["backbone"], index.meta.get("model_override"), model_options,
                                 verify=verify))
        model = index.model  # loaded once here, checked against the index
    else:
        if not isinstance(model, Model):
            model = load_model(str(model), verify=verify, **(model_options or {}))
        index.use(model)  # another model's scores would mean nothing: refused before serving
    # what the data is (Python code?) is judged on the first texts: enough, and cheap for a big index
    texts = list(islice(index.texts.values(), 200)) if index.texts else []
    marker = choose_marker(model.entities, texts, name=extractor,
                           options=extractor_options, language=language)
    if marker is not None and texts:
        try:  # an extractor that cannot be used on these texts at all (the wrong language) says so now
            marker.entities(texts[0])
        except PluginError as exc:
            raise PluginError(f"the {marker.name} extractor (chosen because {marker.reason}) cannot read the "
                              f"indexed texts: {exc}. Choose another with --extractor NAME (and --language "
                              f"LANG for one that reads several languages), or --extractor none.") from None
    highlight: str | None
    if language:
        highlight = language
    elif marker is not None and marker.name == defaults.PYTHON_EXTRACTOR or looks_like_python(texts):
        highlight = "python"
    else:
        highlight = marker.language if marker is not None else None
    searcher = Searcher(index, model, marker, highlight_language=highlight, verify=verify)
    if extractor == NONE:
        searcher.no_marker_reason = "--extractor none"
    elif marker is None and model.entities:
        searcher.no_marker_reason = ("the model's run learned entities of several languages, but the texts are "
                                     "not Python and no --language names their language")
    return searcher
