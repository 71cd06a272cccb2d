"""A run as ONNX: the encoder with its pooling and normalisation in one graph, fp32 and
dynamically quantized int8, with the tokenizer beside it; both checked against the run."""

from __future__ import annotations

import inspect
import json
import logging
import warnings
from pathlib import Path
from typing import Any, Callable

from structret.artifacts import atomic_dir
from structret.contracts import HasPooledEncoder, HasSource, HasTextPrefixes, TrainableBackbone
from structret.exporting.card import model_card
from structret.exporting.errors import ExportError
from structret.exporting.checks import (FP32_COSINE, INT8_COSINE, SAMPLE_DOCUMENTS, SAMPLE_QUERIES, cosines,
                                        texts_per_second)
from structret.exporting.faithful import check_faithful
from structret.models import Model
from structret.onnx_encoder import ONNX_META, VARIANTS, OnnxEncoder
from structret.records import PooledEncoder

OPSET = 17
USAGE = """\
Without torch (onnxruntime and tokenizers only):

```python
import structret                             # loads no torch for an ONNX folder

model = structret.load_model("{out}")         # variant="int8" for the quantized graph
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


def pooled_module(parts: PooledEncoder) -> Any:
    """The encoder + pooling (+ normalisation) as one torch module of token tensors."""
    import torch
    import torch.nn.functional as F

    class Pooled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = parts.module

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
            if token_type_ids is not None:
                inputs["token_type_ids"] = token_type_ids
            hidden = self.encoder(**inputs).last_hidden_state
            if parts.pooling == "cls":
                vectors = hidden[:, 0]
            else:
                mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
                vectors = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            return F.normalize(vectors, dim=-1) if parts.normalize else vectors

    return Pooled().eval()


def export_graph(backbone: TrainableBackbone, path: Path, *, fused: bool = True) -> None:
    """The backbone's pooled encoder as ONNX at ``path``; ``fused``: eager attention and fuse_graph
    (unfused: as exported)."""
    import torch

    assert isinstance(backbone, HasPooledEncoder)  # check_faithful has said it gives a PooledEncoder
    parts = backbone.pooled_encoder()
    sample = backbone.tokenize(["def f(x): return x", "a longer text to give the batch two lengths"], kind="document",
                               max_length=parts.max_length)
    # what the model's forward accepts and its tokenizer gives: some tokenizers give no token_type_ids
    model = parts.module
    accepted = inspect.signature(model.forward).parameters
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in accepted and n in sample]
    args = tuple(sample[n] for n in names)
    axes: dict[str, dict[int, str]] = {n: {0: "batch", 1: "tokens"} for n in names}
    # SDPA attention exports as Softmax then Where(IsNaN(..)) over every [batch, heads, tokens, tokens]
    # score tensor, which onnxruntime cannot fuse: on MiniLM those two took 20% of the fp32 graph's time
    # and 34% of the int8 one's. Eager attention is the same arithmetic and fuses (fuse_graph below).
    # Only SDPA is swapped: a custom attention (informed layers) is exported as it is.
    attention = getattr(model.config, "_attn_implementation", None)
    eager = fused and attention == "sdpa" and hasattr(model, "set_attn_implementation")
    try:
        if eager:
            model.set_attn_implementation("eager")
        with torch.no_grad(), warnings.catch_warnings():
            # The TorchScript exporter: no onnxscript dependency, and dynamic axes as given. Its
            # deprecation and tracer warnings are hidden: whether the trace generalises to other
            # batch sizes and lengths is what check_onnx measures, on batches of one and of many.
            warnings.simplefilter("ignore")
            torch.onnx.export(pooled_module(parts), args, str(path), input_names=names, output_names=["embedding"],
                              dynamic_axes={**axes, "embedding": {0: "batch"}}, opset_version=OPSET, dynamo=False)
    finally:
        if eager:
            model.set_attn_implementation(attention)
    if fused:
        fuse_graph(path, model.config)


# Architectures whose graphs onnxruntime's transformer optimizer fuses with model_type="bert" (tested on
# all-MiniLM-L6-v2: every attention, embedding, skip-LayerNorm and GELU fused, cosine to torch 1 - 1e-12).
FUSED_TYPES = ("bert",)


def fuse_graph(path: Path, config: Any) -> None:
    """The graph at ``path`` with onnxruntime's fused transformer kernels (Attention,
    EmbedLayerNormalization, SkipLayerNormalization, BiasGelu) where they match; unchanged where
    the architecture is not a tested one or the optimizer fails (check_onnx judges the result).

    On MiniLM fusion makes the fp32 graph 1.2x faster, and lets int8 quantize whole attention
    blocks (QAttention) with their dynamic quantization fused in."""
    heads, hidden = getattr(config, "num_attention_heads", None), getattr(config, "hidden_size", None)
    if getattr(config, "model_type", None) not in FUSED_TYPES or not heads or not hidden:
        return
    root = logging.getLogger()
    before = root.level
    root.setLevel(logging.ERROR)  # the optimizer reports each fusion at INFO/WARNING on the root logger
    try:
        from onnxruntime.transformers import optimizer  # onnxruntime: the export extra, loaded to fuse a graph only

        fused = optimizer.optimize_model(str(path), model_type="bert", num_heads=int(heads), hidden_size=int(hidden),
                                         opt_level=0)
        fused.save_model_to_file(str(path))
    except Exception as exc:  # noqa: BLE001 - an unfused graph is still a correct one
        logging.getLogger("structret.exporting").info("onnx: graph left unfused (%s)", exc)
    finally:
        root.setLevel(before)


# What int8 keeps in fp32, tried in this order until the int8 vectors pass INT8_COSINE. Dynamic
# quantization gives each activation one scale per tensor, and the feed-forward blocks' activations
# have outliers: on all-MiniLM-L6-v2 quantizing every weight matrix gave min cosine 0.975 on code
# (mean 0.992), keeping the FFN output projections fp32 0.984, keeping both FFN matrices 0.994.
# Measured again on the fused graph (benchmarks/bench_int8.py --texts 400, AMX Xeon, quiet): 0.984 / 0.993 /
# 0.997, at 1.76x / 1.27x / 1.06x torch fp32's speed: each level kept fp32 gives back much of int8's gain.
# The outliers sit in a few channels (MiniLM's hidden channel 99 reaches 30 where most stay under 2),
# and SmoothQuant-style rescaling of those channels did not bring "none" to 0.99 (0.968-0.986).
INT8_LEVELS = {
    "none": "every weight matrix int8",
    "ffn-output": "int8 except the feed-forward output projections (fp32)",
    "ffn": "int8 attention projections, feed-forward blocks fp32",
}


def feed_forward_matmuls(graph: Path, hidden: int) -> dict[str, list[str]]:
    """Names of the MatMul nodes of the feed-forward blocks, told apart by their weights' shapes
    (hidden -> intermediate in, intermediate -> hidden out), so any BERT-like naming works."""
    import onnx  # onnx: the export extra, loaded to quantize only

    model = onnx.load(str(graph), load_external_data=False)
    shapes = {t.name: tuple(t.dims) for t in model.graph.initializer}
    found: dict[str, list[str]] = {"in": [], "out": []}
    for node in model.graph.node:
        weight = next((shapes[i] for i in node.input if i in shapes), None) if node.op_type == "MatMul" else None
        if weight is None or len(weight) != 2:
            continue
        if weight[0] == hidden and weight[1] != hidden:
            found["in"].append(node.name)
        elif weight[0] != hidden and weight[1] == hidden:
            found["out"].append(node.name)
    return found


def quantize(fp32: Path, int8: Path, *, level: str = "none", hidden: int) -> None:
    # onnx, onnxruntime: the export extra, loaded to quantize only
    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    ffn = feed_forward_matmuls(fp32, hidden)
    keep = {"none": [], "ffn-output": ffn["out"], "ffn": ffn["in"] + ffn["out"]}[level]
    # per-channel: one scale per output column keeps small or uneven weight matrices accurate.
    # reduce_range: 7-bit weights. x86 CPUs without VNNI (AVX2, AVX-512F) multiply u8 activations by
    # s8 weights in pairs summed into int16, which saturates at full 8-bit range: the test suite's
    # large-weight model fell to cosine 0.94-0.98 on a Zen 3 and passed on a Zen 4 (VNNI). A graph
    # may be served on either, so it is made safe for both; on MiniLM the 8th bit changed the
    # minimum cosine on 200 functions by 0.00004.
    # Gather: the embedding tables, a quarter of the size in int8 (MiniLM: 59 -> 23 MB) at no
    # measurable cost in cosine.
    # Its root-logger advice to pre-process first is hidden: the cosine check judges the result.
    root = logging.getLogger()
    before = root.level
    root.setLevel(logging.ERROR)
    try:
        # Attention and EmbedLayerNormalization: the fused graph's (fuse_graph) attention blocks and
        # embedding tables. DefaultTensorType: shape inference cannot type those contrib ops' outputs.
        quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8, per_channel=True, reduce_range=True,
                         op_types_to_quantize=["MatMul", "Gather", "Attention", "EmbedLayerNormalization"],
                         nodes_to_exclude=keep, extra_options={"DefaultTensorType": TensorProto.FLOAT})
    finally:
        root.setLevel(before)


def write_graphs(model: Any, out: Path, *, source: str) -> None:
    """model.onnx, model_int8.onnx, the tokenizer and onnx_export.json in ``out``, unchecked."""
    b = model.backbone
    parts = check_faithful(model, out)
    out.mkdir(parents=True, exist_ok=True)
    export_graph(b, out / VARIANTS["fp32"])
    quantize(out / VARIANTS["fp32"], out / VARIANTS["int8"], hidden=b.dim)
    parts.tokenizer.save_pretrained(out)
    meta = {"format": "structret-onnx", "model": model.name, "backbone": model.backbone_name, "source": source,
            "dim": b.dim, "pooling": parts.pooling, "normalize": parts.normalize, "max_length": parts.max_length,
            "prefixes": dict((b.text_prefixes if isinstance(b, HasTextPrefixes) else None) or {}), "pad_id": parts.tokenizer.pad_token_id,
            "pad_token": parts.tokenizer.pad_token, "opset": OPSET, "int8": "none", "recipe": model.recipe,
            "entities": model.entities}
    (out / ONNX_META).write_text(json.dumps(meta, indent=2), encoding="utf-8")


def write_onnx(model: Any, run: Path, out: Path, *, shown: Path | None = None,
               echo: Callable[[str], None] = print) -> None:
    """The graphs and tokenizer in ``out``, checked; ``shown``: where they will be (the model card names it)."""
    b = model.backbone
    if not getattr(b.tokenizer, "is_fast", False):
        raise ExportError(f"{run}'s tokenizer ({type(b.tokenizer).__name__}) has no tokenizer.json (not a fast "
                          f"tokenizer), which the torch-free loader needs.")
    write_graphs(model, out, source=str(run.resolve()))
    checks = check_onnx(model, out, echo=echo)
    usage = USAGE.format(out=shown or out, name=model.name)
    (out / "README.md").write_text(model_card(model, run, fmt="onnx", usage=usage, checks=checks), encoding="utf-8")


def check_onnx(model: Any, out: Path, *, echo: Callable[[str], None] = print,
               min_seconds: float = 1.0, speed: bool = True) -> list[str]:
    """Cosine of each variant to the torch model, then (``speed``) texts/s of each; ExportError
    below the thresholds. The int8 graph is quantized again, keeping more in fp32, until it passes."""
    import torch

    threads = torch.get_num_threads()  # onnxruntime gets as many threads as torch has: a fair comparison
    reference = {"query": model.encode_query(SAMPLE_QUERIES), "document": model.encode_document(SAMPLE_DOCUMENTS)}

    def worst(encoder: OnnxEncoder) -> float:
        # one at a time too: a server encodes single queries, and the graph was traced on a batch
        return min(cosines(encoder.encode(SAMPLE_QUERIES, kind="query"), reference["query"]).min(),
                   cosines(encoder.encode(SAMPLE_QUERIES, kind="query", batch_size=1), reference["query"]).min(),
                   cosines(encoder.encode(SAMPLE_DOCUMENTS, kind="document"), reference["document"]).min())

    timed = speed
    lines, speeds = [], {}
    if timed:
        speeds["torch"] = texts_per_second(lambda t: model.encode_document(t), SAMPLE_DOCUMENTS,
                                          min_seconds=min_seconds)
    fp32 = OnnxEncoder(out, variant="fp32", threads=threads)
    found = worst(fp32)
    lines.append(f"onnx fp32: min cosine to the torch model {found:.6f} (needs >= {FP32_COSINE})")
    echo(lines[-1])
    if found < FP32_COSINE:
        raise ExportError(f"the ONNX fp32 graph gives vectors that differ from the run's (cosine "
                          f"{found:.6f} < {FP32_COSINE}), so nothing was written. Report this with the run's backbone.")
    if timed:
        speeds["onnx fp32"] = texts_per_second(lambda t: fp32.encode(t, kind="document"), SAMPLE_DOCUMENTS,
                                              min_seconds=min_seconds)
    tried = []
    for level, what in INT8_LEVELS.items():
        if level != "none":  # write_graphs quantized everything; keep more in fp32 this time
            quantize(out / VARIANTS["fp32"], out / VARIANTS["int8"], level=level, hidden=model.backbone.dim)
        int8 = OnnxEncoder(out, variant="int8", threads=threads)
        found = worst(int8)
        tried.append(f"{what}: {found:.6f}")
        if found >= INT8_COSINE:
            break
        echo(f"onnx int8 ({what}): min cosine {found:.6f} < {INT8_COSINE}; keeping more of it in fp32")
    else:
        raise ExportError(f"no int8 graph comes within cosine {INT8_COSINE} of the run's vectors "
                          f"({'; '.join(tried)}), so nothing was written; the fp32 graph passed.")
    _record_int8_level(out, level)
    lines.append(f"onnx int8 ({what}): min cosine to the torch model {found:.6f} (needs >= {INT8_COSINE})")
    echo(lines[-1])
    if not timed:
        return lines
    speeds["onnx int8"] = texts_per_second(lambda t: int8.encode(t, kind="document"), SAMPLE_DOCUMENTS,
                                          min_seconds=min_seconds)
    line = (f"speed on this CPU ({threads} threads, {len(SAMPLE_DOCUMENTS)} sample documents): "
            + ", ".join(f"{k} {v:.1f} texts/s" for k, v in speeds.items()))
    echo(line)
    return lines + [line]


def _record_int8_level(out: Path, level: str) -> None:
    meta = json.loads((out / ONNX_META).read_text(encoding="utf-8"))
    meta["int8"] = level
    (out / ONNX_META).write_text(json.dumps(meta, indent=2), encoding="utf-8")


def write_checked(backbone: TrainableBackbone, backbone_name: str, where: Path, *, echo: Callable[[str], None]) -> None:
    """``where`` as ``structret export --format onnx`` writes it for ``backbone``'s current weights,
    checked against them (cosines only, no speed): what a backbone's ``runtime="onnx"`` encodes
    with. ExportError when the backbone's vectors cannot be exported faithfully."""
    model = Model(backbone, backbone_name=backbone_name)
    check_faithful(model, where)
    with atomic_dir(where) as tmp:
        write_graphs(model, tmp, source=str(backbone.source if isinstance(backbone, HasSource) else backbone.name))
        for line in check_onnx(model, tmp, echo=echo, speed=False):
            echo(line)
