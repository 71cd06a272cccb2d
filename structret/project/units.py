"""One file of a project read and cut into search units by the chunker (structret.contracts.Chunker), or the
reason it is left out: what ``structret index SOURCE`` indexes (structret.project.index).

A file is left out, named and counted, when it is larger than ``MAX_BYTES`` (a generated dump), binary (a
NUL byte in its first block), not UTF-8, minified (a line longer than ``MAX_LINE`` characters), unreadable,
gone between listing and reading, or when the chunker fails on it; files of a type the chunker does not
read (images, archives) are counted apart and not named. A unit's id is its file's ``file://`` URL and its
lines (``#L12-L30``), as the miners' ids: snippets, ``locate`` and the manifest read both alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from structret.records import CodeRecord, Unit

MAX_BYTES = 2_000_000  # larger files are generated or data (semble's limit is 1 MB; curl's largest is 0.2 MB)
MAX_LINE = 10_000  # a longer line is a minified bundle or embedded data, not code a person reads
HEAD = 4096  # bytes the chunker sees to choose a language (a shebang, a C++ header)


@dataclass
class FileUnits:
    """What one file gave: its language and units (as records, in order), or why it has none. ``retry``: the
    reason may pass (unreadable, gone, a chunker's failure), so it is not recorded and a re-run tries again."""

    rel: str
    language: str | None = None
    records: list[CodeRecord] = field(default_factory=list)
    skipped: str = ""  # why it was left out ("" if it was read)
    retry: bool = False


def cut_file(source: Path, rel: str, chunker: Any) -> FileUnits:
    """``source/rel`` read and cut by ``chunker`` into records, or the reason it is left out."""
    file = source / rel
    try:
        with open(file, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return FileUnits(rel, skipped="gone while indexing", retry=True)
    except OSError as exc:
        return FileUnits(rel, skipped=f"unreadable ({exc.strerror or exc})", retry=True)
    language = chunker.language(rel, data[:HEAD])
    if language is None:
        return FileUnits(rel)  # a type it does not read: counted apart
    if len(data) > MAX_BYTES:
        return FileUnits(rel, language, skipped=f"larger than {MAX_BYTES // 1_000_000} MB")
    if b"\0" in data[:8192]:
        return FileUnits(rel, language, skipped="binary")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return FileUnits(rel, language, skipped=f"not UTF-8 at line {line}")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    longest = max(map(len, text.split("\n")), default=0)
    if longest > MAX_LINE:
        return FileUnits(rel, language, skipped=f"minified (a line of {longest:,} characters)")
    try:
        units = chunker.chunk(text, rel, language)
    except (ValueError, SyntaxError, RecursionError, UnicodeError) as exc:
        return FileUnits(rel, language, skipped=f"the chunker failed ({type(exc).__name__}: {exc})", retry=True)
    return FileUnits(rel, language, [unit_record(source, rel, unit, language) for unit in units])


def unit_record(source: Path, rel: str, unit: Unit, language: str) -> CodeRecord:
    """A unit as the index's record: its text, its qualified name (the lexical side's scope field) and its
    file, under the id ``file:///.../rel#Lstart-Lend``."""
    url = f"{(source / rel).as_uri()}#L{unit.start}-L{unit.end}"
    return CodeRecord(id=url, code=unit.text, language=unit.language or language, func_name=unit.qualified,
                      repo=source.name, path=rel, url=url)
