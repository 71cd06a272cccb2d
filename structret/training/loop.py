"""``train()``: the loop, top to bottom -- set up, then for each step: batch, forward and
backward, optimizer, log, checkpoint; then the final model."""

from __future__ import annotations

import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from tqdm.auto import tqdm

from structret.contracts import HasEntityExtractors, check_needs, run_check
from structret.datasets import parse_data_spec
from structret.errors import ArtifactError, TrainingError
from structret.linearization import TextFormat
from structret.models import TrainedModel, open_model, trained_model
from structret.recipes import Recipe, write_recipe
from structret.registry import get_registry
from structret.training.gradcache import check as check_grad_cache
from structret.training.batches import Batches
from structret.training.checkpoints import (
    check_resumable,
    checkpoints,
    load_trainer_state,
    model_meta,
    save_checkpoint,
    save_model,
    saved_warmup_steps,
)
from structret.training.distributed import make_accelerator
from structret.training.examples import load_examples
from structret.training.objectives import build_objectives, with_role
from structret.training.step import TrainStep, forward_backward, parameter_groups
from structret.training import warmup as lm_warmup


def _to(batch: Any, device: torch.device) -> Any:
    if isinstance(batch, dict):
        return {k: _to(v, device) for k, v in batch.items()}
    return batch.to(device) if isinstance(batch, torch.Tensor) else batch


def make_optimizer(groups: list[dict[str, Any]], lr: float) -> torch.optim.Optimizer:
    """AdamW, fused into one kernel per step where torch has one for the parameters' device: on
    MiniLM (22M parameters) 50 ms a step instead of 250 on 2 CPU cores (docs/performance.md)."""
    devices = {p.device.type for group in groups for p in group["params"]}
    return torch.optim.AdamW(groups, lr=lr, fused=devices <= {"cpu", "cuda"} or None)


def create_backbone(recipe: Recipe, weights: str | Path | TrainedModel | None = None, *, verify: bool = True) -> Any:
    """The recipe's backbone, with its options, and the weights of ``weights`` (a checkpoint the caller
    has checked: resume) or else of ``recipe.model``: a hub id, a folder, or a run of structret train
    (its final weights, checked here unless ``verify`` is False). Through ``open_model``, as every
    command opens a model, but the recipe's backbone wins over the run's."""
    options = recipe.options(get_registry().get("backbone", recipe.backbone).name)
    if weights is not None and not isinstance(weights, TrainedModel):  # checked by the caller: not hashed again
        weights = TrainedModel(recipe.backbone, str(weights), {}, {})
    return open_model(recipe.backbone, weights if weights is not None else recipe.model, options, verify=verify,
                      weights_only=True).backbone


def _text_format(recipe: Recipe) -> TextFormat:
    if not recipe.text_format:
        return TextFormat()
    return TextFormat(recipe.text_format, recipe.options(get_registry().get("linearizer", recipe.text_format).name))


def _data_options(recipe: Recipe) -> dict[str, Any]:
    return recipe.options(get_registry().get("dataset", parse_data_spec(recipe.data)[0]).name)


