"""A run as ONNX: the encoder with its pooling and normalisation in one graph, fp32 and
dynamically quantized int8, with the tokenizer beside it; both checked against the run."""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path
from typing import Any, Callable

from structret.exporting.card import model_card
from structret.exporting.checks import (FP32_COSINE, INT8_COSINE, SAMPLE_DOCUMENTS, SAMPLE_QUERIES, cosines,
                                        texts_per_second)
from structret.exporting.onnx_encoder import ONNX_META, VARIANTS, OnnxEncoder

OPSET = 17
USAGE = """\
Without torch (onnxruntime and tokenizers only):

```python
from structret.exporting.onnx_encoder import load_onnx_model

model = load_onnx_model("{out}")              # variant="int8" for the quantized graph
queries = model.encode_query(["read a config file"])
documents = model.encode_document(["def read_config(path): ..."])
```

Serve an index built with the original run through this export (no torch is imported):

```
structret serve INDEX_DIR --model {out}
```

The export carries the original model's name (`{name}`), so an index built with the run
accepts it; an index built with any other model refuses it.
"""


def pooled_module(backbone: Any) -> Any:
    """The backbone's encoder + pooling (+ normalisation) as one torch module of token tensors."""
    import torch
    import torch.nn.functional as F

    class Pooled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = backbone.model

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
            if token_type_ids is not None:
                inputs["token_type_ids"] = token_type_ids
            hidden = self.encoder(**inputs).last_hidden_state
            if backbone.pooling == "cls":
                vectors = hidden[:, 0]
            else:
                mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
                vectors = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            return F.normalize(vectors, dim=-1) if backbone.normalize else vectors

    return Pooled().eval()


def export_graph(backbone: Any, path: Path) -> None:
    import torch

    sample = backbone.tokenize(["def f(x): return x", "a longer text to give the batch two lengths"], kind="document")
    # what the model accepts and its tokenizer gives: some tokenizers give no token_type_ids
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in backbone._inputs and n in sample]
    args = tuple(sample[n] for n in names)
    axes = {n: {0: "batch", 1: "tokens"} for n in names}
    with torch.no_grad(), warnings.catch_warnings():
        # The TorchScript exporter: no onnxscript dependency, and dynamic axes as given. Its
        # deprecation and tracer warnings are hidden: whether the trace generalises to other
        # batch sizes and lengths is what check_onnx measures, on batches of one and of many.
        warnings.simplefilter("ignore")
        torch.onnx.export(pooled_module(backbone), args, str(path), input_names=names, output_names=["embedding"],
                          dynamic_axes={**axes, "embedding": {0: "batch"}}, opset_version=OPSET, dynamo=False)


def quantize(fp32: Path, int8: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # per-channel: one scale per output column keeps small or uneven weight matrices accurate.
    # Its root-logger advice to pre-process first is hidden: the cosine check judges the result.
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8, per_channel=True)
    finally:
        root.setLevel(level)


def write_onnx(model: Any, run: Path, out: Path, *, echo: Callable[[str], None] = print) -> None:
    from structret.exporting import ExportError

    b = model.backbone
    if not getattr(b.tokenizer, "is_fast", False):
        raise ExportError(f"{run}'s tokenizer ({type(b.tokenizer).__name__}) has no tokenizer.json (not a fast "
                          f"tokenizer), which the torch-free loader needs.")
    out.mkdir(parents=True, exist_ok=True)
    export_graph(b, out / VARIANTS["fp32"])
    quantize(out / VARIANTS["fp32"], out / VARIANTS["int8"])
    b.tokenizer.save_pretrained(out)
    meta = {"format": "structret-onnx", "model": model.name, "backbone": model.backbone_name, "run": str(run),
            "dim": b.dim, "pooling": b.pooling, "normalize": b.normalize, "max_length": b.max_length,
            "prefixes": dict(b._text_prefixes), "pad_id": b.tokenizer.pad_token_id,
            "pad_token": b.tokenizer.pad_token, "opset": OPSET, "recipe": model.recipe}
    (out / ONNX_META).write_text(json.dumps(meta, indent=2), encoding="utf-8")
    checks = check_onnx(model, out, echo=echo)
    (out / "README.md").write_text(model_card(model, run, fmt="onnx", usage=USAGE.format(out=out, name=model.name),
                                              checks=checks), encoding="utf-8")
    echo(f"wrote {out}")


def check_onnx(model: Any, out: Path, *, echo: Callable[[str], None] = print,
               min_seconds: float = 1.0) -> list[str]:
    """Cosine of each variant to the torch model, then texts/s of each; ExportError below the thresholds."""
    import torch

    from structret.exporting import ExportError

    threads = torch.get_num_threads()  # onnxruntime gets as many threads as torch has: a fair comparison
    reference = {"query": model.encode_query(SAMPLE_QUERIES), "document": model.encode_document(SAMPLE_DOCUMENTS)}
    lines, speed = [], {"torch": texts_per_second(lambda t: model.encode_document(t), SAMPLE_DOCUMENTS,
                                                  min_seconds=min_seconds)}
    for variant, floor in (("fp32", FP32_COSINE), ("int8", INT8_COSINE)):
        encoder = OnnxEncoder(out, variant=variant, threads=threads)
        # one at a time too: a server encodes single queries, and the graph was traced on a batch
        worst = min(cosines(encoder.encode(SAMPLE_QUERIES, kind="query"), reference["query"]).min(),
                    cosines(encoder.encode(SAMPLE_QUERIES, kind="query", batch_size=1), reference["query"]).min(),
                    cosines(encoder.encode(SAMPLE_DOCUMENTS, kind="document"), reference["document"]).min())
        line = f"onnx {variant}: min cosine to the torch model {worst:.6f} (needs >= {floor})"
        echo(line)
        lines.append(line)
        if worst < floor:
            raise ExportError(f"the ONNX {variant} graph in {out} gives vectors that differ from the run's "
                              f"(cosine {worst:.6f} < {floor}); do not use it. Report this with the run's backbone.")
        speed[f"onnx {variant}"] = texts_per_second(lambda t: encoder.encode(t, kind="document"), SAMPLE_DOCUMENTS,
                                                    min_seconds=min_seconds)
    line = (f"speed on this CPU ({threads} threads, {len(SAMPLE_DOCUMENTS)} sample documents): "
            + ", ".join(f"{k} {v:.1f} texts/s" for k, v in speed.items()))
    echo(line)
    return lines + [line]
