"""Options of this package's plugins (margin-nce, regex-identifiers, identifier-overlap), declared
apart from their code so that listing or checking them (``structret plugins --options margin-nce``,
a typo in ``--set``) never imports torch."""

from pydantic import Field

from structret.plugin import Options


class MarginNCE(Options):
    margin: float = Field(0.2, ge=0, lt=2)
    """Subtracted from the positive's cosine before the softmax: the positive must win by this much."""
    scale: float = Field(20.0, gt=0)
    """Cosines are multiplied by it (1 / temperature)."""


class RegexIdentifiers(Options):
    min_length: int = Field(1, ge=0)
    """Identifiers shorter than this many characters are left out."""


class IdentifierOverlap(Options):
    extractor: str = "regex-identifiers"
    """The registered extractor whose identifiers are split into sub-tokens and matched."""
