"""The capability ``structure-attention`` (contracts.CAPABILITIES): what an informed attention
head learns, each token's parent in the structure the linearizer gave (Khan & Jang: the AST).

Core holds it because two plugin kinds meet on it: a backbone that offers the capability and
an objective that trains it. Both reach it through ``structret.plugin``, so the targets and
the loss are defined once. torch is imported with this module, which only those plugins do.

A linearizer gives parents per *word* (AST token); a tokenizer splits words into
sub-tokens. Every sub-token inherits its word's parent, and a parent is the position of
the parent word's FIRST sub-token, so the informed head has exactly one gold key per row.
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F

NO_PARENT = -1


def spread_parents(word_ids: Sequence[int | None], parents: Sequence[int]) -> list[int]:
    """Parents per sub-token from parents per word: the parent word's first sub-token.

    ``word_ids[i]`` is the word sub-token ``i`` came from (None for specials). A parent
    cut off by truncation, or a word without parent, gives ``NO_PARENT``.
    """
    first: dict[int, int] = {}
    for position, word in enumerate(word_ids):
        if word is not None and word not in first:
            first[word] = position
    spread = []
    for word in word_ids:
        parent = parents[word] if word is not None else NO_PARENT
        spread.append(first.get(parent, NO_PARENT) if parent >= 0 else NO_PARENT)
    return spread


def gold_attention(parents: torch.Tensor) -> torch.Tensor:
    """One-hot rows [batch, len, len]: each token's parent, itself when it has none."""
    length = parents.shape[1]
    own = torch.arange(length, device=parents.device).expand_as(parents)
    return F.one_hot(torch.where(parents >= 0, parents, own), length).to(torch.float32)


def parent_attention_loss(attentions: Sequence[torch.Tensor], parents: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, rows)``: the mean over informed layers of the cross-entropy of the informed
    head's attention rows against the gold parents, and how many rows had a parent.

    Rows without a parent (roots, queries, specials, padding) are left out; the count lets
    the trainer weight this process's mean into a mean over the global batch.
    """
    picked = parents >= 0
    rows = picked.sum()
    if not bool(rows):
        return attentions[0].sum() * 0.0, rows  # keeps the graph; a mean over nothing would be nan
    target = parents.clamp(min=0).unsqueeze(-1)
    losses = []
    for attention in attentions:
        on_parent = attention.float().gather(-1, target).squeeze(-1)
        losses.append(-torch.log(on_parent.clamp(min=1e-9))[picked].mean())
    return torch.stack(losses).mean(), rows
