"""The texts kept beside an index or an embeddings artifact, read by id without reading the rest.

``texts.jsonl.gz`` holds one JSON row per document (``{"id": ..., "text": ...}``), written as one
gzip member per ``BLOCK`` rows: gzip members may follow each other (RFC 1952), so any gzip reader
reads it as one file, and ``texts.lookup`` beside it says where each member starts and in which
member and row each id sits (by a 64-bit hash of the id, sorted). A search then reads the few
members its hits are in; before, a load decoded every row of the file (1M functions: ~5 s of a
5.5 s load). Index updates add one more pair per update (``texts.00001.jsonl.gz`` and
``texts.00001.lookup``, ...), so an update writes only its own texts (structret.search.update).

Texts files without a lookup (written by an earlier structret) are read whole, as before.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import sys
import zlib
from collections.abc import ItemsView, Iterator, Mapping, ValuesView
from pathlib import Path
from typing import Sequence

import numpy as np

from structret.artifacts import CHECKSUMS_FILE, add_to_checksums, listed, rebuild_hint
from structret.errors import ArtifactError

TEXTS_FILE = "texts.jsonl.gz"
# rows per gzip member: a hit decompresses its member and parses its own row (0.16 ms for 128 rows of
# real code); restarting deflate every 128 rows costs 5% in size against one stream (32 rows: 18%)
BLOCK = 128
_MAGIC = b"STRTXTL1"
_HEADER = 24  # magic, rows, members (8 bytes each)
_SEGMENT = re.compile(r"texts\.(\d{5})\.jsonl\.gz")
_BROKEN = (OSError, EOFError, zlib.error, ValueError, KeyError, TypeError, IndexError)


def lookup_name(texts_name: str) -> str:
    """``texts.lookup`` for ``texts.jsonl.gz``, ``texts.00001.lookup`` for ``texts.00001.jsonl.gz``."""
    return texts_name.removesuffix(".jsonl.gz") + ".lookup"


def text_files(directory: str | os.PathLike) -> list[str]:
    """The names of the texts files beside an index, in the order their rows were added."""
    directory = Path(directory)
    later = sorted(p.name for p in directory.glob("texts.*.jsonl.gz") if _SEGMENT.fullmatch(p.name))
    return ([TEXTS_FILE] if (directory / TEXTS_FILE).is_file() else []) + later


def stored_files(directory: str | os.PathLike) -> list[str]:
    """Every file of the texts beside an index: each texts file, then its lookup where it has one."""
    directory = Path(directory)
    return [name for texts in text_files(directory)
            for name in (texts, lookup_name(texts)) if (directory / name).is_file()]


def _key(doc_id: str) -> int:
    # blake2b, not hash(): Python salts str hashes per process, and the lookup outlives the process
    return int.from_bytes(hashlib.blake2b(doc_id.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def write_texts(directory: str | os.PathLike, ids: Sequence[str], texts: Sequence[str], *,
                segment: int = 0) -> None:
    """``ids`` and their ``texts`` as TEXTS_FILE and its lookup in ``directory``, or (``segment`` > 0)
    as the ``segment``-th pair of texts added since."""
    name = f"texts.{segment:05d}.jsonl.gz" if segment else TEXTS_FILE
    final = Path(directory) / name
    partial = final.with_name(f"{name}.{os.getpid()}.part")
    offsets = [0]
    with open(partial, "wb") as out:
        for start in range(0, len(ids), BLOCK):
            rows = "".join(json.dumps({"id": i, "text": t}) + "\n"
                           for i, t in zip(ids[start:start + BLOCK], texts[start:start + BLOCK]))
            # level 6 (zlib's default): 1% larger than 9 and 3x faster to write, on every update of an index
            out.write(gzip.compress(rows.encode("utf-8"), compresslevel=6, mtime=0))
            offsets.append(out.tell())
        if len(offsets) == 1:  # no rows: still a gzip file, as gzip.open writes it
            out.write(gzip.compress(b"", mtime=0))
            offsets.append(out.tell())
    hashes = np.fromiter((_key(str(i)) for i in ids), dtype=np.uint64, count=len(ids))
    positions = np.arange(len(ids), dtype=np.uint64)
    places = ((positions // BLOCK) << np.uint64(32)) | (positions % BLOCK)
    # the lookup first: a kill between the two renames leaves a lookup that a load without its
    # texts file ignores, never a texts file whose lookup describes other rows
    _write_lookup(final.with_name(lookup_name(name)), np.asarray(offsets, dtype=np.uint64), hashes, places)
    os.replace(partial, final)
    _list_if_saved(directory, lookup_name(name))
    _list_if_saved(directory, name)


def _write_lookup(final: Path, offsets: np.ndarray, hashes: np.ndarray, places: np.ndarray) -> None:
    """The lookup file: header, member offsets [members + 1], id hashes sorted [rows], each one's place
    (member << 32 | row in member) [rows]; little-endian throughout."""
    order = np.argsort(hashes, kind="stable")
    partial = final.with_name(f"{final.name}.{os.getpid()}.part")
    with open(partial, "wb") as out:
        out.write(_MAGIC + np.array([len(hashes), len(offsets) - 1], dtype="<u8").tobytes())
        out.write(offsets.astype("<u8").tobytes())
        out.write(hashes[order].astype("<u8").tobytes())
        out.write(places[order].astype("<u8").tobytes())
    os.replace(partial, final)


def _list_if_saved(directory: str | os.PathLike, name: str) -> None:
    # beside an index its plugin has saved (and sealed with checksums.json), the texts join the
    # manifest, so a missing or damaged texts file is refused on load like any other file. A kill
    # before this line leaves the texts unlisted, which a load refuses too. Inside atomic_dir
    # there is no manifest yet: atomic_dir lists every file when it seals the directory.
    if (Path(directory) / CHECKSUMS_FILE).is_file():
        add_to_checksums(directory, name)


def read_index_texts(directory: str | os.PathLike, *, verify: bool = True) -> tuple[dict[str, str], str | None]:
    """Every text kept beside an index, by id, in the order they were added; with none to show,
    also why (a sentence for a warning). What an update or a refit reads; a search opens them
    with ``open_index_texts`` instead.

    Call it after the index passed verify_checksums: a texts file the manifest lists is then
    whole. One it does not list (an index from an older structret) is not read unless
    ``verify`` is False.
    """
    directory = Path(directory)
    names, why_not = _readable(directory, verify)
    texts: dict[str, str] = {}
    for name in names:
        file = directory / name
        try:
            with gzip.open(file, "rt", encoding="utf-8") as f:
                texts.update((row["id"], row["text"]) for row in map(json.loads, f))
        except _BROKEN as exc:
            return {}, f"{file} is damaged ({exc}); showing ids only. To rewrite it: {rebuild_hint(directory)}."
    return texts, why_not


def open_index_texts(directory: str | os.PathLike, *,
                     verify: bool = True) -> tuple[Mapping[str, str], str | None]:
    """The texts kept beside an index, by id, as ``read_index_texts`` gives them; where every texts
    file has its lookup, a TextStore that reads a text when it is asked for (nothing at load)."""
    directory = Path(directory)
    names, why_not = _readable(directory, verify)
    vouched = listed(directory) if verify else None
    if names and all((directory / lookup_name(n)).is_file() and (vouched is None or lookup_name(n) in vouched)
                     for n in names):
        return TextStore(directory, names), None
    return read_index_texts(directory, verify=verify) if names else ({}, why_not)


def _readable(directory: Path, verify: bool) -> tuple[list[str], str | None]:
    """The texts files to read, or none and why."""
    if not (directory / TEXTS_FILE).is_file():
        return [], (f"{directory} has no {TEXTS_FILE} (an index saved from Python, or 'structret index' was "
                    f"interrupted before writing it): showing ids only.")
    names = text_files(directory)
    vouched = listed(directory) if verify else set()
    for name in names:
        if verify and name not in vouched:
            return [], (f"{directory / name} is not listed in {CHECKSUMS_FILE} (the index was built by an older "
                        f"structret), so nothing vouches for it: showing ids only. To see texts: "
                        f"{rebuild_hint(directory)}.")
    return names, None


class _Segment:
    """One texts file and its lookup, opened when the index is loaded: an update that swaps the index's
    folder afterwards leaves these open files as they were, so texts and lookup always agree."""

    def __init__(self, texts: Path, lookup: Path):
        self.texts = texts
        try:
            raw = np.memmap(lookup, dtype=np.uint8, mode="r")
            rows, members = (int(x) for x in raw[8:_HEADER].view("<u8"))
            if bytes(raw[:8]) != _MAGIC or raw.size != _HEADER + 8 * (members + 1) + 16 * rows:
                raise ValueError("not a texts lookup, or cut short")
            self.file = open(texts, "rb")
        except _BROKEN as exc:
            raise _damaged(lookup, exc) from None
        start = _HEADER + 8 * (members + 1)
        self.offsets = raw[_HEADER:start].view("<u8")
        self.hashes = raw[start:start + 8 * rows].view("<u8")
        self.places = raw[start + 8 * rows:].view("<u8")
        self.rows = rows
        # the members of recent hits: a query's hits are often neighbours, and a page shown twice
        self.member = functools.lru_cache(maxsize=64)(self._member)

    def find(self, doc_id: str) -> str | None:
        key = np.uint64(_key(doc_id))  # uint64 like the array: searchsorted then reads ~20 of its pages
        first = int(np.searchsorted(self.hashes, key, side="left"))
        end = int(np.searchsorted(self.hashes, key, side="right"))
        for at in range(first, end):  # one, but for a 64-bit collision
            place = int(self.places[at])
            try:
                row = json.loads(self.member(place >> 32)[place & 0xFFFFFFFF])  # its row alone parsed
                found = row["id"] == doc_id
            except _BROKEN as exc:
                raise _damaged(self.texts, exc) from None
            if found:
                return row["text"]
        return None

    def _member(self, n: int) -> list[str]:
        start, end = int(self.offsets[n]), int(self.offsets[n + 1])
        try:
            # pread, not seek + read: a server's threads search the same index at once
            data = os.pread(self.file.fileno(), end - start, start)
            return gzip.decompress(data).decode("utf-8").split("\n")
        except _BROKEN as exc:
            raise _damaged(self.texts, exc) from None

    def items(self) -> Iterator[tuple[str, str]]:
        try:
            # from the file opened at load, not by its name: the folder may have been swapped since
            raw = io.BufferedReader(_Pread(self.file.fileno()), buffer_size=1 << 20)
            with io.TextIOWrapper(gzip.GzipFile(fileobj=raw, mode="rb"), encoding="utf-8") as rows:
                for row in map(json.loads, rows):
                    yield row["id"], row["text"]
        except _BROKEN as exc:
            raise _damaged(self.texts, exc) from None


class _Pread(io.RawIOBase):
    """An open file read from its start with pread: its own position, whoever else reads the file."""

    def __init__(self, fd: int):
        self.fd, self.at = fd, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = os.pread(self.fd, len(buffer), self.at)
        buffer[:len(data)] = data
        self.at += len(data)
        return len(data)


def _damaged(file: Path, exc: BaseException) -> ArtifactError:
    return ArtifactError(f"{file} is damaged ({exc}). {rebuild_hint(file.parent)}.")


class TextStore(Mapping[str, str]):
    """The texts beside an index, by id, read from disk when asked for: ``store[id]`` reads the one
    gzip member holding it. Iterating (ids, items, values) reads the files through, in the order the
    texts were added. Read-only: an update reads them whole (``read_index_texts``) and writes anew."""

    def __init__(self, directory: str | os.PathLike, names: Sequence[str]):
        directory = Path(directory)
        self.directory = directory
        self.names = list(names)
        self._segments = [_Segment(directory / n, directory / lookup_name(n)) for n in names]
        self._warned: set[str] = set()

    def get_text(self, doc_id: str) -> str | None:
        """The text of ``doc_id``; None if the store has none, or if the part holding it is damaged (said
        once on stderr: a search then shows ids, as it did when a damaged file was read at load)."""
        for segment in self._segments:
            try:
                found = segment.find(doc_id)
            except ArtifactError as exc:
                if str(exc) not in self._warned:
                    self._warned.add(str(exc))
                    print(f"warning: {exc} Showing ids only where it is needed.", file=sys.stderr)
                return None
            if found is not None:
                return found
        return None

    def __getitem__(self, doc_id: str) -> str:
        found = self.get_text(doc_id) if isinstance(doc_id, str) else None
        if found is None:
            raise KeyError(doc_id)
        return found

    def __contains__(self, doc_id: object) -> bool:
        return isinstance(doc_id, str) and self.get_text(doc_id) is not None

    def __len__(self) -> int:
        return sum(s.rows for s in self._segments)

    def __iter__(self) -> Iterator[str]:
        return (i for i, _ in self._rows())

    def _rows(self) -> Iterator[tuple[str, str]]:
        for segment in self._segments:
            yield from segment.items()

    def items(self) -> ItemsView[str, str]:
        return _Items(self)

    def values(self) -> ValuesView[str]:
        return _Values(self)


class _Items(ItemsView):
    def __iter__(self):  # the files read through once, not a lookup per id
        return self._mapping._rows()


class _Values(ValuesView):
    def __iter__(self):
        return (t for _, t in self._mapping._rows())


def concatenate_texts(parts: Sequence, out: str | os.PathLike) -> bool:
    """Write the texts of ``parts`` (embeddings artifacts, each with a ``path``), in order, as one
    texts file with its lookup; False if a part has none.

    gzip members may simply follow each other (RFC 1952), so the bytes are concatenated, and the
    parts' lookups shifted by the bytes and members before them. A part without a lookup (written
    by an earlier structret) leaves the whole without one: it is then read whole, as before.
    """
    files = [Path(p.path) / TEXTS_FILE for p in parts]
    if not all(f.is_file() for f in files):
        return False
    final = Path(out) / TEXTS_FILE
    partial = final.with_name(f"{TEXTS_FILE}.{os.getpid()}.part")
    lookups = [f.with_name(lookup_name(TEXTS_FILE)) for f in files]
    with open(partial, "wb") as sink:
        for file in files:
            with open(file, "rb") as source:
                shutil.copyfileobj(source, sink)
    if all(lookup.is_file() for lookup in lookups):
        offsets, hashes, places = [np.zeros(1, dtype=np.uint64)], [], []
        members = 0
        for file, lookup in zip(files, lookups):
            segment = _Segment(file, lookup)
            offsets.append(segment.offsets[1:] + offsets[-1][-1])
            hashes.append(np.asarray(segment.hashes))
            places.append(np.asarray(segment.places) + (np.uint64(members) << np.uint64(32)))
            members += len(segment.offsets) - 1
            segment.file.close()
        _write_lookup(final.with_name(lookup_name(TEXTS_FILE)), np.concatenate(offsets),
                      np.concatenate(hashes), np.concatenate(places))
        _list_if_saved(out, lookup_name(TEXTS_FILE))
    os.replace(partial, final)
    _list_if_saved(out, TEXTS_FILE)
    return True
