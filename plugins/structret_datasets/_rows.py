"""What every reader shares: JSON-lines rows with skip-and-count, field checks, option checks."""

from __future__ import annotations

import gzip
import json
import re
import zlib
from typing import Any, Iterator

from structret.errors import DataError
from structret.records import ReadStats

_GZIP_MAGIC = b"\x1f\x8b"


class BadRow(Exception):
    """A row that cannot be used; ``reason`` is the short category counted in ReadStats."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class LeftOut(BadRow):
    """A sound row that an option (split, language, locale) leaves out."""


def record_skip(stats: ReadStats, where: str, bad: BadRow) -> None:
    """Count ``bad``: with an example line if it is a fault, without if it was left out."""
    if isinstance(bad, LeftOut):
        stats.leave_out(bad.reason)
    else:
        stats.skip(where, bad.reason)


def iter_jsonl(path: str, stats: ReadStats, display: str | None = None) -> Iterator[tuple[int, str, dict]]:
    """Yield ``(line, "file:line", row)`` for each JSON object line of a .jsonl or .jsonl.gz file.

    Lines that are not UTF-8, not JSON or not an object are skipped and counted here;
    the caller must ``use`` or ``skip`` every row it is given, so read == used + skipped.
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
    with opener(path, "rb") as fh:
        try:
            for raw in fh:
                lineno += 1
                if not raw.strip():
                    continue  # blank lines (a trailing newline, say) are not rows
                where = f"{display}:{lineno}"
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


def check_options(reader: str, options: dict[str, Any], accepted: dict[str, str]) -> None:
    """Refuse options this reader does not know, naming the ones it does."""
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        listing = "; ".join(f"{k} ({v})" for k, v in accepted.items()) or "none"
        raise DataError(f"{reader}: unknown option {', '.join(repr(u) for u in unknown)}. Accepted options: {listing}.")


def check_choice(reader: str, name: str, value: Any, choices: tuple[str, ...]) -> str:
    value = str(value).lower()
    if value not in choices:
        raise DataError(f"{reader}: {name} '{value}' is not one of: {', '.join(choices)}.")
    return value


def natural_key(text: str) -> list:
    """Sort key putting ``x_2`` before ``x_10``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]
