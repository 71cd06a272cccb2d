"""Contrastive objectives: every query scored against every passage of the global batch.

The trainer gathers vectors from all processes before calling ``loss``, so in-batch
negatives are global; the loss itself is the same on one process or many.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.nn.functional as F

from structret.plugin import ObjectiveDefaults
from structret.errors import ObjectiveError

SIMILARITIES = ("dot", "cos")


class Contrastive(ObjectiveDefaults):
    """Cross-entropy over scores of each query against all passages (SANTA Eq. 3 and 5).

    ``passages`` holds ``g`` rows per query: its positive, then its hard negatives (if
    any); every other query's rows are negatives too.
    """

    role = "contrastive"
    needs = frozenset({"encoder"})  # any one of these capabilities

    def __init__(self, name: str, similarity: str = "dot", temperature: float = 1.0):
        if similarity not in SIMILARITIES:
            raise ObjectiveError(f"{name}: similarity={similarity!r} is not supported; choose one of {', '.join(SIMILARITIES)}")
        if not temperature > 0:
            raise ObjectiveError(f"{name}: temperature must be positive, got {temperature}")
        self.name = name
        self.similarity = similarity
        self.temperature = temperature

    def check(self, backbone: Any) -> None:
        capabilities = set(getattr(backbone, "capabilities", ()))
        if not self.needs & capabilities:
            raise ObjectiveError(
                f"{self.name} needs a backbone that encodes texts to vectors (capability 'encoder'); "
                f"'{backbone.name}' declares only {', '.join(sorted(capabilities)) or 'nothing'}."
            )
        if self.similarity == "dot" and self.temperature == 1.0 and getattr(backbone, "normalize", False):
            warnings.warn(
                f"{self.name}: '{backbone.name}' gives unit vectors, so raw dot products lie in [-1, 1] and "
                f"the softmax over them is nearly flat. Set similarity = \"cos\" and temperature = 0.05 "
                f"(or so), or use the backbone with normalize=False.",
                stacklevel=2,
            )

    def loss(self, queries: torch.Tensor, passages: torch.Tensor) -> torch.Tensor:
        if passages.shape[0] % queries.shape[0]:
            raise ValueError(f"{passages.shape[0]} passages cannot be split into groups for {queries.shape[0]} queries")
        group = passages.shape[0] // queries.shape[0]
        queries, passages = queries.float(), passages.float()  # scores in fp32 even under autocast
        if self.similarity == "cos":
            queries, passages = F.normalize(queries, dim=-1), F.normalize(passages, dim=-1)
        scores = queries @ passages.T / self.temperature
        target = torch.arange(queries.shape[0], device=scores.device) * group
        return F.cross_entropy(scores, target)

    def __repr__(self) -> str:
        return f"{self.name}(similarity={self.similarity!r}, temperature={self.temperature})"


def sda(similarity: str = "dot", temperature: float = 1.0) -> Contrastive:
    """Structured data alignment: docstring/bullet point vs. code/description (SANTA 3.2.1)."""
    return Contrastive("sda", similarity, temperature)


def dr(similarity: str = "dot", temperature: float = 1.0) -> Contrastive:
    """Dense retrieval fine-tuning: the same loss on query-document pairs with hard negatives."""
    return Contrastive("dr", similarity, temperature)
