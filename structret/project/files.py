"""The manifest of an index built from a source folder (``OUT/source-files.json``): each file's size,
modification time, SHA-256 and the ids of its functions, so a re-run of ``structret index SOURCE``
reads and mines only what changed (structret.project.index).
"""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

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
