"""Files holding one JSON array of row objects (CoSQA's and CoSQA+'s releases), read with skip-and-count."""

from __future__ import annotations

import json
from typing import Iterator

from structret.errors import DataError
from structret.records import ReadStats

from structret_datasets._rows import oversized


def iter_json_array(path: str, stats: ReadStats, reader: str, fix: str, limit: int) -> Iterator[tuple[str, dict]]:
    """``("file:[i]", row)`` for each element of the JSON array in ``path``. A file that is not a
    JSON array is a DataError naming the line and column where it breaks; an element that is not
    an object, or has a field over ``limit`` characters, is skipped and counted here."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise DataError(f"{reader}: cannot read {path} ({exc.strerror}). {fix}") from None
    try:
        rows = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise DataError(f"{reader}: {path} is not UTF-8 (byte {exc.start}). {fix}") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{reader}: {path}:{exc.lineno}:{exc.colno} is not valid JSON ({exc.msg}). {fix}") from None
    if not isinstance(rows, list):
        raise DataError(f"{reader}: {path} holds a JSON {type(rows).__name__}, not an array of rows. {fix}")
    for i, row in enumerate(rows):
        where = f"{path}:[{i}]"
        if not isinstance(row, dict):
            stats.skip(where, "not a JSON object")
            continue
        bad = oversized(row, limit)
        if bad:
            stats.skip(where, bad.reason, bad.detail)
            continue
        yield where, row
