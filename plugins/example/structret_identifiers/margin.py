"""An objective of our own: in-batch contrastive loss with an additive margin (AM-Softmax, as in
Yang et al. 2019, "Improving Multilingual Sentence Embedding using Bi-directional Dual Encoder
with Additive Margin Softmax"). Each query's positive must beat every other passage of the global
batch by ``margin`` in cosine, not just by a hair.
"""

import torch
import torch.nn.functional as F

from structret.plugin import ObjectiveDefaults


class MarginNCE(ObjectiveDefaults):  # the defaults: no setup, no targets, no heads, empty report
    name = "margin-nce"
    role = "contrastive"       # the trainer hands loss() the gathered query and passage vectors
    needs = frozenset({"encoder"})

    def __init__(self, margin: float = 0.2, scale: float = 20.0):
        self.margin, self.scale = margin, scale

    def check(self, backbone) -> None:
        if "encoder" not in backbone.capabilities:
            from structret.errors import ObjectiveError

            raise ObjectiveError(f"margin-nce needs a backbone that encodes texts; '{backbone.name}' does not")

    def loss(self, queries: torch.Tensor, passages: torch.Tensor) -> torch.Tensor:
        # passages: each query's positive first, then its hard negatives (if any)
        group = passages.shape[0] // queries.shape[0]
        scores = F.normalize(queries.float(), dim=-1) @ F.normalize(passages.float(), dim=-1).T
        target = torch.arange(queries.shape[0], device=scores.device) * group
        margins = torch.zeros_like(scores)
        margins[torch.arange(queries.shape[0]), target] = self.margin
        return F.cross_entropy(self.scale * (scores - margins), target)  # the mean over the global batch

    def __repr__(self) -> str:
        return f"margin-nce(margin={self.margin}, scale={self.scale})"
