"""``parent-attention``: supervise the informed head with each code token's AST parent.

An *auxiliary* objective: it adds no input of its own. The passage batch the backbone
tokenized already carries each sub-token's gold ``parents`` (a backbone with capability
``structure-attention`` linearizes documents), and the passage forward the contrastive
loss needs leaves the informed head's attention in ``backbone.last_attention``; this
loss reads both. ``dr+0.5*parent-attention`` is the paper's informed model.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch

from structret.plugin import ObjectiveDefaults
from structret.plugin import parent_attention_loss
from structret.errors import ObjectiveError


class ParentAttention(ObjectiveDefaults):
    name = "parent-attention"
    role = "auxiliary"
    needs = frozenset({"structure-attention"})

    def __init__(self):
        self.counts: Counter = Counter()

    def check(self, backbone: Any) -> None:
        capabilities = set(getattr(backbone, "capabilities", ()))
        if not self.needs & capabilities:
            raise ObjectiveError(
                f"{self.name} needs a backbone with an informed attention head (capability "
                f"'structure-attention'): informed-transformer, or hf-encoder/minilm with "
                f"--backbone-option informed_layers=1; '{backbone.name}' declares only "
                f"{', '.join(sorted(capabilities)) or 'nothing'}."
            )
        if getattr(backbone, "strict", False):
            raise ObjectiveError(
                f"{self.name} has nothing to learn on '{backbone.name}': it is strict, so its informed head "
                f"already is the gold tree. Train it with strict=false, or drop {self.name}."
            )
        if getattr(backbone, "informed_layers", 1) == 0:
            raise ObjectiveError(f"{self.name}: '{backbone.name}' has informed_layers=0, so no head to supervise.")

    def loss(self, backbone: Any, passages: dict[str, torch.Tensor], vectors: torch.Tensor | None = None,
             targets: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mean loss, rows)`` over this process's passage rows that have a parent."""
        parents = passages.get("parents")
        if parents is None:
            raise ObjectiveError(
                f"{self.name}: the passage batch has no gold parents. Corruption objectives (mep, span-mask) "
                f"tokenize passages their own way, without parents; run {self.name} with a contrastive "
                f"objective only (e.g. dr+0.5*{self.name})."
            )
        self.counts["passages"] += int(parents.shape[0])
        self.counts["passages without parents"] += int((~(parents >= 0).any(dim=1)).sum())
        return parent_attention_loss(backbone.last_attention, parents)

    def __repr__(self) -> str:
        return "parent-attention()"


def parent_attention() -> ParentAttention:
    return ParentAttention()
