"""What every reader shares: JSON-lines rows with skip-and-count, field checks, the split check,
and the limit on a field's size (the readers' options are declared in structret_datasets.options)."""

from __future__ import annotations

import gzip
import json
import re
import zlib
from typing import Any, BinaryIO, Iterator

from structret.errors import DataError
from structret.records import MAX_FIELD_CHARS, ReadStats

_GZIP_MAGIC = b"\x1f\x8b"
# A JSON line longer than this many times the field limit is skipped unparsed. A row has a
# handful of long fields (CodeSearchNet: code, original_string, code_tokens, docstring) and
# JSON may spend 6 bytes on one character (\u00e9), so no row whose fields fit comes near
# it; stopping there keeps a line without an end (a file with no newline at all) from being
# read whole into memory before it can be skipped.
LINE_FACTOR = 64


class BadRow(Exception):
    """A row that cannot be used; ``reason`` is the short category counted in ReadStats."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.detail = detail  # this row's own numbers, for the example line only


class LeftOut(BadRow):
    """A sound row that an option (split, language, locale) leaves out."""


def record_skip(stats: ReadStats, where: str, bad: BadRow) -> None:
    """Count ``bad``: with an example line if it is a fault, without if it was left out."""
    if isinstance(bad, LeftOut):
        stats.leave_out(bad.reason)
    else:
        stats.skip(where, bad.reason, bad.detail)


def too_long(field: str, size: int, limit: int) -> BadRow:
    """The skip of a row whose ``field`` has ``size`` characters, over ``limit``."""
    return BadRow(f"field '{field}' over max_field_chars={limit}", f"{size:,} chars")


def oversized(row: dict, limit: int, keys: tuple[str, ...] | None = None) -> BadRow | None:
    """The first field of ``row`` (of ``keys``, default all) over ``limit`` characters, or None.
    A list of strings (a token list, category levels) is as long as its strings together."""
    for key in row if keys is None else keys:
        value = row.get(key)
        if isinstance(value, str):
            size = len(value)
        elif isinstance(value, list):
            size = sum(len(v) for v in value if isinstance(v, str))
        else:
            continue
        if size > limit:
            return too_long(key, size, limit)
    return None


def _rest_of_line(fh: BinaryIO | gzip.GzipFile, chunk: int) -> int:
    """Read past the end of the current line, a chunk at a time; return how many bytes that was."""
    size = 0
    while True:
        part = fh.readline(chunk)
        size += len(part)
        if not part or part.endswith(b"\n"):
            return size


def iter_jsonl(
    path: str, stats: ReadStats, display: str | None = None, limit: int = MAX_FIELD_CHARS
) -> Iterator[tuple[int, str, dict]]:
    """Yield ``(line, "file:line", row)`` for each JSON object line of a .jsonl or .jsonl.gz file.

    Lines that are not UTF-8, not JSON or not an object, and rows with a field over
    ``limit`` characters (see ``oversized``), are skipped and counted here; the caller
    must ``use`` or ``skip`` every row it is given, so read == used + skipped.
    A gzip stream that breaks off keeps the rows before the damage and counts one
    "truncated gzip" skip at the line where it broke.
    """
    display = display or path
    try:
        with open(path, "rb") as fh:
            magic = fh.read(2)
    except OSError as exc:
        raise DataError(f"{display}: cannot open ({exc.strerror}). Check the path and its permissions.") from None
    # Decide by content, not by name: a plain .jsonl that was renamed .gz still reads.
    opener = gzip.open if magic == _GZIP_MAGIC else open
    lineno = 0
    max_line = LINE_FACTOR * limit
    with opener(path, "rb") as fh:
        try:
            for raw in iter(lambda: fh.readline(max_line + 1), b""):
                lineno += 1
                where = f"{display}:{lineno}"
                if len(raw) > max_line:
                    size = len(raw) + (0 if raw.endswith(b"\n") else _rest_of_line(fh, max_line))
                    stats.skip(where, f"line over {max_line} bytes ({LINE_FACTOR} x max_field_chars={limit})",
                               f"{size:,} bytes")
                    continue
                if not raw.strip():
                    continue  # blank lines (a trailing newline, say) are not rows
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:
                    stats.skip(where, "undecodable bytes")
                    continue
                try:
                    row = json.loads(text)
                except (ValueError, RecursionError):  # RecursionError: a line nested thousands deep
                    stats.skip(where, "bad JSON")
                    continue
                if not isinstance(row, dict):
                    stats.skip(where, "not a JSON object")
                    continue
                # Only a line longer than the limit can hold a field over it: each character
                # of a string takes at least one byte of the line. So most rows cost nothing here.
                too_big = oversized(row, limit) if len(raw) > limit else None
                if too_big:
                    stats.skip(where, too_big.reason, too_big.detail)
                    continue
                yield lineno, where, row
        except (EOFError, zlib.error, gzip.BadGzipFile):
            stats.skip(f"{display}:{lineno + 1}", "truncated gzip")


def _check_text(value: str) -> str:
    # JSON escapes can smuggle in lone surrogates ("\udc80") that no tokenizer can encode.
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise BadRow("undecodable bytes") from None
    return value


def get_str(row: dict, key: str, *, required: bool = False, default: str = "") -> str:
    """``row[key]`` as a str; a missing or null value is ``default`` unless ``required``."""
    value = row.get(key)
    if value is None:
        if required:
            raise BadRow(f"missing field '{key}'")
        return default
    if not isinstance(value, str):
        raise BadRow(f"wrong type for '{key}'")
    return _check_text(value)


def get_tokens(row: dict, key: str, *, required: bool = False) -> list[str]:
    """``row[key]`` as a list of str tokens (CodeSearchNet's ``*_tokens`` fields)."""
    value = row.get(key)
    if value is None:
        if required:
            raise BadRow(f"missing field '{key}'")
        return []
    if not isinstance(value, list):
        raise BadRow(f"wrong type for '{key}'")
    try:
        joined = " ".join(value)  # checks every token is a str, at C speed
    except TypeError:
        raise BadRow(f"wrong type for '{key}'") from None
    _check_text(joined)
    return value


def get_id(row: dict, key: str) -> str:
    """An identifier: a non-empty str, or an int (bools are not ids)."""
    value = row.get(key)
    if value is None:
        raise BadRow(f"missing field '{key}'")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise BadRow(f"wrong type for '{key}'")
    text = _check_text(str(value)).strip()
    if not text:
        raise BadRow(f"empty '{key}'")
    return text


def check_choice(reader: str, name: str, value: Any, choices: tuple[str, ...]) -> str:
    """``value`` lowercased if it is one of ``choices`` (the split a reader was given), else a DataError."""
    value = str(value).lower()
    if value not in choices:
        raise DataError(f"{reader}: {name} '{value}' is not one of: {', '.join(choices)}.")
    return value


def natural_key(text: str) -> list:
    """Sort key putting ``x_2`` before ``x_10``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]
