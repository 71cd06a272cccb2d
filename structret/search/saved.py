"""Loading saved vector indexes, and the checks every index plugin shares.

An index directory holds the index's own files plus ``structret.json``::

    {"index": "flat", "dim": 384, "metric": "ip", "count": 1000,
     "options": {...}, "model": "sentence-transformers/all-MiniLM-L6-v2", ...}

``load_index`` reads that, finds the index class registered under ``index`` and lets
it load (and check) its own files.
"""

from __future__ import annotations

import json
import operator
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Container, Sequence

import numpy as np

from structret.artifacts import read_meta, verified
from structret.errors import ArtifactError, StructretError
from structret.registry import get_registry

if TYPE_CHECKING:
    from structret.contracts import Index

METRICS = ("ip", "cosine")
IDS_FILE = "ids.json"
FORMAT = 1


class IndexInputError(StructretError, ValueError):
    """Vectors, ids or queries handed to an index do not fit it."""


def check_k(k: Any) -> int:
    """``k``, how many results a search asks for, as an int of at least 1: every index and the API
    check it here, so it is refused with one message wherever it enters."""
    try:
        value = operator.index(k)  # an int or numpy integer; 2.5 or "5" is refused, not rounded
    except TypeError:
        raise IndexInputError(f"k is how many results to return, a whole number of at least 1; got {k!r}.") from None
    if value < 1:
        raise IndexInputError(f"k is how many results to return, a whole number of at least 1; got {k!r}.")
    return value


def check_metric(metric: str) -> str:
    if metric not in METRICS:
        raise IndexInputError(f"metric {metric!r} is not supported; use one of: {', '.join(METRICS)}.")
    return metric


def as_matrix(vectors: Any, dim: int, what: str = "vectors") -> np.ndarray:
    """``vectors`` as a C-contiguous float32 [n, dim] array, or a clear error."""
    array = np.asarray(vectors)
    if array.ndim != 2:
        hint = " (for a single vector use vector[None, :])" if array.ndim == 1 else ""
        raise IndexInputError(f"{what} must be a 2-d array [n, {dim}], got shape {array.shape}{hint}.")
    if array.shape[1] != dim:
        raise IndexInputError(
            f"{what} have dimension {array.shape[1]} but the index holds {dim}-d vectors. "
            f"Were they made by a different model than the index?"
        )
    if not np.issubdtype(array.dtype, np.number) or np.issubdtype(array.dtype, np.complexfloating):
        raise IndexInputError(f"{what} must be real numbers, got dtype {array.dtype}.")
    array = np.ascontiguousarray(array, dtype=np.float32)
    bad = ~np.isfinite(array).all(axis=1)
    if bad.any():
        rows = np.flatnonzero(bad)
        listed = ", ".join(map(str, rows[:5])) + (" ..." if len(rows) > 5 else "")
        raise IndexInputError(f"{what} contain NaN or infinite values in {len(rows)} row(s): {listed}.")
    return array


def normalize_rows(array: np.ndarray) -> np.ndarray:
    """Unit-length rows (all-zero rows stay zero rather than becoming NaN)."""
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return array / np.maximum(norms, np.finfo(np.float32).tiny)


def check_ids(ids: Sequence[str], count: int, taken: Container[str]) -> list[str]:
    """``ids`` as strings, one per vector, none already in the index or repeated."""
    if isinstance(ids, str):
        raise IndexInputError("ids must be a sequence of strings, one per vector, not a single string.")
    ids = [str(i) for i in ids]
    if len(ids) != count:
        raise IndexInputError(f"got {len(ids)} ids for {count} vectors; give exactly one id per vector.")
    fresh: set[str] = set()
    for i in ids:
        if i in taken or i in fresh:
            raise IndexInputError(f"id {i!r} is added twice; every vector in an index needs its own id.")
        fresh.add(i)
    return ids


def check_removal(ids: Sequence[str], held: Any) -> list[str]:
    """``ids`` to remove as strings, each once and each in ``held`` (the ids an index holds)."""
    if isinstance(ids, str):
        raise IndexInputError("ids to remove must be a sequence of strings, not a single string.")
    ids = [str(i) for i in ids]
    missing = [i for i in ids if i not in held]
    if missing:
        listed = ", ".join(map(repr, missing[:5])) + (" ..." if len(missing) > 5 else "")
        raise IndexInputError(f"cannot remove {len(missing)} id(s) the index does not hold: {listed}; nothing "
                              f"was removed.")
    if len(set(ids)) != len(ids):
        twice = next(i for i in ids if ids.count(i) > 1)
        raise IndexInputError(f"id {twice!r} is listed twice to remove; list each id once. Nothing was removed.")
    return ids


