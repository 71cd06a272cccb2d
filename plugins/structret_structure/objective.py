"""``parent-attention``: supervise the informed head with each code token's AST parent.

The trainer has two objective roles. ``contrastive`` scores vectors; ``corruption`` builds
the passage batch with token ``labels`` and gets ``(vector, token loss)`` back from ONE
forward (``backbone.train_forward``), weighting the loss as a token mean over the global
batch. That is exactly this loss's shape, so it takes that role without changing the
trainer: "corrupting" a passage here means linearizing it and labelling every sub-token
with its parent's position (-100 where there is none). The price: it cannot run together
with mep or span-mask (one corruption per run). ``dr+0.5*parent-attention`` is the
paper's informed model.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Sequence

import torch

from structret.recipes import ObjectiveError

IGNORE = -100


class ParentAttention:
    name = "parent-attention"
    role = "corruption"  # see the module docstring: the label-carrying passage path
    needs = frozenset({"structure-attention"})

    def __init__(self):
        self.counts: Counter = Counter()

    def check(self, backbone: Any) -> None:
        capabilities = set(getattr(backbone, "capabilities", ()))
        if not self.needs & capabilities:
            raise ObjectiveError(
                f"{self.name} needs a backbone with an informed attention head (capability "
                f"'structure-attention'), such as informed-transformer; '{backbone.name}' declares only "
                f"{', '.join(sorted(capabilities)) or 'nothing'}."
            )
        config = getattr(backbone, "config", None)
        if getattr(config, "strict", False):
            raise ObjectiveError(
                f"{self.name} has nothing to learn on '{backbone.name}': it is strict, so its informed head "
                f"already is the gold tree. Train it with strict=false, or drop {self.name}."
            )
        if getattr(config, "informed_layers", 1) == 0:
            raise ObjectiveError(f"{self.name}: '{backbone.name}' has informed_layers=0, so no head to supervise.")

    def corrupt(self, texts: Sequence[str], records: Sequence[Any], backbone: Any, *, max_length: int,
                label_max_length: int, rngs: Sequence[random.Random]) -> dict[str, torch.Tensor]:
        """The passages tokenized as code, with ``labels`` = gold parent positions; nothing is
        sampled, so ``rngs`` (and ``label_max_length``: labels align with the input) go unused."""
        languages = [getattr(record, "language", None) or None for record in records]
        batch = backbone.tokenizer.batch(list(texts), kind="document", max_length=max_length, languages=languages)
        parents = batch["parents"]
        self.counts["passages"] += len(texts)
        self.counts["passages without parents"] += int((~(parents >= 0).any(dim=1)).sum())
        batch["labels"] = parents.masked_fill(parents < 0, IGNORE)
        return batch

    def report(self) -> dict[str, int]:
        return dict(self.counts)

    def __repr__(self) -> str:
        return "parent-attention()"


def parent_attention() -> ParentAttention:
    return ParentAttention()
