"""Vectors already encoded, kept between runs: a second ``structret bench`` encodes only new texts.

Encoding is most of a dense system's time in ``structret bench`` (MiniLM on the mined standard
library: about 128 of 156 s on 2 cores), and re-running a table re-encodes the same corpus
with the same model. Here every vector is kept under the fingerprint of the backbone that
made it (its weights, and every setting that changes vectors: the backbone's ``fingerprint()``
in structret.contracts), the kind (query or document) and the text format, and found again by
the SHA-1 of its text. A backbone without a ``fingerprint`` is never cached: no key, no reuse.

On disk, ``STRUCTRET_CACHE/vectors/<key>/``: ``part-<sha256>.npz`` files (``keys``: the
texts' SHA-1 digests, ``vectors``: float32), each named by the SHA-256 of its bytes, so a
damaged part is detected, reported and dropped (its texts are encoded again), never used.
Parts are only ever added, each in one rename, so concurrent runs cannot corrupt each other.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import tempfile
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

log = logging.getLogger("structret.vector_cache")

DIRECTORY = "vectors"


def text_key(text: str) -> bytes:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).digest()


class VectorCache:
    """The vectors one backbone made for one kind of text, by text."""

    def __init__(self, root: str | os.PathLike, key: str):
        self.directory = Path(root) / DIRECTORY / key
        self._rows: dict[bytes, np.ndarray] | None = None  # read on first use
        self.reused = self.encoded = 0  # texts, over this object's life
        self.damaged: list[str] = []

    def _load(self) -> dict[bytes, np.ndarray]:
        if self._rows is not None:
            return self._rows
        rows: dict[bytes, np.ndarray] = {}
        for part in sorted(self.directory.glob("part-*.npz")):
            data = part.read_bytes()
            if hashlib.sha256(data).hexdigest() != part.name[len("part-"):-len(".npz")]:
                self._drop(part, "its bytes do not match the checksum in its name")
                continue
            try:
                with np.load(io.BytesIO(data), allow_pickle=False) as stored:
                    keys, vectors = stored["keys"], stored["vectors"]
            except (ValueError, KeyError, OSError) as exc:
                self._drop(part, f"unreadable ({exc})")
                continue
            rows.update(zip((bytes(k) for k in keys), vectors))
        self._rows = rows
        return rows

    def _drop(self, part: Path, why: str) -> None:
        log.warning("cached vectors %s: %s; removed, its texts are encoded again", part, why)
        self.damaged.append(part.name)
        part.unlink(missing_ok=True)

    def encode(self, texts: Sequence[str], encode: Callable[[list[str]], np.ndarray], *,
               keep: bool = True) -> np.ndarray:
        """Vectors of ``texts`` in order: cached ones read, the others made by ``encode`` and kept (unless
        ``keep`` is False: vectors of another encoder than the one the cache is for)."""
        rows = self._load()
        keys = [text_key(t) for t in texts]
        missing: dict[bytes, str] = {}
        for key, text in zip(keys, texts):
            if key not in rows:
                missing.setdefault(key, text)
        if missing:
            new = np.asarray(encode(list(missing.values())), dtype=np.float32)
            if keep:
                self._add(list(missing), new)
            rows.update(zip(missing, new))
        self.encoded += len(missing)
        self.reused += len(texts) - sum(1 for k in keys if k in missing)
        if not keys:
            return np.asarray(encode([]), dtype=np.float32)
        return np.stack([rows[k] for k in keys])

    def _add(self, keys: list[bytes], vectors: np.ndarray) -> None:
        buffer = io.BytesIO()
        np.savez(buffer, keys=np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), 20),
                 vectors=vectors)
        data = buffer.getvalue()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self.directory, prefix=".part-", suffix=".tmp",
                                             delete=False) as f:
                f.write(data)
            os.replace(f.name, self.directory / f"part-{hashlib.sha256(data).hexdigest()}.npz")
        except OSError as exc:  # a full or read-only disk costs the next run time, not this one's result
            log.warning("could not keep encoded vectors in %s (%s); the next run encodes them again",
                        self.directory, exc)

    def summary(self) -> str:
        text = f"{self.reused} vectors reused from {self.directory}, {self.encoded} encoded"
        if self.damaged:
            text += f"; {len(self.damaged)} damaged cache part(s) removed"
        return text


def cache_key(fingerprint: str, kind: str, text_format: str = "") -> str:
    """The directory name for a backbone fingerprint, a kind and a text format."""
    return hashlib.sha256(f"{fingerprint}\0{kind}\0{text_format}".encode()).hexdigest()[:40]
