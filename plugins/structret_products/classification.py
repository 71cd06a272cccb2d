"""``aspect-class``: MTBERT's auxiliary aspect classification (ATTEMPT's baselines MTBERT, MTBERT-C);
``aspect-predict``: MADRAL's, on the backbone's aspect slots (MADRAL, MADRAL-C).

One linear head per aspect on the pooled passage vector -- the vector retrieval uses (the
paper says "on the CLS"; for a mean-pooled backbone such as MiniLM the pooled vector is its
counterpart) -- predicting the item's value of that aspect as a class id. The value
vocabulary is built from the training items before training (``setup``): values seen at
least ``min_count`` times; rarer values, and items without the aspect, give no target for
that aspect and are counted. An item with several values of one aspect (Debian's debtags
``use::editing, use::viewing``) has a target spread evenly over them, so the loss is the
cross-entropy against that distribution. The loss is a mean over (passage, aspect) pairs
with a target.

An *auxiliary* objective: it runs beside a corruption objective (``mlm+aspect-class`` is
MTBERT), reading the vectors of the same passage forward, one row per passage.

``aspect-predict`` (Kong et al., KDD 2022, "Multi-Aspect Dense Retrieval") is the same
classification with the same vocabulary, targets and counts, but each aspect's head reads
that aspect's own slot state (``backbone.last_aspect_states``, structret_backbones.aspects)
instead of the pooled vector, so the slots learn the aspects and the backbone's fusion
carries them into the vector. A backbone of the hf-encoder family without slots is given
one per aspect (so a recipe's ``aspects`` decides them); slots it already has (a trained
MADRAL model, or ``aspect_slots``) must cover the objective's aspects.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Sequence

import torch
from torch import nn

from structret.plugin import ObjectiveDefaults
from structret.errors import StructretError
from structret.errors import ObjectiveError
from structret.records import ItemRecord

DEFAULT_ASPECTS = ("brand", "color")


class AspectClassification(ObjectiveDefaults):
    name = "aspect-class"
    role = "auxiliary"
    needs = frozenset({"encoder"})

    def __init__(self, aspects: Iterable[str] = DEFAULT_ASPECTS, min_count: int = 2):
        self.aspects = tuple(aspects)
        if not self.aspects:
            raise ObjectiveError(f"{self.name} needs at least one aspect name (recipe field aspects).")
        if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count < 1:
            raise ObjectiveError(f"{self.name}: min_count is a whole number >= 1, not {min_count!r}")
        self.min_count = min_count
        self.values: dict[str, list[str]] = {}
        self.module: nn.ModuleDict | None = None
        self.counts: Counter = Counter()

    def check(self, backbone: Any) -> None:
        if not isinstance(getattr(backbone, "dim", None), int):
            raise ObjectiveError(f"{self.name} needs a backbone with an integer vector size (dim); "
                                 f"'{getattr(backbone, 'name', backbone)}' has none.")

    def setup(self, examples: Sequence[Any], backbone: Any) -> None:
        """The value vocabulary of every aspect, from the training items, and one head each."""
        seen: dict[str, Counter[str]] = {aspect: Counter() for aspect in self.aspects}
        items = [e.record for e in examples if isinstance(e.record, ItemRecord)]
        if not items:
            raise ObjectiveError(f"{self.name}: the training data has no items with aspects (ItemRecord); "
                                 "train it on a product or catalog reader such as esci or debian-packages.")
        for item in items:
            for aspect in self.aspects:
                seen[aspect].update(set(item.aspects.get(aspect, [])))
        self.values = {a: sorted(v for v, n in seen[a].items() if n >= self.min_count) for a in self.aspects}
        empty = [a for a, values in self.values.items() if not values]
        if len(empty) == len(self.aspects):
            raise ObjectiveError(f"{self.name}: no value of {', '.join(self.aspects)} occurs {self.min_count}+ "
                                 f"times in the {len(items)} training items; check the aspect names.")
        self._index = {a: {v: i for i, v in enumerate(values)} for a, values in self.values.items()}
        # deterministic initialisation: a resumed run rebuilds the same heads before loading them
        generator = torch.Generator().manual_seed(0)
        heads = {}
        for aspect, values in self.values.items():
            if values:
                head = nn.Linear(backbone.dim, len(values))
                with torch.no_grad():
                    head.weight.normal_(0.0, 0.02, generator=generator)
                    head.bias.zero_()
                heads[_key(aspect)] = head
        self.module = nn.ModuleDict(heads)
        for aspect, values in self.values.items():
            self.counts[f"classes of {aspect}"] = len(values)

    def targets(self, records: Sequence[Any]) -> dict[str, torch.Tensor]:
        """Per aspect, a [passages, classes] target distribution (a zero row: no target)."""
        out = {}
        for aspect, values in self.values.items():
            if not values:
                continue
            grid = torch.zeros(len(records), len(values))
            for row, record in enumerate(records):
                if not isinstance(record, ItemRecord):
                    continue
                known = [self._index[aspect][v] for v in record.aspects.get(aspect, []) if v in self._index[aspect]]
                if known:
                    grid[row, known] = 1.0 / len(known)
                elif record.aspects.get(aspect):
                    self.counts[f"{aspect}: value too rare for a class"] += 1
                else:
                    self.counts[f"{aspect}: no value"] += 1
            out[_key(aspect)] = grid
        return out

    def loss(self, backbone: Any, passages: Any, vectors: torch.Tensor,
             targets: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        total, pairs = vectors.new_zeros(()), vectors.new_zeros((), dtype=torch.long)
        for aspect in self.values:
            target = targets.get(_key(aspect))
            if target is None:
                continue
            has = target.sum(-1) > 0
            if not has.any():
                continue
            assert self.module is not None  # setup made the heads with the values
            logits = self.module[_key(aspect)](self.features(backbone, vectors, aspect)[has].float())
            total = total + torch.nn.functional.cross_entropy(logits, target[has].to(logits.dtype), reduction="sum")
            pairs = pairs + has.sum()
        self.counts["aspect targets"] += int(pairs)
        if int(pairs) == 0:
            return vectors.sum() * 0.0, pairs
        return total / pairs, pairs

    def features(self, backbone: Any, vectors: torch.Tensor, aspect: str) -> torch.Tensor:
        """What ``aspect``'s head classifies, one row per passage: here the pooled vectors."""
        return vectors

    def __repr__(self) -> str:
        return f"{self.name}(aspects={list(self.aspects)}, min_count={self.min_count})"


