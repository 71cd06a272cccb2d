"""LM-head warm-up: steps before a run's own in which only the LM head trains.

A corruption objective (``mep``, ``span-mask``, ``mlm``, ``aspect-mlm``) trains the backbone
through an LM head. When the checkpoint has no weights for that head (MiniLM and other
sentence encoders ship without one), the head starts random, its loss is ~ln(vocabulary),
and its gradients flow into the encoder and swamp every other objective. Warm-up trains the
head alone first. The objective's ``lm_warmup`` options (``structret.options.LMWarmupOptions``)
say how many steps; ``auto`` asks the backbone whether its head is new (``lm_head_is_new``,
set by ``enable_lm`` from the keys the checkpoint lacked).

During the warm-up steps:

- **Only the head trains.** Every other parameter (encoder, a tied output matrix, which is
  the input embedding, objectives' own heads) has ``requires_grad`` off, so no gradient is
  computed for it, and its ``.grad`` is set to None after the backward (DDP may have
  written zeros), so no optimizer touches it: torch's AdamW skips parameters without a
  gradient, so neither weight decay nor momentum moves them.
- **Only the corruption loss counts**; contrastive and auxiliary losses are not computed.
- **Their own optimizer** (AdamW over the head, constant ``lm_warmup_lr``, the recipe's
  weight decay and ``max_grad_norm``). The run's optimizer and schedule are untouched: the
  run's ``max_steps``/``epochs``, lr warm-up and decay begin after the warm-up, whose steps
  come on top. Warm-up step ``k`` trains on the batch of the run's step ``k``.
- **Step numbers are global**: a run with W warm-up steps and T steps of its own has steps
  1..W+T in metrics.jsonl (rows of the warm-up have ``"phase": "lm-warmup"``, the others
  ``"train"``; the last warm-up row carries ``lm_warmup_seconds``), checkpoints and the
  progress bar.
- **Resume is exact**: a checkpoint records the number of warm-up steps the run resolved
  (``auto`` would resolve differently on reload, since the checkpoint now holds the head)
  and the warm-up optimizer's state.
- **DDP**: the step is the usual one reduced to the corruption term, with the same world-size
  scaling. **Gradient caching**: warm-up steps run uncached (there is no contrastive loss to
  cache, and a frozen encoder keeps no activations for the backward).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
from torch import nn
from tqdm.auto import tqdm

from structret.contracts import (HasLmHeadIsNew, HasLmHeadParameters, HasLmWarmupOptions, Objective,
                                 TrainableBackbone)
from structret.errors import TrainingError
from structret.training.objectives import with_role
from structret.training.step import parameter_groups


@dataclass
class LMWarmup:
    """The warm-up of one run: ``steps`` steps training ``head`` with ``optimizer`` while
    ``frozen`` (every other trainable parameter) has no gradient."""

    steps: int
    objective: str
    lr: float
    head: list[nn.Parameter]
    frozen: list[nn.Parameter]
    optimizer: Any
    losses: list[float] = field(default_factory=list)  # of the steps this process ran (since it started or resumed)
    started: float = 0.0

    def begin(self, start: int, why: str, loud: bool) -> None:
        """Freeze everything but the head (at the first warm-up step, or on resuming inside the
        warm-up); ``loud``: say so on stderr (the main process)."""
        for p in self.frozen:
            p.requires_grad_(False)
        self.started = time.perf_counter()
        if loud:
            print(f"lm warm-up: {self.objective}'s LM head alone for steps {start + 1}..{self.steps} "
                  f"(encoder frozen, lr {self.lr:g}; {why}), then the run's own steps", file=sys.stderr)

    def end(self, loud: bool) -> None:
        """Unfreeze, and say what the warm-up cost (``loud``: on stderr)."""
        for p in self.frozen:
            p.requires_grad_(True)
        if not loud:
            return
        trend = f", {self.objective} loss {self.losses[0]:.3f} -> {self.losses[-1]:.3f}" if self.losses else ""
        # the progress bar is live: written above it, not through it
        tqdm.write(f"lm warm-up done: {len(self.losses)} steps in {self.seconds():.1f} s{trend}", file=sys.stderr)

    def seconds(self) -> float:
        """Wall time of the warm-up steps this process ran (batches and checkpoints included)."""
        return time.perf_counter() - self.started

    def step(self, module: nn.Module, batch: dict[str, Any], accelerator: Any, max_grad_norm: float
             ) -> dict[str, torch.Tensor]:
        """One warm-up step: forward and backward of the corruption loss, then the head's update."""
        loss, logs = module(batch, mode="lm-warmup")
        accelerator.backward(loss)
        for p in self.frozen:
            p.grad = None
        if max_grad_norm:
            accelerator.clip_grad_norm_(self.head, max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.losses.append(float(logs["loss"]))
        return logs


def planned_steps(objectives: Sequence[tuple[Objective, float]], backbone: TrainableBackbone, saved: int | None) -> tuple[int, str]:
    """``(steps, why)``: how many warm-up steps this run has. ``saved``: what the checkpoint a
    run resumes from recorded (it wins: ``auto`` would now find the checkpoint's head)."""
    corruption = with_role(objectives, "corruption")
    options = corruption[0].lm_warmup_options if corruption and isinstance(corruption[0], HasLmWarmupOptions) else None
    if saved is not None:
        return saved, "as the run being resumed resolved it"
    if options is None:
        return 0, "the objective has no lm_warmup"
    if options.lm_warmup != "auto":
        return options.lm_warmup, f"lm_warmup = {options.lm_warmup}"
    if isinstance(backbone, HasLmHeadIsNew) and backbone.lm_head_is_new:
        return options.lm_warmup_auto_steps, (f"lm_warmup = auto: {backbone.name} has no weights for its LM head, "
                                              f"so it starts random")
    return 0, "lm_warmup = auto: the checkpoint has its LM head"


def prepare(objectives: Sequence[tuple[Objective, float]], backbone: TrainableBackbone, step_module: nn.Module,
            weight_decay: float, saved: int | None) -> tuple[LMWarmup | None, str]:
    """The run's warm-up (None: none) and why; call after the run's optimizer is built, with
    every trainable parameter still trainable."""
    steps, why = planned_steps(objectives, backbone, saved)
    if not steps:
        return None, why
    corruption = with_role(objectives, "corruption")
    assert corruption is not None  # a run whose steps include a warm-up has a corruption objective
    objective = corruption[0]
    options = objective.lm_warmup_options if isinstance(objective, HasLmWarmupOptions) else None
    assert options is not None  # planned_steps found steps in its options
    lists = isinstance(backbone, HasLmHeadParameters)
    head = list(backbone.lm_head_parameters()) if isinstance(backbone, HasLmHeadParameters) else []
    if not head:
        what = ("declares no lm_head_parameters()" if not lists
                else "has no LM-head parameters of its own (its output matrix is the tied input embedding)")
        if saved is None and options.lm_warmup == "auto":
            return None, f"lm_warmup = auto, but backbone '{backbone.name}' {what}"
        raise TrainingError(f"{objective.name}: LM-head warm-up ({why}), but backbone '{backbone.name}' {what}, "
                            f"so there is nothing to warm up. Set {objective.name}.lm_warmup = 0.")
    ids = {id(p) for p in head}
    frozen = [p for p in step_module.parameters() if p.requires_grad and id(p) not in ids]
    lr = options.lm_warmup_lr
    optimizer = torch.optim.AdamW(parameter_groups(head, weight_decay), lr=lr)  # grouped as the run's own
    return LMWarmup(steps, objective.name, lr, head, frozen, optimizer), why
