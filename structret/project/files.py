"""The manifest of an index built from a source folder (``OUT/source-files.json``): each file's size,
modification time, SHA-256 and the ids of its functions, so a re-run of ``structret index SOURCE``
reads and mines only what changed (structret.project.index).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pathspec

from structret import defaults
from structret.artifacts import verify_checksums
from structret.errors import ArtifactError
from structret.search.build import choose_index
from structret.mining.walk import DEFAULT_EXCLUDE, source_files
from structret.registry import get_registry

MANIFEST = "source-files.json"
FORMAT = 1


def scan(source: Path) -> dict[str, tuple[str, int, int]]:
    """Every file a miner reads under ``source``: relative path -> (language, size, mtime in ns).
    A file that vanishes or cannot be stat'ed between listing and here is left out (it is then
    gone, or new next time); a symlink to a directory is never followed (source_files)."""
    registry = get_registry()
    found: dict[str, tuple[str, int, int]] = {}
    for language in registry.names("miner"):
        extensions = tuple(registry.create("miner", language).extensions)
        for file in source_files(source, extensions, frozenset(DEFAULT_EXCLUDE)):
            try:
                info = file.stat()
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                found.setdefault(file.relative_to(source).as_posix(), (language, info.st_size, info.st_mtime_ns))
    return found


IGNORE_FILES = (".gitignore", ".structretignore")  # read in every folder, as git reads .gitignore


def list_files(source: Path) -> dict[str, tuple[int, int]]:
    """Every regular file under ``source`` that ``structret index SOURCE`` considers: relative path -> (size,
    mtime in ns), in a fixed order. Hidden files and folders, DEFAULT_EXCLUDE's folders and what a
    ``.gitignore`` or ``.structretignore`` (of any folder, for what is below it) ignores are left out; a
    symlink to a folder is never followed (no loops) and one that vanishes or cannot be stat'ed is skipped."""
    found: dict[str, tuple[int, int]] = {}
    rules: list[tuple[str, Any]] = []  # (folder relative to source, its spec), outermost first
    for dirpath, dirnames, filenames in os.walk(source, followlinks=False):
        folder = Path(dirpath).relative_to(source).as_posix()
        folder = "" if folder == "." else folder
        rules = [(at, spec) for at, spec in rules if not at or folder == at or folder.startswith(at + "/")]
        spec = _ignore_spec(Path(dirpath))
        if spec is not None:
            rules.append((folder, spec))
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in DEFAULT_EXCLUDE
                             and not _ignored(rules, f"{folder}/{d}".lstrip("/") + "/"))
        for name in sorted(filenames):
            rel = f"{folder}/{name}".lstrip("/")
            if name.startswith(".") or _ignored(rules, rel):
                continue
            try:
                info = os.stat(os.path.join(dirpath, name))
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                found[rel] = (info.st_size, info.st_mtime_ns)
    return found


def _ignore_spec(folder: Path) -> Any:
    lines: list[str] = []
    for name in IGNORE_FILES:
        try:
            lines += (folder / name).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
    return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None


def _ignored(rules: list[tuple[str, Any]], rel: str) -> bool:
    return any(spec.match_file(rel[len(at) + 1:] if at else rel) for at, spec in rules)


def sha256(file: Path) -> str | None:
    try:
        return hashlib.sha256(file.read_bytes()).hexdigest()
    except OSError:
        return None


def read_manifest(out: Path) -> dict[str, Any] | None:
    """The manifest of the index at ``out`` if it is whole (its checksums hold), else None."""
    file = out / MANIFEST
    if not file.is_file():
        return None
    try:
        verify_checksums(out)
        manifest = json.loads(file.read_text(encoding="utf-8"))
    except (ArtifactError, OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and manifest.get("format") == FORMAT else None


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    (folder / MANIFEST).write_text(json.dumps(manifest, ensure_ascii=False), encoding="utf-8")


def rel_of(doc_id: str, source: Path) -> str | None:
    """The source file a function's id (``file:///.../a.py#L3-L9``, what the miners write) names."""
    head = doc_id.split("#", 1)[0]
    if not head.startswith("file://"):
        return None
    try:
        return Path(unquote(urlparse(head).path)).relative_to(source).as_posix()
    except ValueError:
        return None


def same_request(previous: dict[str, Any], request: dict[str, Any]) -> bool:
    """Whether the index ``previous`` records was asked for as ``request`` is: an index asked for by name
    is what ``auto`` asks for when auto would have picked that name for its size (an index built when the
    default was ``flat`` is not rebuilt for the default's new name)."""
    asked = previous.get("request")
    if not isinstance(asked, dict) or asked.get("kind") == request["kind"] or request["kind"] != defaults.AUTO:
        return asked == request
    count = sum(len(entry.get("ids", ())) for entry in previous.get("files", {}).values())
    return (not asked.get("index_options") and asked.get("kind") == choose_index(defaults.AUTO, count)[0]
            and {**asked, "kind": defaults.AUTO} == request)
