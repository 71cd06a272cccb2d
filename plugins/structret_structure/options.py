"""Options of the informed-transformer backbone (a recipe's ``[informed-transformer]`` table,
``--backbone-option``) and of parent-attention. Kept apart from the model so that listing or
checking options never imports torch.

The architecture options (dim ... query_encoder) shape a new model only; a saved one (``--model
DIR``) keeps its own, and its language, linearizer, identifier splitting and normalize too.
"""

from typing import Literal

from pydantic import Field

from structret.plugin import Count, Options


class InformedTransformer(Options):
    """Options of ``informed-transformer`` (Khan & Jang's code encoder)."""

    language: str = "python"
    """The language of the code documents (a new model; a saved one keeps its own)."""
    split_identifiers: bool = True
    """Split identifiers into camelCase / snake_case parts before linearizing (a new model)."""
    linearizer: str = "dfs-parent"
    """The linearizer turning code into tokens and parents: raw, dfs, dfs-parent or bfs (a new model)."""
    vocab_size: Count = 8000
    """BPE vocabulary learned from the texts (a new model)."""
    normalize: bool = False
    """Scale every vector to unit length (a saved model keeps its own setting)."""
    device: str = "cpu"
    """torch device to encode on: cpu, cuda, cuda:1 ..."""
    seed: int = 0
    """Seed of a new model's random weights."""
    strict: bool | None = None
    """Give the informed head the gold AST parents instead of learned attention; unset = the model's own
    setting (off for a new one)."""
    dim: Count = 128
    """Hidden size of a new model (the paper's d); must divide into heads."""
    layers: Count = 3
    """Transformer layers of a new model."""
    heads: Count = 8
    """Attention heads per layer of a new model."""
    ffn_mult: Count = 4
    """Feed-forward width of a new model, in multiples of dim."""
    max_length: Count = 512
    """Tokens per text of a new model; longer texts are cut."""
    informed_layers: int = Field(1, ge=0)
    """The first N layers of a new model have the parent-attending head (the paper's P)."""
    dropout: float = Field(0.1, ge=0, lt=1)
    """Dropout of a new model."""
    query_encoder: Literal["shared", "separate"] | None = None
    """separate = queries get their own encoder of the same shape (the paper's two encoders), shared = one
    for both; fixed when a model is created, unset = shared (or the saved model's)."""


class ParentAttention(Options):
    """The ``parent-attention`` objective has no options."""
