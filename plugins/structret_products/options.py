"""Options of the product linearizers and objectives (``[aspects]``, ``[aspect-mlm]`` ... tables).

Kept apart from the objectives so that listing or checking options never imports torch.
"""

from typing import Literal

from pydantic import Field

from structret.plugin import LMWarmupOptions, Names, Options

DEFAULT_ASPECTS = ["brand", "color"]  # what the esci reader fills in; MA-Amazon adds category levels
CONTENT_FIELDS = ["title", "content"]


class AspectsLayout(Options):
    """Options of the ``aspects`` text format (ATTEMPT's layout)."""

    aspects: Names | None = None
    """Which aspects, in order, e.g. "brand,color"; unset = each record's own aspect names, sorted."""
    content_fields: Names = Field(default_factory=lambda: list(CONTENT_FIELDS))
    """Record fields joined into the content segment."""
    query_aspects: bool = False
    """Write a query's aspects too (ATTEMPT's relevance matching leaves them empty)."""
    separator: str = "[SEP]"
    """Token between the aspect segment and the content."""
    value_separator: str = ", "
    """Between the values of one aspect."""


class Product(Options):
    """The ``product`` text format has no options."""


class AspectMLM(LMWarmupOptions):
    """Options of ``aspect-mlm`` (ATTEMPT Eq. 4); lm_warmup* as in structret.options.LMWarmupOptions."""

    aspects: Names = Field(default_factory=lambda: list(DEFAULT_ASPECTS))
    """Aspects whose text is predicted and predicts the content, in layout order."""
    content_mask_ratio: float = Field(0.15, gt=0, lt=1)
    """Item content tokens masked (§4.3)."""
    query_mask_ratio: float = Field(0.3, gt=0, lt=1)
    """Query content tokens masked (§4.3: queries are shorter, so masked more)."""
    aspect_mask_ratio: float = Field(0.6, gt=0, lt=1)
    """Aspect text tokens masked in the content->aspect view (§4.3)."""
    mutual_weight: float = Field(1.0, ge=0)
    """lambda of Eq. 4: the weight of the a2c + c2a views against plain MLM."""
    reduction: Literal["per-view", "pooled"] = "per-view"
    """per-view = Eq. 4's three means; pooled = the released code's single mean."""
    content_fields: Names = Field(default_factory=lambda: list(CONTENT_FIELDS))
    """Record fields making up the content."""
    indicator_init: Literal["random", "words"] = "random"
    """How new indicator tokens start: random rows (ATTEMPT's code), or words = the mean embedding of the
    aspect name's word pieces ([BRAND] <- "brand", [C] <- "content")."""


class MaskedLM(LMWarmupOptions):
    """Options of ``mlm`` (BIBERT, BIBERT-C, BIBERT-C(A)); lm_warmup* as in structret.options.LMWarmupOptions."""

    mlm_input: Literal["content", "aspects"] = "content"
    """content = BIBERT (the item content alone); aspects = BIBERT-C (the aspects layout)."""
    content_mask_ratio: float = Field(0.15, gt=0, lt=1)
    """Item content tokens masked."""
    query_mask_ratio: float = Field(0.3, gt=0, lt=1)
    """Query content tokens masked."""
    aspect_mask_ratio: float | None = Field(None, gt=0, lt=1)
    """Aspect text tokens masked (mlm_input = aspects); unset = the content ratio (BIBERT-C), 0.6 = BIBERT-C(A)."""
    aspects: Names = Field(default_factory=lambda: list(DEFAULT_ASPECTS))
    """Aspects of the layout, in order (mlm_input = aspects)."""
    content_fields: Names = Field(default_factory=lambda: list(CONTENT_FIELDS))
    """Record fields making up the content."""
    indicator_init: Literal["random", "words"] = "random"
    """How new indicator tokens start (mlm_input = aspects): random rows, or the mean embedding of the
    aspect name's word pieces."""


class AspectClassification(Options):
    """Options of ``aspect-class`` (MTBERT)."""

    aspects: Names = Field(default_factory=lambda: list(DEFAULT_ASPECTS), min_length=1)
    """One classification head per aspect, over the values seen in the training items."""
    min_count: int = Field(2, ge=1)
    """A value becomes a class if at least this many training items have it."""


class AspectPrediction(AspectClassification):
    """Options of ``aspect-predict`` (MADRAL): as aspect-class, each head on its aspect's slot state."""

    aspects: Names = Field(default_factory=lambda: list(DEFAULT_ASPECTS), min_length=1)
    """One classification head per aspect, on that aspect's slot; a backbone without slots gets one per aspect."""
