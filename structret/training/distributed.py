"""The processes of a run: who am I, gathering and summing over processes, the accelerator,
and every process's RNG state (saved in checkpoints, so a resumed run draws the same)."""

from __future__ import annotations

import logging
import os
import random
from typing import Any, cast

import numpy as np
import torch
import torch.distributed as dist

from structret.precision import autocast_faster

log = logging.getLogger("structret.train")


def world() -> tuple[int, int]:
    """``(rank, world size)``; ``(0, 1)`` outside a distributed run."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def gather(tensor: torch.Tensor) -> torch.Tensor:
    """All processes' rows, in rank order; only this process's rows carry gradients."""
    rank, size = world()
    if size == 1:
        return tensor
    parts = [torch.empty_like(tensor) for _ in range(size)]
    dist.all_gather(parts, tensor.contiguous())
    parts[rank] = tensor  # all_gather's copy has no graph; put the live tensor back
    return torch.cat(parts)


def all_sum(tensor: torch.Tensor) -> torch.Tensor:
    """Sum over processes of a detached tensor."""
    if world()[1] > 1:
        tensor = tensor.detach().clone()
        dist.all_reduce(tensor)
    return tensor


def bf16_training(dtype: str) -> bool:
    """Whether a recipe's ``dtype`` trains under bf16 autocast: "auto" as structret.precision measured."""
    if dtype != "auto":
        return dtype == "bf16"

    bf16 = torch.cuda.is_bf16_supported() if torch.cuda.is_available() else autocast_faster()
    log.info("dtype=auto trains in %s", "bf16" if bf16 else "fp32")
    return bf16


def make_accelerator(recipe: Any) -> Any:
    """One process, or one of the processes ``accelerate launch`` / ``torchrun`` started."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState
    from accelerate.utils import DistributedDataParallelKwargs

    precision = "bf16" if bf16_training(recipe.dtype) else "no"
    state = AcceleratorState._shared_state
    if state and str(state.get("_mixed_precision", precision)) != precision:
        # accelerate keeps one precision per process and refuses another; a second run in the same
        # process (a notebook: fp32, then bf16) starts its state afresh, the process group kept
        AcceleratorState._reset_state(reset_partial_state=False)
    return Accelerator(
        # torchrun on a machine without CUDA: accelerate runs gloo over CPU processes only
        # when told so, and would otherwise start N unrelated single-process runs
        cpu=not torch.cuda.is_available() and int(os.environ.get("WORLD_SIZE", "1")) > 1,
        mixed_precision=precision,
        # pooler layers and the like get no gradient; DDP must not wait for them
        kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)],
    )


def rng_state() -> dict[str, Any]:
    # JSON, not pickle: a checkpoint is data, and loading it must never run code
    version, internal, gauss = random.getstate()
    # legacy (the default): the tuple; numpy's stub types the call without arguments as the dict
    np_state = cast("tuple[str, np.ndarray, int, int, float]", np.random.get_state())
    return {
        "python": [version, list(internal), gauss],
        "numpy": [np_state[0], np_state[1].tolist(), int(np_state[2]), int(np_state[3]), float(np_state[4])],
        "torch": torch.get_rng_state().tolist(),
        "cuda": [s.tolist() for s in torch.cuda.get_rng_state_all()] if torch.cuda.is_available() else [],
    }


def set_rng_state(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([torch.tensor(s, dtype=torch.uint8) for s in state["cuda"]])


def all_rng_states() -> list[dict[str, Any]]:
    state = rng_state()
    if world()[1] == 1:
        return [state]
    states: list[Any] = [None] * world()[1]
    dist.all_gather_object(states, state)
    return states

