"""Options of the built-in objectives (``[sda]``, ``[mep]`` ... tables of a recipe).

Kept apart from the objectives themselves so that listing or checking options never
imports torch.
"""

from typing import Literal

from pydantic import Field, field_validator

from structret.plugin import LMWarmupOptions, Options


class Contrastive(Options):
    """Options of ``sda`` and ``dr``."""

    similarity: Literal["dot", "cos"] = "dot"
    """How a query and a document are scored: dot = raw inner product (SANTA, OpenMatch),
    cos = cosine (for unit-vector encoders such as MiniLM)."""
    temperature: float = Field(1.0, gt=0)
    """Scores are divided by it before the softmax; 1.0 = none (SANTA). Unit vectors want ~0.05."""


class EntityMasking(LMWarmupOptions):
    """Options of ``mep``; lm_warmup* as in structret.options.LMWarmupOptions."""

    extractor: str = "auto"
    """Which entities are masked: a registered extractor, or auto = python-tokenize for Python,
    tree-sitter identifiers for other code, title-overlap for products (SANTA App. A.3)."""

    entity_rate: float = Field(1.0, gt=0, le=1)
    """Share of a passage's distinct entities that are masked, drawn per passage: 1.0 = all (SANTA's
    paper); SANTA's released code samples a share for languages other than Python."""
    contrastive_input: Literal["masked", "unmasked"] = "masked"
    """What a contrastive objective of the same run embeds: masked = the corrupted passage, SANTA's one
    forward for both losses; unmasked = a second forward of the clean passage, as retrieval encodes it."""

    @field_validator("extractor")
    @classmethod
    def _installed(cls, name: str) -> str:
        if name != "auto":
            from structret.plugin import get_registry

            get_registry().check("extractor", name)  # unknown: lists the installed ones
        return name


class SpanMasking(LMWarmupOptions):
    """Options of ``span-mask``; lm_warmup* as in structret.options.LMWarmupOptions."""

    noise_density: float = Field(0.15, gt=0, lt=1)
    """Fraction of the tokens corrupted (T5's setting)."""
    mean_span_length: float = Field(3.0, gt=0)
    """Mean length of a corrupted span, in tokens (T5's setting)."""
    contrastive_input: Literal["masked", "unmasked"] = "masked"
    """What a contrastive objective of the same run embeds: masked = the corrupted passage, SANTA's one
    forward for both losses; unmasked = a second forward of the clean passage, as retrieval encodes it."""
