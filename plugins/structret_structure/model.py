"""The informed-transformer backbone: a small encoder in plain torch with an informed head.

Khan & Jang's code encoder: 3 layers, d=128, 8 heads, BPE input of the pre-order (DFS)
AST sequence. In the first P layers (P=1 in the paper), head 0 is *informed*: its
attention row for token q is trained to point at q's parent (``parent-attention``), or,
``strict``, is replaced by the gold one-hot parent row, in training and at test time
alike. Tokens without a parent (the root, queries, padding) attend to themselves there.
The paper does not say how the sequence becomes one vector; we mean-pool (the
CodeSearchNet baseline's pooling), as the brief's defaults ask.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Iterable, Sequence, cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from structret.errors import ModelLoadError
from structret.plugin import NO_PARENT, gold_attention, resolve_options
from structret_structure import options as opts
from structret_structure.tokenizer import StructureTokenizer, Tokenize, train_bpe

MODEL_TYPE = "structret-informed-transformer"
WEIGHTS = "model.safetensors"
QUERY_WEIGHTS = "query_model.safetensors"  # the query tower, when it is a separate encoder


@dataclass
class InformedConfig:
    vocab_size: int
    dim: int = 128
    layers: int = 3
    heads: int = 8
    ffn_mult: int = 4
    max_length: int = 512
    informed_layers: int = 1  # the paper's P
    strict: bool = False
    dropout: float = 0.1
    pad_token_id: int = 0

    def __post_init__(self):
        if self.dim % self.heads:
            raise ValueError(f"dim={self.dim} must divide into heads={self.heads}")
        if not 0 <= self.informed_layers <= self.layers:
            raise ValueError(f"informed_layers={self.informed_layers} must lie in 0..layers={self.layers}")


class SelfAttention(nn.Module):
    def __init__(self, config: InformedConfig, informed: bool):
        super().__init__()
        self.heads, self.informed, self.strict = config.heads, informed, config.strict
        self.qkv = nn.Linear(config.dim, 3 * config.dim)
        self.out = nn.Linear(config.dim, config.dim)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, parents: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        batch, length, dim = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        if not self.informed:
            # nobody reads these probabilities: the fused kernel never materialises them
            keep = mask[:, None, None, :].bool()
            mixed = F.scaled_dot_product_attention(q, k, v, attn_mask=keep,
                                                   dropout_p=self.dropout.p if self.training else 0.0)
            return self.out(mixed.transpose(1, 2).reshape(batch, length, dim)), None
        scores = q @ k.transpose(-1, -2) / math.sqrt(dim // self.heads)
        scores = scores.masked_fill(~mask[:, None, None, :].bool(), torch.finfo(scores.dtype).min)
        probs = scores.softmax(-1)
        informed = None
        if self.informed:
            if self.strict:
                gold = gold_attention(parents if parents is not None else _none_like(mask)).to(probs.dtype)
                probs = torch.cat([gold.unsqueeze(1), probs[:, 1:]], dim=1)
            informed = probs[:, 0]  # before dropout: what the head predicts, not a noisy sample
        mixed = (self.dropout(probs) @ v).transpose(1, 2).reshape(batch, length, dim)
        return self.out(mixed), informed


def _none_like(mask: torch.Tensor) -> torch.Tensor:
    return torch.full_like(mask, NO_PARENT, dtype=torch.long)


class Layer(nn.Module):
    """Post-LN encoder layer (BERT's), so head 0's probabilities are the layer's own."""

    def __init__(self, config: InformedConfig, informed: bool):
        super().__init__()
        self.attention = SelfAttention(config, informed)
        self.norm1 = nn.LayerNorm(config.dim)
        self.ffn = nn.Sequential(nn.Linear(config.dim, config.ffn_mult * config.dim), nn.GELU(),
                                 nn.Linear(config.ffn_mult * config.dim, config.dim))
        self.norm2 = nn.LayerNorm(config.dim)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x, mask, parents):
        attended, informed = self.attention(x, mask, parents)
        x = self.norm1(x + self.dropout(attended))
        return self.norm2(x + self.dropout(self.ffn(x))), informed


class InformedEncoder(nn.Module):
    def __init__(self, config: InformedConfig):
        super().__init__()
        self.config = config
        self.tokens = nn.Embedding(config.vocab_size, config.dim, padding_idx=config.pad_token_id)
        self.positions = nn.Embedding(config.max_length, config.dim)
        self.norm = nn.LayerNorm(config.dim)
        self.dropout = nn.Dropout(config.dropout)
        self.layers = nn.ModuleList(Layer(config, i < config.informed_layers) for i in range(config.layers))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                parents: torch.Tensor | None = None) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Hidden states [batch, len, dim] and head 0's attention [batch, len, len] per informed layer."""
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.dropout(self.norm(self.tokens(input_ids) + self.positions(positions)))
        informed = []
        for layer in self.layers:
            x, attention = layer(x, attention_mask, parents)
            if attention is not None:
                informed.append(attention)
        return x, informed


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    weights = mask.unsqueeze(-1).to(torch.float32)
    return (hidden.float() * weights).sum(1) / weights.sum(1).clamp(min=1e-9)


