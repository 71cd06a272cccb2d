"""``structret export``: a trained run as a sentence-transformers folder or as ONNX (fp32 + int8).

Nothing here imports torch at import time: ``structret.onnx_encoder`` is the
torch-free loader that ``structret serve --model EXPORT_DIR`` uses.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from structret.contracts import HasAdapter, HasMergeAdapter
from structret.exporting.errors import ExportError, require
from structret.exporting.faithful import check_faithful
from structret.models import open_model, trained_model

__all__ = ["FORMATS", "ExportError", "check_faithful", "export_run", "merge_adapter", "open_run", "require"]

FORMATS = ("sentence-transformers", "onnx")


def open_run(run: str | os.PathLike, *, verify: bool = True) -> Any:
    """The structret ``Model`` of a run of ``structret train``, refused (ExportError saying why)
    unless an export can give the same vectors."""
    path = Path(run)
    if not path.exists():
        raise ExportError(f"{path} does not exist; give the run directory 'structret train --out' wrote.")
    trained = trained_model(str(path), verify=verify)
    if trained is None:
        raise ExportError(f"{path} is not a run of 'structret train' (no final/structret.json or "
                          f"checksums.json in it); give the directory 'structret train --out' wrote, or one "
                          f"of its checkpoints.")
    # fp32: bf16 autocast (chosen on some CPUs) would make the reference vectors the export is checked against coarser
    model = open_model(None, trained, {"dtype": "fp32"})  # checked once, above
    check_faithful(model, path)
    return model


def merge_adapter(model: Any, echo: Callable[[str], None] = print) -> None:
    """Fold a LoRA adapter into the base weights (both formats hold plain weights only), checked:
    the merged model's vectors against the adapter's on the sample texts, ExportError below FP32_COSINE."""
    b = model.backbone
    adapter = b.adapter if isinstance(b, HasAdapter) else None
    if not adapter:
        return
    if not isinstance(b, HasMergeAdapter):
        raise ExportError(f"{model.name} trained a LoRA adapter, and its {model.backbone_name} backbone cannot merge it "
                          f"(no merge_adapter()); an export holds plain weights only.")
    from structret.exporting.checks import FP32_COSINE, SAMPLE_DOCUMENTS, SAMPLE_QUERIES, cosines

    before = (model.encode_query(SAMPLE_QUERIES), model.encode_document(SAMPLE_DOCUMENTS))
    b.merge_adapter()
    after = (model.encode_query(SAMPLE_QUERIES), model.encode_document(SAMPLE_DOCUMENTS))
    worst = min(cosines(x, y).min() for x, y in zip(before, after))
    if worst < FP32_COSINE:
        raise ExportError(f"merging the LoRA adapter (r={adapter['r']}) changed the vectors (cosine {worst:.6f} < "
                          f"{FP32_COSINE}), so nothing was written. Report this with the run's backbone.")
    echo(f"LoRA adapter (r={adapter['r']}, alpha={adapter['alpha']:g}, on {','.join(adapter['targets'])}) merged into "
         f"the base weights; cosine to the adapter's vectors on {len(SAMPLE_QUERIES)} queries and "
         f"{len(SAMPLE_DOCUMENTS)} documents: min {worst:.6f}")


def export_run(run: str | os.PathLike, fmt: str, out: str | os.PathLike, *, verify: bool = True,
               echo: Callable[[str], None] = print) -> Path:
    """Write ``run`` to ``out`` as ``fmt`` (sentence-transformers or onnx) and check the
    exported vectors against the run's own (ExportError if they differ); returns ``out``."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown export format {fmt!r}; use one of: {', '.join(FORMATS)}.")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ExportError(f"{out} already exists and is not empty; choose a new --out directory or remove it.")
    require(*(("sentence_transformers",) if fmt == "sentence-transformers" else ("onnx", "onnxruntime")))
    model = open_run(run, verify=verify)
    merge_adapter(model, echo)
    if fmt == "sentence-transformers":
        from structret.exporting.st_folder import write_sentence_transformers as write
    else:
        from structret.exporting.onnx_graph import write_onnx as write
    # written beside ``out`` and renamed when checked: an export that fails its check leaves nothing to misuse
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        write(model, Path(run), tmp, shown=out, echo=echo)
        if out.exists():
            out.rmdir()  # empty, as checked above
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)  # mkdtemp made it private; an export is meant to be shared
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    echo(f"wrote {out}")
    return out
