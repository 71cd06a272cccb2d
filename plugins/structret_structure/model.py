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
from typing import Any, Iterable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from structret.errors import ModelLoadError
from structret_structure.tokenizer import NO_PARENT, StructureTokenizer, Tokenize, train_bpe

MODEL_TYPE = "structret-informed-transformer"
WEIGHTS = "model.safetensors"


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


def gold_attention(parents: torch.Tensor) -> torch.Tensor:
    """One-hot rows [batch, len, len]: each token's parent, itself when it has none."""
    length = parents.shape[1]
    own = torch.arange(length, device=parents.device).expand_as(parents)
    return F.one_hot(torch.where(parents >= 0, parents, own), length).to(torch.float32)


def parent_attention_loss(attentions: Sequence[torch.Tensor], parents: torch.Tensor) -> torch.Tensor:
    """Mean over informed layers of the cross-entropy of attention rows against gold parents;
    rows without a parent (and padding, which has none) are left out."""
    picked = parents >= 0
    if not picked.any():
        return attentions[0].sum() * 0.0  # keeps the graph; a mean over nothing would be nan
    target = parents.clamp(min=0).unsqueeze(-1)
    losses = []
    for attention in attentions:
        on_parent = attention.float().gather(-1, target).squeeze(-1)
        losses.append(-torch.log(on_parent.clamp(min=1e-9))[picked].mean())
    return torch.stack(losses).mean()


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


# what a saved directory fixes; device and strict a caller may choose again
_ARCHITECTURE = tuple(f.name for f in fields(InformedConfig))


class InformedTransformer:
    """The Backbone: ``encode`` takes code texts for documents (linearized here, in
    ``language``) and natural-language texts for queries, so retrieval code is unchanged.

    ``model`` is a directory written by ``save_pretrained`` or ``initialize``; without one,
    pass ``texts`` (strings, or a file with one text per line) to learn the BPE from and
    start with random weights.
    """

    plugin_name = "informed-transformer"
    pooling = "mean"

    def __init__(self, model: str | os.PathLike | None = None, *, texts: Iterable[str] | str | None = None,
                 language: str = "python", split_identifiers: bool = True, linearizer: str = "dfs-parent",
                 vocab_size: int = 8000,
                 normalize: bool = False, device: str = "cpu", seed: int = 0, strict: bool | None = None,
                 dim: int = 128, layers: int = 3, heads: int = 8, ffn_mult: int = 4, max_length: int = 512,
                 informed_layers: int = 1, dropout: float = 0.1):
        # architecture options shape a fresh model only; a saved one keeps its own
        architecture = {"dim": dim, "layers": layers, "heads": heads, "ffn_mult": ffn_mult,
                        "max_length": max_length, "informed_layers": informed_layers, "dropout": dropout}
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
            self.name = str(directory.resolve())
        else:
            if texts is None:
                raise ModelLoadError(
                    "informed-transformer needs a model directory (--model DIR) or texts to learn its BPE "
                    "from (texts=[...] or a file with one text per line)."
                )
            if isinstance(texts, (str, os.PathLike)):
                texts = Path(texts).read_text(encoding="utf-8").splitlines()
            bpe = train_bpe(texts, vocab_size=vocab_size, language=language, split_identifiers=split_identifiers,
                            linearizer=linearizer)
            self.tokenizer = StructureTokenizer(bpe, max_length=max_length, language=language,
                                                split_identifiers=split_identifiers, linearizer=linearizer)
            config = InformedConfig(vocab_size=len(self.tokenizer), pad_token_id=self.tokenizer.pad_token_id,
                                    **architecture)
            torch.manual_seed(seed)
            self.model = InformedEncoder(config)
            self.name = self.plugin_name
        if strict is not None:  # the gold tree may be switched on or off for a trained head
            config.strict = strict
            for layer in self.model.layers:
                layer.attention.strict = strict
        self.config = config
        self.dim = config.dim
        self.max_length = config.max_length
        self.normalize = normalize
        self.capabilities = frozenset({"encoder", "structure-attention"})
        self.tokenize = Tokenize(self.tokenizer)
        self.device = device
        self.model.to(device)
        self.lm_model = None
        # head 0's attention and the gold parents of the last forward, for inspection
        self.last_attention: list[torch.Tensor] = []
        self.last_parents: torch.Tensor | None = None

    @property
    def language(self) -> str:
        return self.tokenizer.language

    @property
    def training_module(self) -> nn.Module:
        return self.model

    def enable_lm(self) -> None:
        """Nothing to load: the trainer calls this for label-carrying objectives, and the
        parent-attention labels are read by the informed head itself."""

    def forward(self, batch: Any) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Pooled vectors [batch, dim] (with gradients) and head 0's attention per informed layer."""
        parents = batch.get("parents")
        hidden, informed = self.model(batch["input_ids"], batch["attention_mask"], parents)
        self.last_attention, self.last_parents = informed, parents
        vectors = mean_pool(hidden, batch["attention_mask"])
        return (F.normalize(vectors, dim=-1) if self.normalize else vectors), informed

    def embed(self, batch: Any) -> torch.Tensor:
        return self.forward(batch)[0]

    def train_forward(self, batch: Any, labels: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(vectors, parent-attention loss)`` from one forward; ``labels`` are the gold parent
        positions (-100 where none), as the ``parent-attention`` objective builds them."""
        vectors, informed = self.forward(batch)
        if labels is None:
            return vectors, None
        if not informed:
            raise ValueError(f"{self.name} has informed_layers=0: no head to supervise")
        return vectors, parent_attention_loss(informed, labels.masked_fill(labels < 0, NO_PARENT))

    def encode(self, texts: Sequence[str], *, kind: str = "document", batch_size: int = 32,
               show_progress: bool = False) -> np.ndarray:
        """float32 [len(texts), dim]; documents are code in ``language``, queries plain text."""
        was_training = self.model.training
        self.model.eval()
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
                    out[rows] = self.embed(batch).float().cpu().numpy()
        finally:
            self.model.train(was_training)
        return out

    def save_pretrained(self, directory: str | os.PathLike) -> None:
        from safetensors.torch import save_file

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().contiguous().cpu() for k, v in self.model.state_dict().items()}
        save_file(state, str(directory / WEIGHTS))
        self.tokenizer.save(directory)
        config = {"model_type": MODEL_TYPE, **asdict(self.config), "language": self.language,
                  "split_identifiers": self.tokenizer.split_identifiers,
                  "linearizer": self.tokenizer.linearizer_name, "pooling": self.pooling,
                  "normalize": self.normalize}
        (directory / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")

    def __repr__(self) -> str:
        c = self.config
        return (f"InformedTransformer({self.name!r}, layers={c.layers}, dim={c.dim}, heads={c.heads}, "
                f"informed_layers={c.informed_layers}, strict={c.strict})")


def initialize(directory: str | os.PathLike, texts: Iterable[str] | str, **options: Any) -> Path:
    """A fresh (random) informed-transformer with a BPE learned from ``texts``, saved to
    ``directory``: what a recipe's ``model = DIR`` then starts training from."""
    InformedTransformer(texts=texts, **options).save_pretrained(directory)
    return Path(directory)
