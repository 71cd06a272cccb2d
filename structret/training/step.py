"""One training step: every text encoded once, every objective's loss, one backward."""

from __future__ import annotations

from typing import Any, Sequence, cast

import torch
from torch import nn

from structret.contracts import AuxiliaryObjective, Objective, TrainableBackbone
from structret.training.gradcache import step as cached_step
from structret.contracts import check_auxiliary_loss, check_contrastive_loss
from structret.training.distributed import all_sum, gather, world
from structret.training.objectives import with_role


class TrainStep(nn.Module):
    """Losses of one step. A module, so DDP (through accelerate) wraps the whole step.

    ``module(batch)`` returns ``(loss to backpropagate, {name: global value to log})``;
    ``mode="lm-warmup"`` the same for the corruption loss alone (structret.training.warmup).
    Gradient caching (``structret.training.gradcache``) calls it per chunk instead, through the same
    wrapper so DDP/FSDP see every forward: ``mode="encode"`` gives the chunk's vectors and
    counts, ``mode="replay"`` a loss whose gradient is the chunk's part of the step's.
    """

    def __init__(self, backbone: TrainableBackbone, objectives: Sequence[tuple[Objective, float]],
                 loss_balance: str = "none"):
        super().__init__()
        self.backbone = backbone
        self.net = backbone.training_module  # registers every trainable parameter
        self.objectives = list(objectives)
        self.contrastive = with_role(objectives, "contrastive")
        self.corruption = with_role(objectives, "corruption")
        # the role says which Protocol an objective keeps (contracts: rule objective-role, checked when made)
        self.auxiliary = [(cast(AuxiliaryObjective, o), w) for o, w in objectives if o.role == "auxiliary"]
        # objectives' own trainable parts (classification heads): trained, synced and
        # checkpointed with the backbone, but not part of the saved model
        self.heads = nn.ModuleDict({o.name: o.module for o, _ in objectives if isinstance(o.module, nn.Module)})
        if loss_balance == "initial":  # kept with the heads, so a resumed run divides by the same values
            self.heads[BALANCE] = LossScales([o.name for o, _ in objectives])
        elif loss_balance != "none":
            raise ValueError(f"loss_balance {loss_balance!r}: use 'none' or 'initial'")

    def scale(self, name: str) -> torch.Tensor | float:
        """What ``name``'s loss is divided by before its weight applies (1 without loss_balance)."""
        return cast(LossScales, self.heads[BALANCE]).of(name) if BALANCE in self.heads else 1.0

    def note_losses(self, logs: dict[str, torch.Tensor]) -> None:
        """After a joint step: with loss_balance = initial, the first step's losses become the scales."""
        if BALANCE in self.heads:
            cast(LossScales, self.heads[BALANCE]).note(logs)

    def _encode(self, batch: dict[str, Any]) -> tuple[Any, Any, dict[str, tuple[torch.Tensor, torch.Tensor]]]:
        """``(query vectors, passage vectors, {objective: (this process's mean loss, count)})``
        for the corruption and auxiliary objectives; each side only if the batch has it."""
        queries = passages = None
        parts: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        if "corrupted" in batch:  # contrastive_input = unmasked: the LM loss from its own forward first
            assert self.corruption is not None  # only a corruption objective makes a corrupted batch
            _, lm_loss = self.backbone.train_forward(batch["corrupted"], batch["labels"])
            assert lm_loss is not None  # given labels, train_forward gives the LM loss (TrainableBackbone)
            parts[self.corruption[0].name] = (lm_loss, _count(batch))
            passages = self.backbone.embed(batch["passage"], kind="document")  # last: auxiliaries read it
        elif "passage" in batch:
            labels = batch.get("labels")
            passages, lm_loss = self.backbone.train_forward(batch["passage"], labels)  # the one passage forward
            if self.corruption is not None:
                assert lm_loss is not None  # a corruption objective's batch has labels
                parts[self.corruption[0].name] = (lm_loss, _count(batch))
        if "passage" in batch:
            assert passages is not None  # both branches above encode a passage batch
            for objective, _ in self.auxiliary:
                targets = batch.get("targets", {}).get(objective.name)
                parts[objective.name] = check_auxiliary_loss(
                    objective, objective.loss(self.backbone, batch["passage"], passages, targets))
        if "query" in batch and self.contrastive is not None:
            queries = self.backbone.embed(batch["query"], kind="query")
        return queries, passages, parts

    def _shares(self, parts: dict[str, tuple[torch.Tensor, torch.Tensor]], totals: dict[str, torch.Tensor],
                anchor: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The corruption and auxiliary terms: this process's part of each mean over the global
        batch, its mean times its share of the counted tokens (rows), so every process (and
        every chunk of it) adds up to the same global mean; and those parts, to log."""
        _, size = world()
        total = anchor.new_zeros(())
        shares: dict[str, torch.Tensor] = {}
        for objective, weight in filter(None, [self.corruption, *self.auxiliary]):
            if objective.name not in parts:  # a query chunk of gradient caching
                continue
            loss, count = parts[objective.name]
            # a mean of nothing is nan; the anchor keeps the graph (and DDP's view of it) whole
            share = loss * (count / totals[objective.name].clamp(min=1)) if count > 0 else anchor.sum() * 0.0
            shares[objective.name] = share.detach()
            total = total + weight / self.scale(objective.name) * size * share  # DDP averages over processes
        return total, shares

    def _lm_warmup(self, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """LM-head warm-up (structret.training.warmup): the corruption loss alone, unweighted."""
        assert self.corruption is not None  # a warm-up is planned only with a corruption objective
        objective, _ = self.corruption
        _, size = world()
        _, lm_loss = self.backbone.train_forward(_lm_batch(batch), batch["labels"])
        assert lm_loss is not None  # given labels, train_forward gives the LM loss
        count = _count(batch)
        # as in _shares; a mean of nothing is nan, and the frozen encoder leaves no other graph
        share = (lm_loss * (count / all_sum(count).clamp(min=1)) if count > 0
                 else lm_loss.nan_to_num(0.0) * 0.0)
        value = all_sum(share.detach())
        return size * share, {objective.name: value, "loss": value}  # DDP averages gradients over processes

    def forward(self, batch: dict[str, Any], mode: str = "step", grad: torch.Tensor | None = None,
                totals: dict[str, torch.Tensor] | None = None) -> Any:
        if mode == "lm-warmup":
            return self._lm_warmup(batch)
        if mode == "encode":
            return self._encode(batch)
        if mode == "replay":
            queries, passages, parts = self._encode(batch)
            vectors = queries if passages is None else passages
            total, shares = self._shares(parts, totals or {}, vectors)
            if grad is not None:  # the cached contrastive gradient of these very vectors
                total = total + (vectors * grad.to(vectors.dtype)).sum()
            return total, shares
        if mode != "step":
            raise ValueError(f"TrainStep mode {mode!r}: use 'step', 'lm-warmup' (structret.training.warmup), "
                             f"or 'encode'/'replay' (structret.training.gradcache)")
        _, size = world()
        queries, passages, parts = self._encode(batch)
        total, logs = self._shares(parts, {name: all_sum(count) for name, (_, count) in parts.items()}, passages)
        logs = {name: all_sum(share) for name, share in logs.items()}
        if self.contrastive is not None:
            objective, weight = self.contrastive
            loss = objective.loss(gather(queries), gather(passages))
            check_contrastive_loss(objective, loss)
            logs[objective.name] = loss.detach()
            total = total + weight / self.scale(objective.name) * size * loss  # DDP averages over processes
        # a run has at least one objective: a tensor, never sum()'s 0
        logs["loss"] = cast(torch.Tensor, sum(w / self.scale(o.name) * logs[o.name] for o, w in self.objectives))
        return total, logs


BALANCE = "_loss_balance"  # its key among the heads; objective names are plugin names, never "_..."


class LossScales(nn.Module):
    """loss_balance = initial: each objective's loss at the first joint step (buffers, so they are
    checkpointed with the heads; set from the global logged values, so equal on every process)."""

    scales: torch.Tensor  # the buffers registered in __init__
    known: torch.Tensor

    def __init__(self, names: Sequence[str]):
        super().__init__()
        self.names = list(names)
        self.register_buffer("scales", torch.ones(len(self.names)))
        self.register_buffer("known", torch.zeros((), dtype=torch.bool))

    def of(self, name: str) -> torch.Tensor:
        return self.scales[self.names.index(name)]

    def note(self, logs: dict[str, torch.Tensor]) -> None:
        if bool(self.known):
            return
        with torch.no_grad():
            for i, name in enumerate(self.names):
                value = float(logs[name])
                # a loss that starts at 0 (or nan) stays unscaled rather than dividing by it
                self.scales[i] = value if value > 1e-6 and value == value else 1.0
            self.known.fill_(True)


def parameter_groups(parameters: Any, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW groups of the trainable ``parameters``: biases and norm scales are not decayed
    (the Hugging Face Trainer convention)."""
    trained = [p for p in parameters if p.requires_grad]
    return [{"params": [p for p in trained if p.ndim >= 2], "weight_decay": weight_decay},
            {"params": [p for p in trained if p.ndim < 2], "weight_decay": 0.0}]


def _lm_batch(batch: dict[str, Any]) -> dict[str, Any]:
    """The passage batch the LM loss reads: the corrupted one, apart when the contrastive loss
    reads the clean passage (contrastive_input = unmasked)."""
    return batch.get("corrupted", batch["passage"])


def _count(batch: dict[str, Any]) -> torch.Tensor:
    """How many label tokens this process's corruption loss is a mean over. With
    label_weights the objective normalised its loss itself (per view, per process), so
    processes count one each and the global loss is their mean."""
    labels = batch["labels"]
    return labels.new_ones(()) if "label_weights" in _lm_batch(batch) else (labels != -100).sum()


def forward_backward(module: nn.Module, batch: dict[str, Any], accelerator: Any, grad_cache_chunk: int = 0
                     ) -> dict[str, torch.Tensor]:
    """One step's forward and backward; the gradients are left in the parameters, reduced
    over processes. ``grad_cache_chunk``: the same gradients, in chunks (structret.training.gradcache)."""
    if grad_cache_chunk:
        return cached_step(module, batch, grad_cache_chunk, accelerator)
    loss, logs = module(batch)
    accelerator.backward(loss)
    return logs
