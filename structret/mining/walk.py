"""The source tree being mined: which files, their text, and the commit it is at."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterator

# Directories that hold someone else's code or build output, not the project's own.
DEFAULT_EXCLUDE = ("__pycache__", "site-packages", "node_modules", "vendor")


def source_files(root: Path, extensions: tuple[str, ...], exclude: frozenset[str]) -> Iterator[Path]:
    """Files under ``root`` with one of ``extensions``, in a fixed (sorted) order.

    Symlinked directories are not followed: that rules out loops, and a linked
    copy of code already in the tree would only add duplicates.
    """
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in exclude)
        for name in sorted(filenames):
            if not name.startswith(".") and name.endswith(extensions):
                yield Path(dirpath, name)


def read_source(file: Path, rel: str) -> str | list[str]:
    """The file as text with ``\\n`` line ends, or why it is skipped: [where, reason, detail]."""
    try:
        data = file.read_bytes()
    except OSError as exc:
        return [f"{rel}:1", "unreadable", exc.strerror or str(exc)]
    try:
        # like CodeSearchNet, which read every file as UTF-8; a BOM is not content
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return [f"{rel}:{line}", "not UTF-8", f"byte 0x{data[exc.start]:02x}"]
    return text.replace("\r\n", "\n").replace("\r", "\n")


def git_head(path: Path) -> str:
    """The commit checked out at ``path`` if it is the root of a git checkout, else "".

    Reads ``.git`` directly so mining needs no git binary; worktrees and
    submodules (a ``.git`` file pointing elsewhere) and packed refs are handled.
    Directories above ``path`` are not searched: a checkout that merely contains
    the tree (a home directory under git, say) says nothing about its source.
    """
    dotgit = path / ".git"
    try:
        if dotgit.is_dir():
            return _resolve_head(dotgit)
        if dotgit.is_file():
            target = dotgit.read_text(encoding="utf-8").strip()
            if target.startswith("gitdir:"):
                return _resolve_head((path / target[len("gitdir:"):].strip()).resolve())
    except (OSError, ValueError):  # unreadable or not text: no sha rather than no corpus
        pass
    return ""


_SHA = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


def _resolve_head(gitdir: Path) -> str:
    head = (gitdir / "HEAD").read_text(encoding="utf-8").strip()
    if not head.startswith("ref:"):
        return head if _SHA.fullmatch(head) else ""
    ref = head[len("ref:"):].strip()
    common = gitdir
    if (gitdir / "commondir").is_file():  # a linked worktree keeps its branches in the main .git
        common = (gitdir / (gitdir / "commondir").read_text(encoding="utf-8").strip()).resolve()
    for base in (gitdir, common):
        loose = base / ref
        if loose.is_file():
            value = loose.read_text(encoding="utf-8").strip()
            return value if _SHA.fullmatch(value) else ""
    packed = common / "packed-refs"
    if packed.is_file():
        for line in packed.read_text(encoding="utf-8").splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1] == ref and _SHA.fullmatch(parts[0]):
                return parts[0]
    return ""  # a branch with no commit yet
