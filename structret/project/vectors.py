"""The vectors of an index of a source folder: the model's own, reused from the vector cache
(structret.vector_cache) where it holds them, and the model's ONNX copy (a backbone's ``onnx_twin``),
recorded in the index's manifest when it is built, with which a re-run encodes a few edited functions
without importing torch or transformers (structret.project.index)."""

from __future__ import annotations

import logging
from typing import Any

from tqdm.auto import tqdm

from structret.artifacts import cache_dir, verify_checksums
from structret.contracts import HasFingerprint, HasOnnxTwin
from structret.errors import StructretError
from structret.models import Model, load_onnx_model

log = logging.getLogger("structret.sources")


def vectors_key(model: Model) -> str | None:
    """Where the vector cache keeps ``model``'s document vectors (None: its backbone has no fingerprint)."""
    from structret.vector_cache import cache_key

    backbone = model.backbone
    if not isinstance(backbone, HasFingerprint):
        return None
    return cache_key(backbone.fingerprint(), "document", model.text_format.name or "")


def encode(model: Model, texts: list[str], key: str | None, *, keep: bool = True, batch_size: int = 32,
           show_progress: bool = False) -> tuple[Any, int, int]:
    """(vectors of ``texts``, how many were encoded, how many reused): those the vector cache holds under
    ``key`` are reused, the rest encoded, and kept there unless ``keep`` is False (an ONNX copy's vectors
    are close to the model's, not the same). ``key`` None: every text encoded."""
    from structret.vector_cache import VectorCache

    backbone = model.backbone
    if key is None:
        return backbone.encode(texts, kind="document", batch_size=batch_size, show_progress=show_progress), len(texts), 0
    cache = VectorCache(cache_dir(), key)
    vectors = cache.encode(texts, lambda batch: backbone.encode(
        batch, kind="document", batch_size=batch_size, show_progress=show_progress), keep=keep)
    return vectors, cache.encoded, cache.reused


def make_twin(model: Model, key: str | None, *, show_progress: bool = False) -> dict[str, Any] | None:
    """What a re-run encodes edited functions with instead of opening the model: the backbone's ONNX copy
    (``onnx_twin``, made once per model) and the cache key of the model's own vectors; None without one."""
    backbone = model.backbone
    # an export encodes a record's own text, so a model with a text format has no twin
    if not isinstance(backbone, HasOnnxTwin) or key is None or model.text_format.name:
        return None
    # exporting takes seconds the first time for a model (then it is checked and reused)
    with tqdm(total=1, desc="the model's ONNX copy, for quick re-runs", unit="model", disable=not show_progress) as bar:
        folder = backbone.onnx_twin()
        bar.update(1)
    return {"onnx": str(folder), "vectors": key} if folder else None


def open_twin(twin: dict[str, Any]) -> Model | None:
    """The ONNX copy a manifest records, opened; None where it is gone, damaged or cannot be run (then
    the model itself is opened, as before there were copies)."""
    try:
        verify_checksums(twin["onnx"])
        return load_onnx_model(twin["onnx"])
    except (StructretError, KeyError, TypeError, OSError) as exc:
        log.info("the model's ONNX copy cannot be used (%s); opening the model", exc)
        return None


