"""Updating a saved index in place: ids removed, documents added, swapped in atomically."""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from structret import defaults
from structret.artifacts import META_FILE, atomic_dir
from structret.contracts import HasClose, HasRemove
from structret.search.build import documents_of, lexical_reader
from structret.search.index import SearchIndex, _TextsOrigin, load_index
from structret.errors import StructretError


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
    document. Removing needs an index kind with ``remove`` (flat, hnsw, usearch, milvus). The updated index,
    texts and checksums are written beside the old one and swapped in with one rename, so an
    interrupted update leaves the previous index whole. Updates of one index take turns: each
    holds ``.NAME.lock`` beside it from reading the index to the swap, so a second update (another
    process, another machine on the same file system) waits and then applies its changes to the
    first one's result: none is lost.
    """
    remove = [str(i) for i in remove]
    if add is None and not remove:
        raise StructretError("update_index: nothing to do; give add= (an encode folder or FORMAT:PATH), remove= "
                             "ids, or both.")
    with update_lock(path):
        found = load_index(path, verify=verify, texts=False)
        _texts_for_update(found, path, verify, whole=bool(remove) or found.lexical is not None)
        try:
            _update(found, path, add, remove, split, batch_size, verify, show_progress)
        finally:
            if isinstance(found.index, HasClose):
                found.index.close()
    last = found.meta["updates"][-1]
    return UpdateResult(last["added"], last["removed"], len(found))


def _texts_for_update(found: SearchIndex, path, verify: bool, *, whole: bool) -> None:
    """Removing, and refitting a lexical side, need every text; an update that only adds reads none
    and writes its own texts as one more file beside the saved ones (SearchIndex.save links those)."""
    from structret.search.saved import SavedFiles
    from structret.search.texts import lookup_name, read_index_texts, stored_files, text_files

    names = text_files(path)
    if not names:
        return
    # texts an earlier structret wrote (no lookups): read whole and written anew, with lookups
    convert = not all((Path(path) / lookup_name(name)).is_file() for name in names)
    if whole or convert:
        kept, found.texts_note = read_index_texts(path, verify=verify)
        found.texts = kept or None
        ids = list(kept) if kept else None
    else:
        found.texts, ids = {}, None
    if found.texts is not None and not convert:
        found._texts_origin = _TextsOrigin(SavedFiles.of(path, stored_files(path)), ids)


@contextlib.contextmanager
def update_lock(path: str | os.PathLike) -> Iterator[None]:
    """Hold the index's update lock (``.NAME.lock`` beside it: the folder itself is swapped)."""
    from filelock import FileLock, Timeout

    folder = Path(path).resolve()
    lock = FileLock(str(folder.parent / f".{folder.name}.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        print(f"another update of {path} is running; waiting for it to finish", file=sys.stderr)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def _update(found: SearchIndex, path, add, remove, split, batch_size, verify, show_progress) -> None:
    if found.index is None:
        lexical = (found.meta.get("lexical") or {}).get("retriever", defaults.LEXICAL)
        raise StructretError(f"the index at {path} is lexical (no vectors); build it again with the documents "
                             f"it should hold: 'structret index --data FORMAT:PATH --backbone none --lexical "
                             f"{lexical} --out {path}'.")
    if remove and not isinstance(found.index, HasRemove):
        raise StructretError(
            f"the index at {path} is a {found.kind!r} index, which cannot remove ids; rebuild it with an index "
            f"that can (flat, hnsw, usearch, milvus; 'structret plugins --kind index'), or rebuild it without those documents."
        )
    ids, vectors, texts, readings = _to_add(found, path, add, split, batch_size, verify, show_progress) \
        if add is not None else ([], None, None, None)
    if ids and found.lexical is not None and (texts is None or any(t is None for t in texts)):
        raise StructretError(f"the index at {path} is hybrid: its lexical side needs every added document's text, "
                             f"and {add} has none for some; add a FORMAT:PATH dataset, or an encode folder with "
                             f"texts.")
    apply_update(found, path, ids, vectors, texts, remove, str(add) if add is not None else None, readings=readings)


def apply_update(found: SearchIndex, path: str | os.PathLike, ids: Sequence[str], vectors: Any,
                 texts: Sequence[str | None] | None, remove: Sequence[str], source: str | None,
                 extra: Callable[[Path], None] | None = None, readings: Sequence[str] | None = None) -> None:
    """Remove ``remove``, then add ``ids`` (their ``vectors`` and ``texts``; ``readings``: how the
    lexical side reads them, SearchIndex.readings), refit the lexical side, and swap the result in at
    ``path`` in one rename; ``extra(staged)`` writes more files into the new folder before it is sealed
    (checksummed with the rest). The caller holds ``update_lock``."""
    from structret.search.saved import IndexInputError

    kept_texts = found.texts if isinstance(found.texts, dict) else None
    if found.texts is not None and kept_texts is None:
        # a TextStore, loaded to search (a source index's re-run) and read-only: read whole, to change
        found.texts = kept_texts = dict(found.texts.items())
        if found._texts_origin is not None:
            found._texts_origin = _TextsOrigin(found._texts_origin.files, list(kept_texts))
    kept_readings = found.load_readings() if found.lexical is not None else None
    if remove and kept_readings is not None:
        for i in remove:
            kept_readings.pop(i, None)
    if readings is not None and found.lexical is not None:
        found.readings = kept_readings if kept_readings is not None else {}
        found.readings.update(zip(ids, readings))
    if remove:
        assert isinstance(found.index, HasRemove)  # the caller checked that this kind of index can remove
        found.index.remove(list(remove))  # checks every id first: an unknown one raises and changes nothing
        if kept_texts is not None:
            for i in remove:
                kept_texts.pop(i, None)
            # the saved texts files hold the removed texts: written anew, never linked. (Their ids alone
            # cannot tell: an id removed and added again, an edited function, sits where it was.)
            found._texts_origin = None
    if ids:
        assert found.index is not None  # a lexical index is refused before (_update)
        try:
            found.index.add(list(ids), vectors)
        except IndexInputError as exc:
            raise IndexInputError(f"{source}: {exc} To replace a document, also --remove its id.") from None
        if kept_texts is not None and texts is not None:
            kept_texts.update((i, t) for i, t in zip(ids, texts) if t is not None)
    # BM25's statistics (document frequencies, mean length) cover the whole corpus: a lexical side that keeps
    # what it was built from rebuilds them reading only the added documents; any other is fitted again
    if found.lexical is not None and not found.update_lexical(ids):
        lexical = found.meta["lexical"]
        found.add_lexical(lexical["retriever"], lexical.get("fusion"), **(lexical.get("options") or {}))
        found.meta["lexical"] = {**lexical, **found.meta["lexical"]}  # what else it recorded (the tuning) stays
    update = {"added": len(ids), "removed": len(remove), "source": source}
    found.meta["updates"] = [*(found.meta.get("updates") or []), update]
    with atomic_dir(path) as staged:  # the old index stays in place until the new one is whole
        found.save(staged)
        if extra is not None:
            extra(staged)


def _to_add(found: SearchIndex, path, add, split, batch_size, verify, show_progress):
    """(ids, vectors, texts or None, readings or None) of what ``add`` names, made by the index's model; the
    readings (SearchIndex.readings) when a lexical side reads a dataset's records its own way."""
    from structret.search.saved import check_same_model

    if os.path.isdir(add) and (os.path.isfile(os.path.join(add, META_FILE))
                               or any(name.startswith("shard-") for name in os.listdir(add))):
        import numpy as np

        from structret.embeddings import collect_parts
        from structret.search.texts import read_index_texts

        parts = collect_parts([add], verify=verify)
        check_same_model(path, found.meta.get("model"), parts[0].meta.get("model"))
        ids = [i for part in parts for i in part.ids()]
        vectors = np.concatenate([np.asarray(part.vectors()) for part in parts])
        by_id = {i: t for part in parts for i, t in read_index_texts(part.path, verify=verify)[0].items()}
        return ids, vectors, [by_id.get(i) for i in ids] if by_id else None, None
    if isinstance(add, os.PathLike) or ":" not in str(add):
        raise StructretError(f"cannot add {add}: give the output folder of 'structret encode' or a FORMAT:PATH "
                             f"dataset spec (e.g. codesearchnet:new.jsonl.gz).")
    model = found.model  # the index's own model, checked against its metadata
    dataset = documents_of(str(add), split)
    ids = list(dataset.corpus)
    texts = [model.text(r, "document") for r in dataset.corpus.values()]
    vectors = model.backbone.encode(texts, kind="document", batch_size=batch_size, show_progress=show_progress)
    reader = lexical_reader(found.lexical.retriever) if found.lexical is not None else None
    return ids, vectors, texts, [reader(r) for r in dataset.corpus.values()] if reader is not None else None