class AspectPrediction(AspectClassification):
    """MADRAL's aspect prediction: each aspect's head on that aspect's slot state."""

    name = "aspect-predict"

    def check(self, backbone: Any) -> None:
        super().check(backbone)
        slots = getattr(backbone, "aspect_slots", None)
        if slots is None or not callable(getattr(backbone, "add_aspect_slots", None)):
            raise ObjectiveError(f"{self.name} needs a backbone with aspect slots (hf-encoder, minilm, bert-base: "
                                 f"their aspect_slots option); '{getattr(backbone, 'name', backbone)}' cannot have them.")
        if not slots:
            try:
                backbone.add_aspect_slots(self.aspects)
            except StructretError as exc:
                raise ObjectiveError(f"{self.name}: {exc}") from None
            return
        missing = [a for a in self.aspects if a not in slots]
        if missing:
            raise ObjectiveError(f"{self.name}: the backbone's aspect slots ({', '.join(slots)}) do not cover "
                                 f"{', '.join(missing)}; predict only aspects it has slots for, or start from a "
                                 f"model without slots (aspect-predict then adds one per aspect).")

    def features(self, backbone: Any, vectors: torch.Tensor, aspect: str) -> torch.Tensor:
        states = getattr(backbone, "last_aspect_states", None)
        if states is None or states.shape[0] != vectors.shape[0]:
            raise ObjectiveError(f"{self.name}: the backbone kept no aspect states for this passage batch "
                                 f"(last_aspect_states); it needs aspect slots.")
        return states[:, list(backbone.aspect_slots).index(aspect)]


def _key(aspect: str) -> str:
    return aspect.replace(".", "_")  # ModuleDict keys cannot hold dots


def _names(aspects: Iterable[str] | str) -> Iterable[str]:
    if isinstance(aspects, str):  # "brand,color" from a recipe
        return tuple(a.strip() for a in aspects.split(",") if a.strip()) or DEFAULT_ASPECTS
    return aspects


def aspect_class(aspects: Iterable[str] | str = DEFAULT_ASPECTS, min_count: int = 2) -> AspectClassification:
    """MTBERT's aspect classification on the pooled vector."""
    return AspectClassification(_names(aspects), min_count)


def aspect_predict(aspects: Iterable[str] | str = DEFAULT_ASPECTS, min_count: int = 2) -> AspectPrediction:
    """MADRAL's aspect prediction on the backbone's aspect slots."""
    return AspectPrediction(_names(aspects), min_count)
