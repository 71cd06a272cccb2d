"""The trainer: weighted objectives over one backbone, one loop, checkpoints that resume exactly.

One module per job, each readable alone: ``examples`` (training pairs as texts) ->
``objectives`` (the recipe's losses, checked to fit together) -> ``batches`` (the examples
of a step and their tensors) -> ``step`` (each text encoded once; ``gradcache`` for large
batches; ``warmup`` for a fresh LM head) -> ``loop`` (``train()``: optimizer, schedule, logs, checkpoints). ``distributed``
holds the process helpers, ``checkpoints`` what a run writes and how it resumes.

- **Global batches.** ``batch_size`` is the global batch. Step ``s`` of epoch ``e`` takes
  the ``s``-th slice of a permutation seeded by ``(seed, e)``; process ``r`` of ``W`` takes
  the ``r``-th part of that slice. The data order depends on nothing but the seed, so a
  run can resume at any step, and 1 process or W processes see the same examples.
- **Global negatives.** Query and passage vectors are gathered from every process, the
  local tensors put back in place so their gradients flow, and every process computes the
  same global loss. DDP then averages gradients over processes, so the loss is scaled by
  the number of processes to get back the gradient of the global loss (as Tevatron does).
- **One forward per passage.** With a corruption objective (MEP, span masking) the
  passage batch is the corrupted passage plus labels; ``backbone.train_forward`` returns
  its vector and its LM loss from a single forward (SANTA's combined step). Auxiliary
  objectives (parent-attention) read what that same forward left behind.
- **Gradient caching.** With ``grad_cache_chunk`` the same step runs in chunks of texts
  (``structret.training.gradcache``, GradCache): the same gradients, the activations of one chunk.
- **LM-head warm-up.** A corruption objective's head that starts random is trained alone
  first, the encoder frozen (``warmup``; the objective's ``lm_warmup`` options).
- **Exact resume.** A checkpoint holds the model (a plain Hugging Face checkpoint), the
  optimizer and schedule, every process's RNG states and the step; resuming gives the
  same weights as a run that never stopped (on CPU, same number of processes).
"""

from structret.contracts import ROLES
from structret.errors import TrainingError
from structret.training.batches import Batches
from structret.training.checkpoints import (
    RESUMABLE_CHANGES,
    check_resumable,
    checkpoints,
    load_trainer_state,
    model_meta,
    save_checkpoint,
    save_model,
)
from structret.training.distributed import all_sum, gather, make_accelerator, world
from structret.training.examples import Example, examples_from_dataset, load_examples
from structret.training.gradcache import GradCacheError
from structret.training.loop import create_backbone, train
from structret.training.objectives import build_objectives
from structret.training.step import TrainStep, forward_backward

__all__ = [
    "Batches", "Example", "GradCacheError", "RESUMABLE_CHANGES", "ROLES", "TrainStep", "TrainingError",
    "all_sum", "build_objectives", "check_resumable", "checkpoints", "create_backbone", "examples_from_dataset",
    "forward_backward", "gather", "load_examples", "load_trainer_state", "make_accelerator", "model_meta",
    "save_checkpoint", "save_model", "train", "world",
]
