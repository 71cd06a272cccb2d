"""Saving artifacts so that an interrupted save never destroys the previous one."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import glob
import json
import os
import re
import shutil
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

from structret.errors import ArtifactError

META_FILE = "structret.json"
# sizes and sha256 of every file of an artifact, written last: a truncated or damaged file
# is caught on load instead of surfacing as a numpy or safetensors error
CHECKSUMS_FILE = "checksums.json"


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary sibling directory; on success it replaces ``path`` in one rename.

    If the body raises (or the process dies), ``path`` still holds what it held before.
    Temporary directories that a killed save left next to ``path`` are removed here.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    _clean_up_after_killed_saves(final)
    # host and pid in the name: a later save can tell a dead writer's leftovers from a live one's
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.{_HOST}.{os.getpid()}.", suffix=".tmp", dir=final.parent))
    try:
        yield tmp
        write_checksums(tmp)
        if final.exists() and _exchange(tmp, final):
            # one step: there is no moment without an artifact at ``path``; tmp now holds the previous one
            shutil.rmtree(tmp, ignore_errors=True)
            return
        old = None
        if final.exists():
            # no atomic exchange here (not Linux, or a file system without it): the previous
            # artifact waits in .NAME.old between the two renames, and a killed save is put
            # back by the next one (_clean_up_after_killed_saves)
            old = final.with_name(f".{final.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(final, old)
        os.replace(tmp, final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


_HOST = socket.gethostname().replace(os.sep, "_") or "localhost"
_RENAME_EXCHANGE = 2  # linux/fs.h


def _exchange(a: Path, b: Path) -> bool:
    """Swap two directories atomically (Linux renameat2); False where the system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2  # glibc >= 2.28
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd = -100
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # the file system or kernel has no exchange
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def _clean_up_after_killed_saves(final: Path) -> None:
    """Remove temporary siblings of ``final`` whose writer died on this host; put back a
    previous artifact that a killed non-atomic replace left in ``.NAME.old``."""
    old = final.with_name(f".{final.name}.old")
    if old.is_dir() and not final.exists():
        os.replace(old, final)
    pattern = re.compile(rf"^\.{re.escape(final.name)}\.(.+)\.(\d+)\.[^.]+\.tmp$")
    for sibling in final.parent.glob(f".{glob.escape(final.name)}.*.tmp"):
        found = pattern.match(sibling.name)
        if found and found.group(1) == _HOST and not _alive(int(found.group(2))):
            shutil.rmtree(sibling, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _sha256(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _files(directory: Path) -> list[Path]:
    # structret.json is left out: its fields are checked one by one on load (read_meta), with
    # messages that say which field disagrees
    return sorted(p for p in directory.rglob("*")
                  if p.is_file() and p.relative_to(directory).as_posix() not in (CHECKSUMS_FILE, META_FILE))


def write_checksums(directory: str | os.PathLike) -> None:
    directory = Path(directory)
    sums = {p.relative_to(directory).as_posix(): {"bytes": p.stat().st_size, "sha256": _sha256(p)}
            for p in _files(directory)}
    (directory / CHECKSUMS_FILE).write_text(json.dumps(sums, indent=1, sort_keys=True), encoding="utf-8")


def verify_checksums(directory: str | os.PathLike) -> None:
    """Raise ArtifactError if a file listed in ``checksums.json`` is missing, truncated or
    changed. Artifacts written before checksums existed (no such file) pass."""
    directory = Path(directory)
    file = directory / CHECKSUMS_FILE
    if not file.is_file():
        return
    try:
        sums = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ArtifactError(f"{file} is damaged (not JSON); the artifact cannot be checked. Rebuild it.") from None
    for name, want in sorted(sums.items()):
        path = directory / name
        if not path.is_file():
            raise ArtifactError(f"{path} is missing from the artifact {directory}; it was deleted or the copy was "
                                f"incomplete. Rebuild it (or copy it again).")
        size = path.stat().st_size
        if size != want["bytes"]:
            raise ArtifactError(f"{path} has {size} bytes but was saved with {want['bytes']}: it is truncated or "
                                f"overwritten. Rebuild the artifact (or copy it again).")
        if _sha256(path) != want["sha256"]:
            raise ArtifactError(f"{path} does not match the checksum it was saved with: the file is damaged. "
                                f"Rebuild the artifact (or copy it again).")


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
    verify_checksums(directory)
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
