"""Options of the built-in backbones (the ``[minilm]``, ``[codet5-base]`` ... tables of a recipe,
``--backbone-option`` on the command line). Kept apart from the backbones so that listing or
checking options never imports torch or transformers."""

from typing import Literal

from pydantic import Field

from structret.plugin import Names, Options


class Encoder(Options):
    """What every transformer backbone takes."""

    normalize: bool = False
    """Scale every vector to unit length (inner product = cosine)."""
    max_length: int = Field(256, gt=0)
    """Tokens per text when encoding; longer texts are cut."""
    query_prefix: str = ""
    """Text put before every query (e.g. "query: " for E5-style models)."""
    document_prefix: str = ""
    """Text put before every document."""
    device: str = "auto"
    """torch device to encode on: cpu, cuda, cuda:1 ...; auto = the first CUDA GPU where torch sees
    one, else cpu (training places the model where its accelerator says)."""
    dtype: Literal["auto", "fp32", "float32", "bf16", "bfloat16", "bf16-weights"] | None = "auto"
    """Encoding precision: fp32, bf16 (autocast) or bf16-weights (a bfloat16 copy of the weights);
    auto = the fastest of them on this CPU and model whose vectors stay within cosine 0.999 of fp32's."""
    compile: bool = False
    """torch.compile the model, for encoding and for training forwards: a slower start (a minute or two
    on a CPU), faster on large corpora and long runs."""
    trust_remote_code: bool = False
    """Run a hub model's own Python code (transformers' trust_remote_code); only for code you trust."""


class HFEncoder(Encoder):
    """Options of ``hf-encoder`` (any BERT-like encoder)."""

    pooling: Literal["cls", "mean"] = "cls"
    """The text vector: cls = first token's last hidden state, mean = mean over tokens."""
    informed_layers: int | None = Field(None, ge=0)
    """Khan & Jang's parent-attending head in head 0 of the first N layers; unset = the saved model's, else 0."""
    strict: bool | None = None
    """With informed_layers: give that head the gold AST parents instead of learning them."""
    linearizer: str | None = None
    """With informed_layers: the linearizer giving parents (default dfs-parent)."""
    language: str | None = None
    """With informed_layers: the code's language (default python)."""
    split_identifiers: bool | None = None
    """With informed_layers: split identifiers into sub-words before linearizing (default true)."""
    attention: Literal["auto", "sdpa", "eager"] = "auto"
    """The attention kernel: sdpa = transformers' scaled-dot-product attention, eager = its plain matrix
    math; auto = sdpa, but in fp32 while training under bf16 autocast on a CPU, where torch's bf16 kernel
    is slower (structret_backbones.attention)."""
    attention_dropout: float | None = Field(None, ge=0, lt=1)
    """Dropout on the attention weights while training; unset = the checkpoint's (BERT, MiniLM: 0.1).
    0 lets attention take torch's fused kernel instead of materialising every attention matrix and a
    random mask over it: about half of a training step on a CPU (docs/performance.md)."""
    hidden_dropout: float | None = Field(None, ge=0, lt=1)
    """Dropout on the hidden states (embeddings, after attention and feed-forward) while training;
    unset = the checkpoint's (BERT, MiniLM: 0.1). Drawing its masks is about a fifth of a CPU step."""
    train_chunk_tokens: int = Field(4096, ge=0)
    """While training, a batch is encoded in chunks of texts of like length, each padded only to its own
    longest and holding at most this many padded tokens (0 = the whole batch at once, padded to its
    longest). The loss still sees the whole batch: in-batch negatives are unchanged."""
    runtime: Literal["torch", "onnx", "onnx-int8"] = "torch"
    """What encodes: torch, or onnxruntime over this model exported to ONNX on first use (kept in
    STRUCTRET_CACHE/onnx under the model's fingerprint, checked against torch: cosine >= 0.9999
    for onnx, >= 0.99 for onnx-int8). For encoding, indexing and serving; training needs torch."""
    aspect_slots: Names | None = None
    """MADRAL's aspect slots, e.g. "section,role": one learned [ASPECT:name] token per aspect after the first
    token of every text, their states fused into the vector (aspect-predict trains them and adds them when
    the backbone has none); unset = the saved model's, else none."""
    lora_r: int | None = Field(None, ge=0)
    """Rank of a LoRA adapter (peft) trained instead of the whole encoder: only the adapter's
    parameters train, checkpoints and the run's model hold it beside the base weights, and
    ``structret export`` merges it in. Unset = the saved model's adapter (if any), 0 = none
    (a saved adapter is then merged into the weights, which all train)."""
    lora_alpha: float | None = Field(None, gt=0)
    """LoRA scale numerator: the adapter's update is multiplied by lora_alpha / lora_r; unset = 2 x lora_r."""
    lora_dropout: float | None = Field(None, ge=0, lt=1)
    """Dropout on the adapter's input while training; unset = 0."""
    lora_targets: Names | None = None
    """Module names that get an adapter, e.g. "query,key,value,dense"; unset = peft's default for the
    architecture (BERT, RoBERTa, MiniLM: query,value)."""


class MiniLM(HFEncoder):
    """Options of ``minilm``: all-MiniLM-L6-v2 as sentence-transformers uses it."""

    pooling: Literal["cls", "mean"] = "mean"
    """The text vector: mean over tokens (this model's pooling), or cls."""
    normalize: bool = True
    """Unit-length vectors (this model's setting)."""


class T5Encoder(Encoder):
    """Options of ``t5``, ``t5-base`` and ``codet5-base`` (first decoder position, as SANTA)."""


class Static(Options):
    """Options of ``static`` (a token table: a text's vector is the mean of its tokens' rows)."""

    normalize: bool | None = None
    """Unit-length vectors; unset = what the model folder's config.json says (model2vec: true)."""
    max_length: int = Field(512, gt=0)
    """Tokens per text; longer texts are cut (a table reads every token at the same cost, so this is
    about what a vector should say, not speed)."""
    query_prefix: str = ""
    """Text put before every query."""
    document_prefix: str = ""
    """Text put before every document."""
    device: str = "auto"
    """torch device the table trains on (encoding is numpy, always on the CPU); auto = the first CUDA
    GPU where torch sees one, else cpu."""
