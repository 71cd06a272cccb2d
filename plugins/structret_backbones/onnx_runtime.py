"""``runtime="onnx"`` / ``"onnx-int8"``: an encoder backbone's ``encode`` through onnxruntime.

The first encode exports the model as ``structret export --format onnx`` does (the same graph,
the same int8 quantization and the same cosine checks against the torch model), into
``STRUCTRET_CACHE/onnx/<fingerprint>-v<EXPORT_VERSION>``: the next process, and every index or server using the
same weights and settings, loads it in a fraction of a second. The torch model stays loaded,
because training, MEP heads and checks need it; only ``encode`` changes.
"""

from __future__ import annotations

import logging
from typing import Any

from structret.errors import ModelLoadError

log = logging.getLogger("structret.backbones")

RUNTIMES = ("torch", "onnx", "onnx-int8")
DIRECTORY = "onnx"
# Raised whenever the export writes different graphs for the same weights (the int8 quantization
# changed in 2: 7-bit weights; in 3: eager attention, fused graph), so a cached export from an older
# structret is not reused.
EXPORT_VERSION = 3


def onnx_encoder(backbone: Any, backbone_name: str) -> Any:
    """The onnxruntime encoder of ``backbone``'s current weights, exported and checked on first use."""
    from structret.plugin import OnnxEncoder

    variant = "int8" if backbone.runtime == "onnx-int8" else "fp32"
    where = exported(backbone, backbone_name)
    import torch

    return OnnxEncoder(where, variant=variant, threads=torch.get_num_threads())


def exported(backbone: Any, backbone_name: str) -> Any:
    """The folder of ``backbone``'s current weights as ``structret export --format onnx`` writes it, in
    STRUCTRET_CACHE/onnx under their fingerprint: exported and checked against torch the first time
    (ModelLoadError where that cannot be done), checksums verified every time."""
    from structret.plugin import ExportError, cache_dir, require_modules, verify_checksums

    try:
        require_modules("onnx", "onnxruntime")
    except ExportError as exc:
        raise ModelLoadError(f"runtime={backbone.runtime}: {exc}") from None
    runtime, dtype = backbone.runtime, backbone._dtype  # _dtype: "auto" stays unresolved, nothing is probed
    backbone.runtime, backbone.dtype = "torch", None  # the export and its reference vectors: torch, fp32
    try:
        where = cache_dir() / DIRECTORY / f"{backbone.fingerprint()[:40]}-v{EXPORT_VERSION}"
        if not (where / "checksums.json").is_file():
            _export(backbone, backbone_name, runtime, where)
        verify_checksums(where)
    finally:
        backbone.runtime, backbone.dtype = runtime, dtype
    return where


def _export(backbone: Any, backbone_name: str, runtime: str, where: Any) -> None:
    from structret.plugin import ExportError, write_checked_onnx

    try:
        log.info("exporting %s to ONNX in %s (once)", backbone.name, where)
        write_checked_onnx(backbone, backbone_name, where, echo=log.info)
    except ExportError as exc:
        raise ModelLoadError(f"{backbone.name} cannot be exported to ONNX: {exc} "
                             f"Encode with runtime=torch (the default).") from None
