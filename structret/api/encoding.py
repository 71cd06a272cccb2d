"""Encoding a dataset to disk as ``structret encode`` does: resumable chunks, optional shards."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from structret.models import Model


@dataclass
class EncodeResult:
    """Where the vectors went, which rows they are, and what was reused."""

    target: Path
    what: str
    rows: tuple[int, int]  # [start, end) of the corpus
    total: int
    shard: Any  # structret.embeddings.Shard or None
    report: Any  # structret.embeddings.EncodeReport

    def summary(self) -> str:
        count = self.rows[1] - self.rows[0]
        part = (f" (shard {self.shard}: rows {self.rows[0]} to {self.rows[1]} of {self.total})"
                if self.shard is not None else "")
        if self.report.already_complete:
            return f"{self.target} already holds these {count} {self.what} vectors{part}; nothing to do"
        resumed = (f"; {self.report.chunks_reused} of {self.report.chunks} chunks were already done"
                   if self.report.chunks_reused else "")
        return f"wrote {count} {self.what} vectors of dim {self.report.dim} to {self.target}{part}{resumed}"


def encode_dataset(model: Model, dataset: Any, out: str | os.PathLike, *, what: str = "documents",
                   shard: Any = None, chunk_rows: int = 10_000, batch_size: int = 32, show_progress: bool = True,
                   data: str = "", split: str | None = None) -> EncodeResult:
    """Encode ``dataset``'s documents (or ``what="queries"``) into ``out``: embeddings.npy,
    ids.json, texts and structret.json, saved every ``chunk_rows`` rows so a re-run resumes.

    ``shard`` (a ``structret.embeddings.Shard``, or ``"I/N"``) encodes only that slice, into
    ``out/shard-I-of-N``. ``data`` and ``split`` name the input in the metadata (what
    decides whether saved chunks and shards belong together).
    """
    from structret.embeddings import encode_resumably, fingerprint, parse_shard

    if isinstance(shard, str):
        shard = parse_shard(shard)
    records = dataset.corpus if what == "documents" else dataset.queries
    kind = "document" if what == "documents" else "query"
    all_ids = list(records)
    start, end = shard.rows(len(all_ids)) if shard is not None else (0, len(all_ids))
    ids = all_ids[start:end]
    texts = [model.text(records[i], kind) for i in ids]
    meta = {"what": what, "backbone": model.backbone_name, "model": model.name, "model_override": model.model,
            "backbone_options": model.option_strings(), "data": data, "split": split,
            "text_format": model.text_format.name, "text_format_options": model.text_format.options,
            "corpus": {"count": len(all_ids), "ids_sha256": fingerprint(all_ids)}}
    if shard is not None:
        meta.update(shard=[shard.index, shard.count], rows=[start, end])
    target = Path(out) / shard.dirname if shard is not None else Path(out)
    report = encode_resumably(
        target, ids, texts,
        lambda batch: model.backbone.encode(batch, kind=kind, batch_size=batch_size, show_progress=show_progress),
        meta, chunk_rows=chunk_rows, with_texts=what == "documents")
    return EncodeResult(target, what, (start, end), len(all_ids), shard, report)


def encoding_shard(spec: str | None = None) -> Any:
    """The shard ``encode_dataset`` writes: ``spec`` ("I/N", 0-based) parsed and checked, or with
    no spec the launcher's RANK of WORLD_SIZE (accelerate launch, torchrun) when there are several
    processes, else None (``structret.embeddings.Shard``)."""
    from structret.embeddings import parse_shard, shard_from_env

    return parse_shard(spec) if spec else shard_from_env()
