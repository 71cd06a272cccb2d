"""The options of ``margin-nce``: declared apart from the objective so that listing or checking
them (``structret plugins --options margin-nce``, a typo in ``--set``) never imports torch."""

from pydantic import Field

from structret.options import Options


class MarginNCE(Options):
    margin: float = Field(0.2, ge=0, lt=2)
    """Subtracted from the positive's cosine before the softmax: the positive must win by this much."""
    scale: float = Field(20.0, gt=0)
    """Cosines are multiplied by it (1 / temperature)."""
