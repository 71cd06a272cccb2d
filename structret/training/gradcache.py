"""Gradient caching (GradCache; Gao, Zhang, Han and Callan, 2021): a large contrastive batch
in the memory of a small one, with the same gradients.

The contrastive loss scores every query against every passage of the global batch, so it
cannot be split into micro-batches whose gradients are summed. But the loss needs only the
vectors, not the encoder's activations, and the vectors are small. A cached step runs
three passes over chunks of ``grad_cache_chunk`` texts:

1. **encode** every chunk without a graph, remembering the RNG state it started from;
2. **loss**: the contrastive loss on those vectors, gathered from every process exactly as
   the uncached step gathers them, backpropagated down to the vectors only: its gradient
   with respect to each vector is kept (this graph holds no parameter);
3. **replay** each chunk with a graph, from its saved RNG state (dropout draws the same
   masks as in pass 1, so the vectors are the ones the loss saw) and backpropagate the kept
   gradient through it: ``sum(vectors * kept)`` has exactly that gradient, which is what
   ``torch.autograd.backward(vectors, kept)`` would do, as a loss DDP/FSDP can see.

Corruption and auxiliary losses (MEP, span masking, parent-attention, aspect classes) are
means over tokens or rows of the global batch, i.e. sums of per-chunk parts: they need no
cache and are added to each chunk's replay, weighted by the chunk's share of the global
count (counted in pass 1). Only activations of one chunk are alive at a time; the price is
one more forward per text (about +33% compute, forward:backward being 1:2).

Every forward goes through the wrapped module (``TrainStep.forward`` with a ``mode``), so
DDP and FSDP see each one; all replays but the last run under ``no_sync`` and the last one
reduces the summed gradients of the whole step.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any, Iterator, Sequence, cast

import torch

from structret.contracts import check_contrastive_loss
from structret.errors import StructretError
from structret.training.distributed import all_sum, gather, world


class GradCacheError(StructretError):
    """A recipe asks for gradient caching where it cannot work."""


def check(objectives: Sequence[tuple[Any, float]], chunk: int) -> None:
    """Refuse gradient caching where it would only cost time: without a contrastive loss,
    every loss is already a sum over examples, which smaller batches handle as well."""
    if chunk and not any(o.role == "contrastive" for o, _ in objectives):
        names = "+".join(o.name for o, _ in objectives)
        raise GradCacheError(
            f"grad_cache_chunk = {chunk}, but '{names}' has no contrastive objective: gradient caching "
            f"only helps the contrastive loss, which couples every example of the batch. Set "
            f"grad_cache_chunk = 0 and lower batch_size to fit memory."
        )


class RandState:
    """The RNG state a chunk's first encoding started from, so its replay draws the same
    dropout masks (GradCache's RandContext)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.cpu = torch.get_rng_state()
        self.cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None

    @contextlib.contextmanager
    def replay(self) -> Iterator[None]:
        # forked: after the replays the generators are where pass 1 left them, so the
        # next step (and a resumed run) draws the same as without caching
        with torch.random.fork_rng(devices=[self.device] if self.cuda is not None else []):
            torch.set_rng_state(self.cpu)
            if self.cuda is not None:
                torch.cuda.set_rng_state(self.cuda, self.device)
            yield


def _rows(value: Any, start: int, stop: int, where: str) -> Any:
    if isinstance(value, torch.Tensor | list | tuple):
        return value[start:stop]
    if isinstance(value, dict):
        return {k: _rows(v, start, stop, f"{where}.{k}") for k, v in value.items()}
    raise GradCacheError(f"gradient caching splits the batch by rows, but {where} is a {type(value).__name__}; "
                         f"an objective or backbone put it there. Run this recipe with grad_cache_chunk = 0.")


def _count(batch: dict[str, Any]) -> int:
    return len(batch["input_ids"])


@contextlib.contextmanager
def _tallies_kept(objectives: Sequence[tuple[Any, float]]) -> Iterator[None]:
    # pass 1 runs the auxiliary losses only for their counts; what they tally for their
    # report (counts.json) must count each passage once, in the replay
    kept = [(o, copy.copy(o.counts)) for o, _ in objectives]  # counts: declared in structret.contracts
    try:
        yield
    finally:
        for objective, counts in kept:
            objective.counts = counts


def split(batch: dict[str, Any], size: int) -> list[dict[str, Any]]:
    """Chunks of at most ``size`` rows: passages (with their labels and targets), then queries,
    the order the uncached step encodes them, so one chunk of everything draws the same
    dropout masks as no caching at all."""
    if "label_weights" in batch.get("passage", {}):
        raise GradCacheError("this corruption objective normalises its loss over the whole batch (label_weights), "
                             "which chunks cannot split; run it with grad_cache_chunk = 0.")
    chunks: list[dict[str, Any]] = []
    if "passage" in batch:
        for start in range(0, _count(batch["passage"]), size):
            chunks.append({k: _rows(batch[k], start, start + size, k)
                           for k in ("passage", "corrupted", "labels", "targets") if k in batch})
    if "query" in batch:
        for start in range(0, _count(batch["query"]), size):
            chunks.append({"query": _rows(batch["query"], start, start + size, "query")})
    return chunks


def step(module: Any, batch: dict[str, Any], size: int, accelerator: Any) -> dict[str, torch.Tensor]:
    """Forward and backward of one training step in chunks of ``size`` texts; returns the
    logs of ``TrainStep.forward``. Gradients are left in the parameters, reduced over
    processes, exactly as ``accelerator.backward(module(batch)[0])`` leaves them."""
    train_step = accelerator.unwrap_model(module)
    chunks = split(batch, size)

    # 1. vectors, no graph; and how many tokens/rows each other loss counts
    counts: dict[str, torch.Tensor]
    states, vectors, counts = [], [], {}
    with torch.no_grad(), _tallies_kept(train_step.objectives):
        for chunk in chunks:
            states.append(RandState(accelerator.device))
            queries, passages, parts = module(chunk, mode="encode")
            vectors.append(("query", queries) if "query" in chunk else ("passage", passages))
            for name, (_, count) in parts.items():
                counts[name] = counts.get(name, 0) + count
    totals = {name: all_sum(torch.as_tensor(count)) for name, count in sorted(counts.items())}

    # 2. the contrastive loss on the cached vectors, and its gradient w.r.t. each of them
    logs: dict[str, torch.Tensor] = {}
    kept: list[torch.Tensor | None] = [None] * len(chunks)
    if train_step.contrastive is not None:
        objective, weight = train_step.contrastive
        cached = {side: torch.cat([v for s, v in vectors if s == side]).detach().requires_grad_()
                  for side in ("query", "passage")}
        loss = objective.loss(gather(cached["query"]), gather(cached["passage"]))
        check_contrastive_loss(objective, loss)
        # the same world factor as TrainStep.forward: DDP averages the gradients over processes
        (weight / train_step.scale(objective.name) * world()[1] * loss).backward()
        logs[objective.name] = loss.detach()
        # the loss read both sides, so both have a gradient
        grads = {side: iter(cast(torch.Tensor, cached[side].grad).split([len(v) for s, v in vectors if s == side]))
                 for side in cached}
        kept = [next(grads[side]) for side, _ in vectors]

    # 3. replay each chunk with a graph and push the kept gradient through it
    shares: dict[str, torch.Tensor] = {}
    for i, (chunk, state, grad) in enumerate(zip(chunks, states, kept)):
        last = i == len(chunks) - 1  # its backward reduces the whole step's gradients
        with state.replay(), (contextlib.nullcontext() if last else accelerator.no_sync(module)):
            surrogate, parts = module(chunk, mode="replay", grad=grad, totals=totals)
            accelerator.backward(surrogate)
        for name, share in parts.items():
            shares[name] = shares.get(name, 0.0) + share
    for name in sorted(shares):  # collective: the same order on every process
        logs[name] = all_sum(shares[name])
    logs["loss"] = sum(w / train_step.scale(o.name) * logs[o.name] for o, w in train_step.objectives)
    return logs