def _query_config(config: InformedConfig) -> InformedConfig:
    from dataclasses import replace

    return replace(config, informed_layers=0, strict=False)


# what a saved directory fixes; device and strict a caller may choose again
_ARCHITECTURE = tuple(f.name for f in fields(InformedConfig))
# the options that shape a new model (its vocabulary's size is the BPE's, strict is set apart)
_SHAPE = ("dim", "layers", "heads", "ffn_mult", "max_length", "informed_layers", "dropout")


class InformedTransformer:
    """The Backbone: ``encode`` takes code texts for documents (linearized here, in
    ``language``) and natural-language texts for queries, so retrieval code is unchanged.

    ``model`` is a directory written by ``save_pretrained`` or ``initialize``; without one,
    pass ``texts`` (strings, or a file with one text per line) to learn the BPE from and
    start with random weights.

    ``query_encoder="separate"`` gives queries their own encoder of the same shape (no
    informed head: queries have no tree), trained jointly, as the paper's two encoders;
    ``"shared"`` encodes both with one. It is part of the architecture: fixed when a model
    is created, kept by a saved one.
    """

    plugin_name = "informed-transformer"
    pooling = "mean"

    def __init__(self, model: str | os.PathLike | None = None, options: opts.InformedTransformer | None = None, *,
                 texts: Iterable[str] | str | None = None, **given: Any):
        # the registry hands the validated options; Python code may give single ones as keywords
        # (InformedTransformer(texts=..., dim=64)), checked by the same model
        options = resolve_options(opts.InformedTransformer, options, given, what=f"backbone '{self.plugin_name}'")
        # a saved model keeps its own language, identifier splitting, linearizer and normalize
        language, split_identifiers, linearizer = options.language, options.split_identifiers, options.linearizer
        normalize, query_encoder = options.normalize, options.query_encoder
        if model is not None:
            directory = Path(model).expanduser()
            if not (directory / "config.json").is_file() or not (directory / WEIGHTS).is_file():
                raise ModelLoadError(
                    f"{directory} is not a saved informed-transformer (config.json and {WEIGHTS} expected); "
                    f"create one with structret_structure.model.initialize(DIR, texts) or a training run."
                )
            saved = json.loads((directory / "config.json").read_text(encoding="utf-8"))
            if saved.get("model_type") != MODEL_TYPE:
                raise ModelLoadError(f"{directory} holds a {saved.get('model_type')!r} model, not an informed-transformer.")
            config = InformedConfig(**{k: saved[k] for k in _ARCHITECTURE if k in saved})
            language, split_identifiers = saved["language"], saved["split_identifiers"]
            linearizer = saved.get("linearizer", "dfs-parent")
            normalize = saved.get("normalize", normalize)
            self.tokenizer = StructureTokenizer.load(directory, max_length=config.max_length, language=language,
                                                     split_identifiers=split_identifiers, linearizer=linearizer)
            self.model = InformedEncoder(config)
            from safetensors.torch import load_file

            self.model.load_state_dict(load_file(str(directory / WEIGHTS)))
            saved_towers = saved.get("query_encoder", "shared")
            if query_encoder is not None and query_encoder != saved_towers:
                raise ModelLoadError(
                    f"{directory} was created with query_encoder={saved_towers!r}; it cannot be loaded as "
                    f"{query_encoder!r}. Create a new model with that option (structret new-model --option "
                    f"query_encoder={query_encoder})."
                )
            self.query_model = None
            if saved_towers == "separate":
                if not (directory / QUERY_WEIGHTS).is_file():
                    raise ModelLoadError(f"{directory} has query_encoder='separate' but no {QUERY_WEIGHTS}; "
                                         f"the directory is incomplete. Save the model again.")
                self.query_model = InformedEncoder(_query_config(config))
                self.query_model.load_state_dict(load_file(str(directory / QUERY_WEIGHTS)))
            self.name = str(directory.resolve())
        else:
            if texts is None:
                raise ModelLoadError(
                    "informed-transformer needs a model directory (--model DIR) or texts to learn its BPE "
                    "from (texts=[...] or a file with one text per line)."
                )
            if isinstance(texts, (str, os.PathLike)):
                texts = Path(texts).read_text(encoding="utf-8").splitlines()
            bpe = train_bpe(texts, vocab_size=options.vocab_size, language=language,
                            split_identifiers=split_identifiers, linearizer=linearizer)
            self.tokenizer = StructureTokenizer(bpe, max_length=options.max_length, language=language,
                                                split_identifiers=split_identifiers, linearizer=linearizer)
            # architecture options shape a fresh model only; a saved one keeps its own
            config = InformedConfig(vocab_size=len(self.tokenizer), pad_token_id=self.tokenizer.pad_token_id,
                                    **{name: getattr(options, name) for name in _SHAPE})
            torch.manual_seed(options.seed)
            self.model = InformedEncoder(config)
            self.query_model = InformedEncoder(_query_config(config)) if query_encoder == "separate" else None
            self.name = self.plugin_name
        if options.strict is not None:  # the gold tree may be switched on or off for a trained head
            config.strict = options.strict
            for layer in self.model.layers:
                cast(Layer, layer).attention.strict = options.strict  # a ModuleList's items are typed Module
        self.config = config
        self.dim = config.dim
        self.max_length = config.max_length
        self.normalize = normalize
        self.capabilities = frozenset({"encoder", "structure-attention"})
        self.tokenize = Tokenize(self.tokenizer)
        self.device = options.device
        # one module owning every trainable parameter, made once: the optimizer holds its parameters
        self._trained = (self.model if self.query_model is None
                         else nn.ModuleDict({"code": self.model, "query": self.query_model}))
        self._trained.to(options.device)
        # head 0's attention per informed layer in the last document forward (parent-attention reads it)
        self.last_attention: list[torch.Tensor] = []

    @property
    def language(self) -> str:
        return self.tokenizer.language

    @property
    def strict(self) -> bool:
        return self.config.strict

    @property
    def informed_layers(self) -> int:
        return self.config.informed_layers

    @property
    def query_encoder(self) -> str:
        return "shared" if self.query_model is None else "separate"

    @property
    def training_module(self) -> nn.Module:
        return self._trained

    def embed(self, batch: Any, *, kind: str = "document") -> torch.Tensor:
        """Pooled vectors [batch, dim], with gradients. A document forward keeps head 0's
        attention per informed layer in ``last_attention``."""
        encoder = self.query_model if kind == "query" and self.query_model is not None else self.model
        hidden, informed = encoder(batch["input_ids"], batch["attention_mask"], batch.get("parents"))
        if kind == "document":
            self.last_attention = informed
        vectors = mean_pool(hidden, batch["attention_mask"])
        return F.normalize(vectors, dim=-1) if self.normalize else vectors

    def train_forward(self, batch: Any, labels: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(vectors, None)``: there is no token-prediction head (objectives needing one check
        for capability mlm/seq2seq first); parent-attention reads ``last_attention``."""
        if labels is not None:
            raise ValueError(f"{self.name} has no token-prediction head to score labels with.")
        return self.embed(batch), None

    def encode(self, texts: Sequence[str], *, kind: str = "document", batch_size: int = 32,
               show_progress: bool = False) -> np.ndarray:
        """float32 [len(texts), dim]; documents are code in ``language``, queries plain text."""
        was_training = self._trained.training
        self._trained.eval()
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # longest first, so each batch pads to texts of about its own length
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        try:
            with torch.no_grad():
                for start in range(0, len(texts), batch_size):
                    rows = order[start:start + batch_size]
                    batch = self.tokenizer.batch([texts[i] for i in rows], kind=kind)
                    batch = {k: v.to(self.device) for k, v in batch.items()}
                    out[rows] = self.embed(batch, kind=kind).float().cpu().numpy()
        finally:
            self._trained.train(was_training)
        return out

    def save_pretrained(self, directory: str | os.PathLike) -> None:
        from safetensors.torch import save_file

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().contiguous().cpu() for k, v in self.model.state_dict().items()}
        save_file(state, str(directory / WEIGHTS))
        if self.query_model is not None:
            query = {k: v.detach().contiguous().cpu() for k, v in self.query_model.state_dict().items()}
            save_file(query, str(directory / QUERY_WEIGHTS))
        self.tokenizer.save(directory)
        config = {"model_type": MODEL_TYPE, **asdict(self.config), "language": self.language,
                  "split_identifiers": self.tokenizer.split_identifiers,
                  "linearizer": self.tokenizer.linearizer_name, "pooling": self.pooling,
                  "normalize": self.normalize, "query_encoder": self.query_encoder}
        (directory / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")

    def __repr__(self) -> str:
        c = self.config
        return (f"InformedTransformer({self.name!r}, layers={c.layers}, dim={c.dim}, heads={c.heads}, "
                f"informed_layers={c.informed_layers}, strict={c.strict}, query_encoder={self.query_encoder!r})")


def initialize(directory: str | os.PathLike, texts: Iterable[str] | str, **options: Any) -> Path:
    """A fresh (random) informed-transformer with a BPE learned from ``texts``, saved to
    ``directory``: what a recipe's ``model = DIR`` then starts training from."""
    InformedTransformer(texts=texts, **options).save_pretrained(directory)
    return Path(directory)