def base_meta(name: str, dim: int, metric: str, count: int, options: dict, meta: dict | None) -> dict:
    """What every index writes to ``structret.json``; the caller's ``meta`` is kept alongside."""
    extra = dict(meta or {})
    return {
        **extra,
        "index": name,
        "format": FORMAT,
        "dim": int(dim),
        "metric": metric,
        "count": int(count),
        "options": options,
        "model": extra.get("model"),
    }


def read_index_meta(path: str | os.PathLike, name: str) -> dict:
    """``structret.json`` of an index directory, checked to be a ``name`` index with sane fields."""
    meta = read_meta(path)
    if meta.get("index") != name:
        raise ArtifactError(
            f"{path} holds a {meta.get('index')!r} index, not a {name!r} one. "
            f"Load it with structret.search.saved.load_index(path), which picks the right class."
        )
    for key in ("dim", "count"):
        if not isinstance(meta.get(key), int) or meta[key] < 0 or (key == "dim" and meta[key] == 0):
            raise ArtifactError(f"{Path(path) / 'structret.json'}: {key} is {meta.get(key)!r}; the artifact is damaged, rebuild it.")
    if meta.get("metric") not in METRICS:
        raise ArtifactError(f"{Path(path) / 'structret.json'}: unknown metric {meta.get('metric')!r}; rebuild the index.")
    return meta


def write_ids(directory: str | os.PathLike, ids: Sequence[str]) -> None:
    with open(Path(directory) / IDS_FILE, "w", encoding="utf-8") as f:
        json.dump(list(ids), f, ensure_ascii=False)


def read_ids(directory: str | os.PathLike, count: int) -> list[str]:
    file = Path(directory) / IDS_FILE
    try:
        ids = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ArtifactError(f"{file} is missing; the index is incomplete, rebuild it.") from None
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"{file}:{exc.lineno}: not valid JSON ({exc.msg}); rebuild the index.") from None
    if not isinstance(ids, list) or len(ids) != count:
        found = len(ids) if isinstance(ids, list) else type(ids).__name__
        raise ArtifactError(
            f"{file} holds {found} ids but structret.json says count={count}; the index is damaged, rebuild it."
        )
    return ids


@dataclass
class SavedFiles:
    """Files of a saved index as they were when it was loaded (device and inode of each): saving the
    updated index hard-links those still there, unreplaced, instead of writing them again."""

    folder: Path
    identities: dict[str, tuple[int, int]]

    @classmethod
    def of(cls, folder: str | os.PathLike, names: Sequence[str]) -> "SavedFiles":
        folder = Path(folder).resolve()
        return cls(folder, {name: _identity(folder / name) for name in names})

    def unchanged(self) -> bool:
        """Whether every file is still the one loaded (another writer may have replaced the folder)."""
        try:
            return all(_identity(self.folder / name) == ident for name, ident in self.identities.items())
        except OSError:
            return False

    def link(self, name: str, target: Path) -> None:
        """The saved file ``name`` at ``target``: a hard link, or a copy where links cannot be made."""
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(self.folder / name, target)
        except OSError:  # another file system, or one without hard links
            shutil.copyfile(self.folder / name, target)


def _identity(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _same_model(recorded: str, expected: str) -> bool:
    if recorded == expected:
        return True
    # the same local directory spelled differently (relative, trailing slash, symlink)
    if os.path.exists(recorded) and os.path.exists(expected):
        return os.path.realpath(recorded) == os.path.realpath(expected)
    return False


def check_same_model(path: str | os.PathLike, recorded: str | None, expected: str | None) -> None:
    """ArtifactError unless the index at ``path``, built with vectors from ``recorded``, may be
    searched with queries encoded by ``expected`` (either unknown: nothing to check)."""
    # an index saved without a model (from the Python API) cannot be checked
    if expected is not None and recorded is not None and not _same_model(recorded, expected):
        raise ArtifactError(
            f"the index at {path} was built with vectors from {recorded!r}, but the queries would be "
            f"encoded with {expected!r}; scores between different models mean nothing. Use "
            f"--model {recorded} for the queries, or rebuild the index with {expected!r}."
        )


def load_index(path: str | os.PathLike, *, expect_model: str | None = None, verify: bool = True) -> "Index":
    """Load a saved index of any registered kind.

    ``expect_model``: the backbone that will encode the queries; if the index records a
    different one, its vectors are not comparable and this raises ArtifactError.
    ``verify=False``: load it even if its files do not match checksums.json (a warning on
    stderr says so); the results may be wrong.
    """
    # one check for the whole load: the index class's own load() reads the meta again
    with verified(path, verify=verify):
        meta = read_meta(path)
        name = meta.get("index")
        if not isinstance(name, str):
            raise ArtifactError(f"{Path(path) / 'structret.json'} does not say which index it holds ('index' is missing).")
        check_same_model(path, meta.get("model"), expect_model)
        index_class: Any = get_registry().get("index", name).load()  # an index class: its load() reads it
        return index_class.load(path)