def train(recipe: Recipe, *, resume: bool = False,
          callback: Callable[[int, dict[str, float]], None] | None = None, verify: bool = True) -> Path:
    """Train as ``recipe`` says; return the directory of the final model (``OUTPUT/final``).

    A corruption objective may first train its LM head alone (``structret.training.warmup``):
    those steps come before the recipe's own and are counted with them.

    ``resume=True`` continues from the newest checkpoint in ``recipe.output`` (or starts
    afresh if there is none). ``callback(step, logs)`` runs after every step, after that
    step's checkpoint is written. ``verify=False`` uses the checkpoint, or a run given as
    ``recipe.model``, even if its files do not match its checksums.json (a warning says so).
    """
    from transformers import get_linear_schedule_with_warmup

    if not recipe.data:
        raise TrainingError("no training data: pass --data FORMAT:PATH (e.g. codesearchnet:train.jsonl.gz) "
                            "or --data tevatron:train.jsonl")
    if not recipe.output:
        raise TrainingError("no run directory: pass --out DIR (checkpoints, metrics and the model go there)")
    run = Path(recipe.output)
    found = checkpoints(run) if run.is_dir() else []
    if found and not resume:
        raise TrainingError(f"{run} already holds checkpoints ({found[-1].name}); pass --resume to continue "
                            f"that run, or choose another --out directory.")
    if resume and (run / "final" / "structret.json").is_file():
        raise TrainingError(f"{run} has finished (its model is in {run / 'final'}); there is nothing to resume. "
                            f"Choose another --out directory to train again.")
    checkpoint = found[-1] if resume and found else None
    resumed: TrainedModel | str | None = None
    if checkpoint is not None:
        check_resumable(run, recipe)
        try:
            resumed = trained_model(str(checkpoint), verify=verify) or str(checkpoint)  # checked here, once
        except ArtifactError as exc:  # the message says which checkpoint to delete and what resumes then
            raise TrainingError(str(exc)) from None

    accelerator = make_accelerator(recipe)
    rank, world = accelerator.process_index, accelerator.num_processes
    if recipe.batch_size % world:
        raise TrainingError(f"batch_size {recipe.batch_size} is the global batch and must divide evenly "
                            f"over {world} processes.")
    random.seed(recipe.seed)
    np.random.seed(recipe.seed)
    torch.manual_seed(recipe.seed)  # the same fresh heads on every process

    objectives = build_objectives(recipe)
    check_grad_cache(objectives, recipe.grad_cache_chunk)
    backbone = create_backbone(recipe, resumed, verify=verify)
    base_model = (json.loads((checkpoint / "structret.json").read_text(encoding="utf-8"))["base_model"]
                  if checkpoint is not None else backbone.name)
    for objective, _ in objectives:
        run_check(objective, backbone)  # the objective's own sentence first, then the declared needs
        check_needs(objective, backbone)
    if with_role(objectives, "corruption"):
        backbone.enable_lm()
    examples, stats = load_examples(recipe.data, recipe.split, _text_format(recipe), _data_options(recipe))
    if accelerator.is_main_process:
        print(stats.summary(), file=sys.stderr)
    if recipe.negatives:
        without = sum(1 for e in examples if not e.negatives)
        if without == len(examples):
            raise TrainingError(f"negatives = {recipe.negatives}, but {recipe.data} has no hard negatives "
                                f"(Tevatron-format lines carry them in negative_passages).")
        examples = [e for e in examples if e.negatives]
        if without and accelerator.is_main_process:
            print(f"{without} examples without hard negatives left out", file=sys.stderr)
    for objective, _ in objectives:
        objective.setup(examples, backbone)  # e.g. value vocabularies of aspect classification
    batches = Batches(examples, recipe, backbone, objectives)
    own = batches.total_steps  # the run's own steps; LM-head warm-up steps come before them

    step_module = TrainStep(backbone, objectives, recipe.loss_balance)
    optimizer = make_optimizer(parameter_groups(step_module.parameters(), recipe.weight_decay), recipe.lr)
    scheduler = get_linear_schedule_with_warmup(optimizer, math.ceil(recipe.warmup * own), own)
    warm, why = lm_warmup.prepare(objectives, backbone, step_module, recipe.weight_decay,
                                  saved_warmup_steps(checkpoint) if checkpoint is not None else None)
    head_steps = warm.steps if warm is not None else 0
    total = head_steps + own
    # the schedule is not prepared: accelerate would step it once per process, and our
    # steps are already global
    module, optimizer = accelerator.prepare(step_module, optimizer)
    if warm is not None:
        warm.optimizer = accelerator.prepare(warm.optimizer)
    backbone.device = accelerator.device
    start = (load_trainer_state(checkpoint, optimizer, scheduler, step_module.heads, warm)
             if checkpoint is not None else 0)
    if checkpoint is not None and accelerator.is_main_process:
        # steps past the checkpoint are redone: the user sees how much a crash cost
        print(f"resuming from {checkpoint.name} (step {start} of {total})", file=sys.stderr)

    metrics = run / "metrics.jsonl"
    if accelerator.is_main_process:
        run.mkdir(parents=True, exist_ok=True)
        write_recipe(recipe, run / "recipe.toml")
        kept = []
        if start and metrics.is_file():  # rows past the checkpoint belong to the interrupted attempt
            kept = [line for line in metrics.read_text(encoding="utf-8").splitlines()
                    if line.strip() and json.loads(line)["step"] <= start]
        metrics.write_text("".join(line + "\n" for line in kept), encoding="utf-8")

    if warm is not None and start < head_steps:  # head_steps > 0 only with a warm-up
        warm.begin(start, why, accelerator.is_main_process)
    elif warm is None and with_role(objectives, "corruption") and accelerator.is_main_process:
        print(f"lm warm-up: none ({why})", file=sys.stderr)
    module.train()
    bar = tqdm(total=total, initial=start, desc="training", unit="step", disable=not accelerator.is_main_process)
    sums: dict[str, float] = {}
    since, clock = 0, time.perf_counter()
    for step in range(start, total):
        warming = step < head_steps
        own_step = step if warming else step - head_steps  # warm-up step k trains on the batch of step k
        batch = _to(batches.local(own_step, rank, world), accelerator.device)
        if warming:
            assert warm is not None  # head_steps > 0 only with a warm-up
            logs = warm.step(module, batch, accelerator, recipe.max_grad_norm)
        else:
            logs = forward_backward(module, batch, accelerator, recipe.grad_cache_chunk)
            step_module.note_losses(logs)
            if recipe.max_grad_norm:
                accelerator.clip_grad_norm_(module.parameters(), recipe.max_grad_norm)
            optimizer.step()
            step_lr = scheduler.get_last_lr()[0]  # the rate this step used (after it, the next one's: 0 at the end)
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
        done = step + 1

        values = {k: float(v) for k, v in logs.items()}
        for k, v in values.items():
            sums[k] = sums.get(k, 0.0) + v
        since += 1
        if done % recipe.log_every == 0 or done in (total, head_steps):
            elapsed = time.perf_counter() - clock
            row = {"step": done, "phase": "lm-warmup" if warming else "train",
                   "epoch": own_step // batches.steps_per_epoch,
                   "lr": warm.lr if warming and warm is not None else step_lr,
                   "loss": sums.pop("loss") / since, **{f"loss/{k}": s / since for k, s in sums.items()},
                   "examples_per_s": since * recipe.batch_size / elapsed}
            if warming and done == head_steps:
                assert warm is not None
                row["lm_warmup_seconds"] = warm.seconds()
            if accelerator.is_main_process:
                with metrics.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(row) + "\n")
            bar.set_postfix(loss=f"{row['loss']:.4f}", ex_s=f"{row['examples_per_s']:.1f}")
            sums, since, clock = {}, 0, time.perf_counter()
        bar.update(1)
        if recipe.checkpoint_every and done % recipe.checkpoint_every == 0 and done < total:
            meta = model_meta(recipe, backbone, base_model, done)
            save_checkpoint(run, recipe, backbone, optimizer, scheduler, meta, accelerator.is_main_process,
                            step_module.heads, warm)
            accelerator.wait_for_everyone()
        if warming and done == head_steps:
            assert warm is not None
            warm.end(accelerator.is_main_process)
        if callback is not None:
            callback(done, values)
    bar.close()

    final = run / "final"
    if accelerator.is_main_process:
        meta = model_meta(recipe, backbone, base_model, total)
        # the extractors whose entities the model learned to predict: structret serve marks those
        entities = {}
        for o, _ in objectives:
            if isinstance(o, HasEntityExtractors):
                entities.update(o.entity_extractors())
        if entities:
            meta["entities"] = entities
        save_model(final, backbone, meta)
        # what corruption objectives masked and skipped (this process's batches, since start or resume)
        counts = {o.name: report for o, _ in objectives if (report := o.report())}
        if counts:
            (run / "counts.json").write_text(json.dumps(counts, indent=2), encoding="utf-8")
            for name, c in counts.items():
                print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in c.items()), file=sys.stderr)
    accelerator.wait_for_everyone()
    return final
