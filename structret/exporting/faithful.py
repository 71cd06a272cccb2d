"""Whether an export can give a run's vectors: only a backbone that says its vectors are one
encoder forward with CLS or mean pooling (``pooled_encoder()``, contracts.OPTIONAL) is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from structret.contracts import HasPooledEncoder
from structret.exporting.errors import ExportError
from structret.records import PooledEncoder


def check_faithful(model: Any, where: Path) -> PooledEncoder:
    """The backbone's :class:`PooledEncoder`, or ExportError unless one reproduces ``model``'s vectors."""
    b = model.backbone
    found = b.pooled_encoder() if isinstance(b, HasPooledEncoder) else None
    if found is None:
        raise ExportError(f"{where} uses the {model.backbone_name} backbone, which does not give its vectors as an "
                          f"encoder with CLS or mean pooling (no pooled_encoder()); an export's vectors would "
                          f"differ, so it is refused.")
    if isinstance(found, str):
        raise ExportError(f"{where}: {found}; an export would give different vectors, so it is refused.")
    if model.text_format.name:
        raise ExportError(f"{where} formats texts with the '{model.text_format.name}' text format before encoding, "
                          f"which an exported model would not do; its vectors for the same records would "
                          f"differ, so it is refused.")
    return found
