"""Encode with an exported ONNX model through onnxruntime and ``tokenizers`` alone: no torch,
no transformers, so a search server starts in a fraction of the time and memory.

The folder is what ``structret export RUN --format onnx`` writes: ``model.onnx`` (fp32),
``model_int8.onnx`` (dynamically quantized), ``tokenizer.json`` and ``onnx_export.json``
(pooling, normalisation, max_length, prefixes, and the identity of the model it came from).
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from structret.batching import CPU_TOKENS, WINDOW, token_batches
from structret.errors import ModelLoadError

ONNX_META = "onnx_export.json"
VARIANTS = {"fp32": "model.onnx", "int8": "model_int8.onnx"}


def is_onnx_export(path: str | os.PathLike) -> bool:
    return (Path(path) / ONNX_META).is_file()


class OnnxEncoder:
    """A backbone-like encoder over an ONNX export: ``encode(texts, kind=...)`` gives float32
    ``[n, dim]``, the vectors the original model gives (fp32: cos >= 0.9999, int8: >= 0.99,
    both checked when the export was written).

    ``name`` is the original model's name, not this folder: an index built with the run
    checks queries against that name, and these vectors are that model's (to the precision above).
    """

    plugin_name = "onnx"
    capabilities = frozenset({"encoder"})  # a backbone that encodes, and nothing else (contracts.Backbone)

    def __init__(self, directory: str | os.PathLike, *, variant: str = "fp32", threads: int | None = None):
        missing = [m for m in ("onnxruntime", "tokenizers") if importlib.util.find_spec(m) is None]
        if missing:
            raise ModelLoadError(f"{directory} is an ONNX export, read with {' and '.join(missing)}, which "
                                 f"{'is' if len(missing) == 1 else 'are'} not installed; pip install "
                                 f"'structret[export]' adds them.")
        # onnxruntime, tokenizers: the export extra (checked for above), loaded when an export is opened
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.directory = Path(directory)
        meta_file = self.directory / ONNX_META
        if not meta_file.is_file():
            raise ModelLoadError(f"{self.directory} has no {ONNX_META}, so it is not an ONNX export of structret; "
                                 f"write one with 'structret export RUN --format onnx --out DIR'.")
        if variant not in VARIANTS:
            raise ModelLoadError(f"variant={variant!r}: use 'fp32' or 'int8'.")
        try:
            meta = json.loads(meta_file.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ModelLoadError(f"{meta_file} is damaged ({exc}); export the run again.") from None
        self.meta = meta
        self.variant = variant
        self.name: str = meta["model"]
        self.dim: int = int(meta["dim"])
        self.pooling: str = meta["pooling"]
        self.normalize: bool = bool(meta["normalize"])
        self.max_length: int = int(meta["max_length"])
        self.prefixes: dict[str, str] = dict(meta.get("prefixes") or {"query": "", "document": ""})
        graph = self.directory / VARIANTS[variant]
        if not graph.is_file():
            raise ModelLoadError(f"{graph} is missing; export the run again.")
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        self._inputs = [i.name for i in self.session.get_inputs()]
        self.tokenizer = Tokenizer.from_file(str(self.directory / "tokenizer.json"))
        # as transformers truncates: special tokens included in max_length
        self.tokenizer.enable_truncation(self.max_length)
        self.pad_id = int(meta["pad_id"])  # padding is done per batch, to the batch's longest text

    def encode(self, texts: Sequence[str], *, kind: str = "document", batch_size: int = 32,
               show_progress: bool = False) -> np.ndarray:
        """float32 [len(texts), dim], row i for texts[i]."""
        if isinstance(texts, str):
            raise ModelLoadError("encode() takes a list of texts, not a single string: use encode([text]).")
        if kind not in self.prefixes:
            raise ModelLoadError(f"kind={kind!r} is not supported; use 'query' or 'document'.")
        prefix = self.prefixes[kind]
        texts = [prefix + t for t in texts]
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        by_chars = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        bar = None
        if show_progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(texts), unit="text", desc=f"encoding {kind}s ({self.variant}, onnxruntime)")
        # a window tokenized, then re-sorted by tokens (structret.batching), padded to its longest,
        # at most CPU_TOKENS tokens and at most batch_size texts a batch: not the torch encoder's
        # budget alone, because int8's activation scale is one per tensor, so more rows (and
        # padding) in a batch cost precision (tested)
        for start in range(0, len(texts), max(WINDOW, batch_size)):
            rows = by_chars[start:start + max(WINDOW, batch_size)]
            encoded = self.tokenizer.encode_batch([texts[i] for i in rows])
            by_tokens = sorted(range(len(rows)), key=lambda j: -len(encoded[j].ids))
            lengths = [len(encoded[j].ids) for j in by_tokens]
            for first, last in token_batches(lengths, CPU_TOKENS, max_rows=batch_size):
                batch = by_tokens[first:last]
                width = max(lengths[first], 1)
                feeds = {name: np.zeros((len(batch), width), dtype=np.int64) for name in self._inputs}
                if "input_ids" in feeds:
                    feeds["input_ids"][:] = self.pad_id
                for row, j in enumerate(batch):
                    e = encoded[j]
                    n = len(e.ids)
                    for name, values in (("input_ids", e.ids), ("attention_mask", e.attention_mask),
                                         ("token_type_ids", e.type_ids)):
                        if name in feeds:
                            feeds[name][row, :n] = values
                out[[rows[j] for j in batch]] = self.session.run(None, feeds)[0]
                if bar is not None:
                    bar.update(len(batch))
        if bar is not None:
            bar.close()
        return out

    def __repr__(self) -> str:
        return f"OnnxEncoder({str(self.directory)!r}, variant={self.variant!r}, model={self.name!r}, dim={self.dim})"
