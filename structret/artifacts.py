"""Saving artifacts so that an interrupted save never destroys the previous one."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

from structret.errors import ArtifactError

META_FILE = "structret.json"


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary sibling directory; on success it replaces ``path`` in one rename.

    If the body raises (or the process dies), ``path`` still holds what it held before.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    try:
        yield tmp
        old = None
        if final.exists():
            old = final.with_name(f".{final.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(final, old)
        os.replace(tmp, final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_meta(directory: str | os.PathLike, meta: dict[str, Any]) -> None:
    with open(Path(directory) / META_FILE, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2, sort_keys=True)


def read_meta(directory: str | os.PathLike, **expected: Any) -> dict[str, Any]:
    """Read ``structret.json`` and check that the given fields have the expected values."""
    file = Path(directory) / META_FILE
    if not file.is_file():
        raise ArtifactError(
            f"{directory} is not a structret artifact: {META_FILE} is missing. "
            f"Was it written by 'structret index' or 'structret encode'?"
        )
    try:
        meta = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"{file}:{exc.lineno}: not valid JSON ({exc.msg}); the artifact is damaged, rebuild it.") from None
    for key, want in expected.items():
        if want is not None and meta.get(key) != want:
            raise ArtifactError(
                f"{file}: {key} is {meta.get(key)!r} but {want!r} was expected. "
                f"Rebuild the artifact, or use the {key} it was built with."
            )
    return meta
