"""Which examples each step trains on, drawn from the seed alone, and their tensor batch."""

from __future__ import annotations

import random
from typing import Any, Sequence

import torch

from structret.contracts import HasContrastiveInput, Objective, TrainableBackbone
from structret.contracts import check_corrupted
from structret.errors import TrainingError
from structret.recipes import Recipe
from structret.training.examples import Example
from structret.training.objectives import with_role


def _tokenize(backbone: TrainableBackbone, texts: list[str], kind: str, max_length: int) -> dict[str, torch.Tensor]:
    # the backbone's own tokenization (prefixes, linearization, parents), as encode() uses it
    return dict(backbone.tokenize(texts, kind=kind, max_length=max_length))


class Batches:
    """Which examples each step trains on, and their tokenized (or corrupted) batch."""

    def __init__(self, examples: list[Example], recipe: Recipe, backbone: TrainableBackbone, objectives: Sequence[tuple[Objective, float]]):
        self.examples, self.recipe, self.backbone = examples, recipe, backbone
        self.contrastive = with_role(objectives, "contrastive") is not None
        # auxiliary objectives may build per-passage targets from the records (aspect classes)
        self.auxiliary = [o for o, _ in objectives if o.role == "auxiliary"]
        corruption = with_role(objectives, "corruption")
        self.corruption = corruption[0] if corruption else None
        self.steps_per_epoch = len(examples) // recipe.batch_size  # the last partial batch is dropped
        if self.steps_per_epoch == 0:
            raise TrainingError(
                f"{len(examples)} training examples are fewer than one batch of {recipe.batch_size}; "
                f"lower batch_size or add data."
            )
        self.total_steps = recipe.max_steps or recipe.epochs * self.steps_per_epoch
        self._epoch_order: list[int]
        self._epoch, self._epoch_order = -1, []

    def _order(self, epoch: int) -> list[int]:
        if self._epoch != epoch:  # shuffled once per epoch: 250k examples take a while
            self._epoch, self._epoch_order = epoch, list(range(len(self.examples)))
            random.Random(f"{self.recipe.seed}/order/{epoch}").shuffle(self._epoch_order)
        return self._epoch_order

    def picks(self, step: int) -> tuple[int, list[int]]:
        """``(epoch, example indices)`` of the global batch at ``step`` (0-based)."""
        epoch, k = divmod(step, self.steps_per_epoch)
        size = self.recipe.batch_size
        return epoch, self._order(epoch)[k * size:(k + 1) * size]

    def local(self, step: int, rank: int = 0, world: int = 1) -> dict[str, Any]:
        """This process's share of step ``step``: ``query``, ``passage`` (and ``labels``)."""
        recipe = self.recipe
        epoch, picks = self.picks(step)
        share = recipe.batch_size // world
        queries, passages, records, rngs = [], [], [], []
        for index in picks[rank * share:(rank + 1) * share]:
            example = self.examples[index]
            # seeded per example, not per process: 1 or W processes draw and corrupt alike
            rng = random.Random(f"{recipe.seed}/draw/{epoch}/{index}")
            queries.append(rng.choice(example.queries))
            passages.append(rng.choice(example.positives))
            records.append(example.record)
            if recipe.negatives:  # without replacement when there are enough
                pool, k = example.negatives, recipe.negatives
                passages += rng.sample(pool, k) if len(pool) >= k else rng.choices(pool, k=k)
                records += [None] * k
            rngs += [random.Random(f"{recipe.seed}/corrupt/{epoch}/{index}/{j}") for j in range(1 + recipe.negatives)]
        batch: dict[str, Any] = {}
        if self.contrastive:
            batch["query"] = _tokenize(self.backbone, queries, "query", recipe.query_max_len)
        if self.corruption is None:
            batch["passage"] = _tokenize(self.backbone, passages, "document", recipe.passage_max_len)
        else:
            # every passage is corrupted, hard negatives too: masked positives among unmasked
            # negatives would give the contrastive loss a shortcut
            corrupted = self.corruption.corrupt(
                passages, records, self.backbone, max_length=recipe.passage_max_len,
                label_max_length=recipe.label_max_len, rngs=rngs,
            )
            check_corrupted(self.corruption, corrupted, len(passages))
            batch["labels"] = corrupted.pop("labels")
            if (self.contrastive and isinstance(self.corruption, HasContrastiveInput)
                    and self.corruption.contrastive_input == "unmasked"):
                # the LM loss reads the corrupted passage, the contrastive loss the clean one
                batch["corrupted"] = corrupted
                batch["passage"] = _tokenize(self.backbone, passages, "document", recipe.passage_max_len)
            else:
                batch["passage"] = corrupted
        targets = {o.name: t for o in self.auxiliary if (t := o.targets(records)) is not None}
        if targets:
            batch["targets"] = targets
        return batch

