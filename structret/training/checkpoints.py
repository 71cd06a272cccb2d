"""What a run writes: the trained model, checkpoints that resume exactly, and the check that
a resumed run asks for the same computation as the one it continues."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from structret.artifacts import atomic_dir, write_meta
from structret.contracts import TrainableBackbone
from structret.errors import TrainingError
from structret.recipes import Recipe, changed_settings, read_recipe
from structret.training.distributed import all_rng_states, set_rng_state, world

CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
# recipe fields a resumed run may change: they do not touch what is computed
RESUMABLE_CHANGES = {"name", "description", "reproduces", "output", "log_every", "checkpoint_every",
                     "keep_checkpoints", "fusion"}


def model_meta(recipe: Recipe, backbone: TrainableBackbone, base_model: str, step: int) -> dict[str, Any]:
    """``structret.json`` of a saved model: enough to load it again and to know what made it."""
    return {
        "kind": "model",
        "backbone": recipe.backbone,
        "base_model": base_model,
        "dim": backbone.dim,
        "pooling": backbone.pooling,  # declared on structret.contracts.TrainableBackbone
        "normalize": backbone.normalize,
        "objective": recipe.objective,
        "step": step,
        "recipe": recipe.to_dict(),
    }


def save_model(directory: Path, backbone: TrainableBackbone, meta: dict[str, Any]) -> None:
    """The trained model alone: loadable by the backbone (``--backbone B --model DIR``) and transformers."""
    with atomic_dir(directory) as tmp:
        backbone.save_pretrained(tmp)
        write_meta(tmp, meta)


HEADS_FILE = "objective_heads.safetensors"


def save_checkpoint(run: Path, recipe: Recipe, backbone: TrainableBackbone, optimizer: Any, scheduler: Any,
                    meta: dict[str, Any], is_main: bool, heads: nn.Module | None = None, warmup: Any = None) -> None:
    """``run/checkpoint-STEP``: the model, optimizer and schedule, the objectives' ``heads``,
    the LM-head ``warmup`` (structret.training.warmup.LMWarmup: its steps and optimizer) and
    every process's RNG state. Collective: every process calls it; the main one writes."""
    step = meta["step"]
    states = all_rng_states()  # collective: every process calls it
    if is_main:
        with atomic_dir(run / f"checkpoint-{step:06d}") as tmp:
            backbone.save_pretrained(tmp)
            write_meta(tmp, meta)
            (tmp / "trainer").mkdir()
            saved = {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}
            if warmup is not None:
                saved["lm_warmup_optimizer"] = warmup.optimizer.state_dict()
            torch.save(saved, tmp / "trainer" / "optimizer.pt")
            if heads is not None and len(heads.state_dict()):
                from safetensors.torch import save_file

                save_file({k: v.detach().contiguous().cpu() for k, v in heads.state_dict().items()},
                          str(tmp / "trainer" / HEADS_FILE))
            state = {"step": step, "world_size": len(states), "rng": states,
                     "lm_warmup_steps": warmup.steps if warmup is not None else 0}
            (tmp / "trainer" / "state.json").write_text(json.dumps(state), encoding="utf-8")
        if recipe.keep_checkpoints:
            for old in checkpoints(run)[:-recipe.keep_checkpoints]:
                shutil.rmtree(old, ignore_errors=True)


def checkpoints(run: Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    found = [p for p in run.glob("checkpoint-*") if CHECKPOINT.match(p.name) and (p / "trainer" / "state.json").is_file()]
    return sorted(found, key=lambda p: int(cast(re.Match, CHECKPOINT.match(p.name)).group(1)))  # matched above


def saved_warmup_steps(checkpoint: Path) -> int:
    """The LM-head warm-up steps the run that wrote ``checkpoint`` resolved (0 before warm-up existed)."""
    state = json.loads((checkpoint / "trainer" / "state.json").read_text(encoding="utf-8"))
    return int(state.get("lm_warmup_steps", 0))


def load_trainer_state(checkpoint: Path, optimizer: Any, scheduler: Any, heads: nn.ModuleDict | None = None,
                       warmup: Any = None) -> int:
    """Restore what ``save_checkpoint`` wrote (the model is loaded by the backbone); return its step."""
    if heads is not None and len(heads.state_dict()):
        from safetensors.torch import load_file

        file = checkpoint / "trainer" / HEADS_FILE
        if not file.is_file():
            raise TrainingError(f"{checkpoint} has no {HEADS_FILE}, but this run's objectives have heads "
                                f"({', '.join(heads.keys())}); it was written by another recipe.")
        heads.load_state_dict(load_file(str(file)))
    # weights_only: tensors and plain containers only; a checkpoint cannot make us run code
    saved = torch.load(checkpoint / "trainer" / "optimizer.pt", weights_only=True)
    optimizer.load_state_dict(saved["optimizer"])
    scheduler.load_state_dict(saved["scheduler"])
    if warmup is not None and "lm_warmup_optimizer" in saved:
        warmup.optimizer.load_state_dict(saved["lm_warmup_optimizer"])
    state = json.loads((checkpoint / "trainer" / "state.json").read_text(encoding="utf-8"))
    rank, size = world()
    if state["world_size"] != size:
        print(f"warning: {checkpoint} was written by {state['world_size']} process(es) and is resumed by "
              f"{size}: the data order is the same, dropout randomness is not.", file=sys.stderr)
    set_rng_state(state["rng"][rank % len(state["rng"])])
    return int(state["step"])


def check_resumable(run: Path, recipe: Recipe) -> None:
    """Refuse to resume ``run`` with a recipe that computes something else than its saved one."""
    saved_file = run / "recipe.toml"
    if not saved_file.is_file():
        return
    changed = changed_settings(read_recipe(saved_file), recipe, ignore=RESUMABLE_CHANGES)
    if changed:
        listed = ", ".join(f"{k} (saved {a!r}, given {b!r})" for k, a, b in changed)
        raise TrainingError(
            f"cannot resume {run} with a different recipe: {listed}. Resume with the saved recipe "
            f"({saved_file}), or start a new run in another --out directory."
        )
