"""The trainer: weighted objectives over one backbone, one loop, checkpoints that resume exactly.

Read it top to bottom: training examples -> the batches of a step -> the step (each text
encoded once) -> the loop (optimizer, schedule, logs, checkpoints).

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
  (``structret.gradcache``, GradCache): the same gradients, the activations of one chunk.
- **Exact resume.** A checkpoint holds the model (a plain Hugging Face checkpoint), the
  optimizer and schedule, every process's RNG states and the step; resuming gives the
  same weights as a run that never stopped (on CPU, same number of processes).
"""

from __future__ import annotations

import gzip
import json
import math
import os
import random
import re
import shutil
import sys
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from tqdm.auto import tqdm

from structret import gradcache
from structret.artifacts import atomic_dir, verify_checksums, write_meta
from structret.errors import ArtifactError, DataError, StructretError
from structret.linearization import TextFormat
from structret.recipes import (
    ObjectiveError,
    Recipe,
    changed_settings,
    parse_objectives,
    read_recipe,
    write_recipe,
)
from structret.records import ItemRecord, ReadStats
from structret.registry import get_registry

TEVATRON = "tevatron"
CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
# recipe fields a resumed run may change: they do not touch what is computed
RESUMABLE_CHANGES = {"name", "description", "reproduces", "output", "log_every", "checkpoint_every",
                     "keep_checkpoints"}


class TrainingError(StructretError):
    """A run cannot start or continue as asked."""


# --- training examples -------------------------------------------------------------------


@dataclass
class Example:
    """One training pair. Alternatives are drawn per epoch with a seeded RNG: SANTA's
    product query is one random bullet point, Tevatron lines may list several positives."""

    queries: list[str]
    positives: list[str]
    negatives: list[str] = field(default_factory=list)
    record: Any = None  # the positive's Record, so MEP knows what kind of text it masks


def _passage(entry: Any) -> str | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("text"), str):
        return None
    title = entry.get("title") if isinstance(entry.get("title"), str) else ""
    text = f"{title} {entry['text']}".strip() if title.strip() else entry["text"].strip()
    return text or None


def read_training_pairs(path: str, max_field_chars: int | None = None) -> tuple[list[Example], ReadStats]:
    """Tevatron training lines (``.jsonl`` or ``.jsonl.gz``), one query per line::

        {"query_id": "q1", "query": "...", "positive_passages": [{"docid": "d1", "title": "", "text": "..."}],
         "negative_passages": [{"docid": "d7", "title": "", "text": "..."}]}

    A malformed line is skipped and counted (with file:line), never fatal; so is a line whose
    query or one passage is longer than ``max_field_chars`` (default: the readers' MAX_FIELD_CHARS).
    """
    from structret.records import MAX_FIELD_CHARS

    limit = max_field_chars or MAX_FIELD_CHARS
    file = Path(path)
    if not file.is_file():
        raise DataError(f"{TEVATRON}: {path} does not exist; pass a .jsonl(.gz) file of Tevatron training lines.")
    stats = ReadStats(source=f"{TEVATRON} {path}")
    examples: list[Example] = []
    opener = gzip.open if file.name.endswith(".gz") else open
    lineno = 0
    try:
        # surrogateescape: a line that is not UTF-8 is skipped below, not the whole file lost
        with opener(file, "rt", encoding="utf-8", errors="surrogateescape") as lines:
            for lineno, line in enumerate(lines, 1):
                where = f"{file.name}:{lineno}"
                if not line.strip():
                    continue
                if not line.isascii():
                    try:
                        line.encode("utf-8")
                    except UnicodeEncodeError:
                        stats.skip(where, "undecodable bytes")
                        continue
                try:
                    row = json.loads(line)
                except (json.JSONDecodeError, RecursionError):  # RecursionError: nested thousands deep
                    stats.skip(where, "not JSON")
                    continue
                if not isinstance(row, dict):
                    stats.skip(where, "not a JSON object")
                    continue
                query = row.get("query")
                if not isinstance(query, str) or not query.strip():
                    stats.skip(where, "missing or empty 'query'")
                    continue
                wrong = next((k for k in ("positive_passages", "negative_passages")
                              if not isinstance(row.get(k) or [], list)), None)
                if wrong:  # a passage list that is a string, a number, an object ...
                    stats.skip(where, f"'{wrong}' is not a list")
                    continue
                positives = [p for p in map(_passage, row.get("positive_passages") or []) if p]
                if not positives:
                    stats.skip(where, "no positive passage with text")
                    continue
                negatives = [p for p in map(_passage, row.get("negative_passages") or []) if p]
                texts = [("query", query)] + [("positive_passages", p) for p in positives] + \
                        [("negative_passages", n) for n in negatives]
                big = next(((key, len(text)) for key, text in texts if len(text) > limit), None)
                if big:
                    stats.skip(where, f"field '{big[0]}' over max_field_chars={limit}", f"{big[1]:,} chars")
                    continue
                stats.use()
                examples.append(Example([query.strip()], positives, negatives))
    except (OSError, EOFError, zlib.error) as exc:  # a .gz that is not gzip, truncated or corrupt
        raise DataError(
            f"{TEVATRON}: cannot read {path} at line {lineno + 1} ({exc}); the file is truncated or corrupt. "
            f"Write it again (e.g. rerun 'structret negatives'), or cut it before that line."
        ) from None
    return examples, stats


def examples_from_dataset(dataset: Any, text_format: TextFormat | None = None) -> list[Example]:
    """Aligned pairs (code search: docstring -> code), else judged queries (a query -> its
    relevant documents), else products with bullet points (SANTA's pretraining: a random
    bullet point -> the product's title and description). Texts are what ``text_format``
    makes of the records, exactly what retrieval will encode."""
    fmt = text_format or TextFormat()
    if dataset.pairs:
        return [
            Example([fmt.query(dataset.queries[q])], [fmt.document(dataset.corpus[d])], record=dataset.corpus[d])
            for q, d in dataset.pairs
        ]
    judged = [q for q in dataset.queries if dataset.qrels.get(q)]
    if judged:
        # judged queries (ESCI, BEIR): each query -> its relevant documents, and for graded
        # labels only the top one (ESCI's Exact: SANTA's fine-tuning positives)
        threshold = max(dataset.labels) if dataset.labels else 1
        examples = []
        for q in judged:
            positives = [d for d, level in dataset.qrels[q].items() if level >= threshold and d in dataset.corpus]
            if not positives:
                dataset.stats.leave_out("query without a relevant document to train on")
                continue
            examples.append(Example([fmt.query(dataset.queries[q])], [fmt.document(dataset.corpus[d]) for d in positives],
                                    record=dataset.corpus[positives[0]]))
        return examples
    items = [r for r in dataset.corpus.values() if isinstance(r, ItemRecord)]
    examples = [Example(list(r.bullets), [fmt.document(r)], record=r) for r in items if r.bullets]
    if items:
        dataset.stats.leave_out("item without bullet points (no aligned text to train on)", len(items) - len(examples))
        return examples
    raise DataError(
        f"{dataset.name}: this dataset has no aligned (text, document) pairs to train on. Train on "
        f"code-search data (codesearchnet, adv), products with bullet points (esci), or write "
        f"Tevatron training lines and pass --data {TEVATRON}:train.jsonl."
    )


def load_examples(spec: str, split: str | None = None, text_format: TextFormat | None = None,
                  options: dict[str, Any] | None = None) -> tuple[list[Example], ReadStats]:
    """``tevatron:PATH`` (texts as written) or any registered ``FORMAT:PATH``."""
    from structret.data import load_dataset, require

    if spec.startswith(f"{TEVATRON}:"):
        return read_training_pairs(spec[len(TEVATRON) + 1:])
    dataset = load_dataset(spec, split=split, options=options)
    require(dataset, "documents", "queries", spec=spec, split=split)
    return examples_from_dataset(dataset, text_format), dataset.stats


# --- objectives --------------------------------------------------------------------------


def build_objectives(recipe: Recipe) -> list[tuple[Any, float]]:
    """The recipe's objectives, each with its options (the recipe's table for it)."""
    registry = get_registry()
    built = []
    for name, weight in parse_objectives(recipe.objective):
        built.append((registry.create("objective", name, **recipe.options(registry.get("objective", name).name)),
                      weight))
    for objective, _ in built:
        if objective.role not in ROLES:
            raise ObjectiveError(f"objective '{objective.name}' has role {objective.role!r}; the trainer knows "
                                 f"{', '.join(ROLES)} (see structret.hookspecs.register_objectives).")
    alone = [o.name for o, _ in built if getattr(o, "standalone", False)]
    if alone and len(built) > 1:
        raise ObjectiveError(f"'{recipe.objective}': {alone[0]} turns each passage into several rows, so it runs "
                             f"alone (pretraining); fine-tune with a contrastive objective in a second run.")
    for role in ("contrastive", "corruption"):
        same = [o.name for o, _ in built if o.role == role]
        if len(same) > 1:
            why = ("each corrupts the passage its own way, and the passage is encoded once"
                   if role == "corruption" else "they would score the same pairs twice")
            raise ObjectiveError(f"'{recipe.objective}' combines {' and '.join(same)}: at most one {role} "
                                 f"objective per run ({why}).")
    return built


ROLES = ("contrastive", "corruption", "auxiliary")


def _role(objectives: Sequence[tuple[Any, float]], role: str) -> tuple[Any, float] | None:
    return next(((o, w) for o, w in objectives if o.role == role), None)


# --- batches -----------------------------------------------------------------------------


def _tokenize(backbone: Any, texts: list[str], kind: str, max_length: int) -> dict[str, torch.Tensor]:
    # the backbone's own tokenization (prefixes, linearization, parents), as encode() uses it
    return dict(backbone.tokenize(texts, kind=kind, max_length=max_length))


class Batches:
    """Which examples each step trains on, and their tokenized (or corrupted) batch."""

    def __init__(self, examples: list[Example], recipe: Recipe, backbone: Any, objectives: Sequence[tuple[Any, float]]):
        self.examples, self.recipe, self.backbone = examples, recipe, backbone
        self.contrastive = _role(objectives, "contrastive") is not None
        # auxiliary objectives that need per-passage targets from the records (aspect classes)
        self.targeted = [o for o, _ in objectives if o.role == "auxiliary" and hasattr(o, "targets")]
        corruption = _role(objectives, "corruption")
        self.corruption = corruption[0] if corruption else None
        self.steps_per_epoch = len(examples) // recipe.batch_size  # the last partial batch is dropped
        if self.steps_per_epoch == 0:
            raise TrainingError(
                f"{len(examples)} training examples are fewer than one batch of {recipe.batch_size}; "
                f"lower batch_size or add data."
            )
        self.total_steps = recipe.max_steps or recipe.epochs * self.steps_per_epoch
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
            batch["labels"] = corrupted.pop("labels")
            batch["passage"] = corrupted
        if self.targeted:
            batch["targets"] = {o.name: o.targets(records) for o in self.targeted}
        return batch


# --- the step ----------------------------------------------------------------------------


def _world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def gather(tensor: torch.Tensor) -> torch.Tensor:
    """All processes' rows, in rank order; only this process's rows carry gradients."""
    rank, world = _world()
    if world == 1:
        return tensor
    parts = [torch.empty_like(tensor) for _ in range(world)]
    dist.all_gather(parts, tensor.contiguous())
    parts[rank] = tensor  # all_gather's copy has no graph; put the live tensor back
    return torch.cat(parts)


def all_sum(tensor: torch.Tensor) -> torch.Tensor:
    """Sum over processes of a detached tensor."""
    if _world()[1] > 1:
        tensor = tensor.detach().clone()
        dist.all_reduce(tensor)
    return tensor


class TrainStep(nn.Module):
    """Losses of one step. A module, so DDP (through accelerate) wraps the whole step.

    ``module(batch)`` returns ``(loss to backpropagate, {name: global value to log})``.
    Gradient caching (``structret.gradcache``) calls it per chunk instead, through the same
    wrapper so DDP/FSDP see every forward: ``mode="encode"`` gives the chunk's vectors and
    counts, ``mode="replay"`` a loss whose gradient is the chunk's part of the step's.
    """

    def __init__(self, backbone: Any, objectives: Sequence[tuple[Any, float]]):
        super().__init__()
        self.backbone = backbone
        self.net = backbone.training_module  # registers every trainable parameter
        self.objectives = list(objectives)
        self.contrastive = _role(objectives, "contrastive")
        self.corruption = _role(objectives, "corruption")
        self.auxiliary = [(o, w) for o, w in objectives if o.role == "auxiliary"]
        # objectives' own trainable parts (classification heads): trained, synced and
        # checkpointed with the backbone, but not part of the saved model
        self.heads = nn.ModuleDict({o.name: o.module for o, _ in objectives
                                    if isinstance(getattr(o, "module", None), nn.Module)})

    def _encode(self, batch: dict[str, Any]) -> tuple[Any, Any, dict[str, tuple[torch.Tensor, torch.Tensor]]]:
        """``(query vectors, passage vectors, {objective: (this process's mean loss, count)})``
        for the corruption and auxiliary objectives; each side only if the batch has it."""
        queries = passages = None
        parts: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        if "passage" in batch:
            labels = batch.get("labels")
            passages, lm_loss = self.backbone.train_forward(batch["passage"], labels)  # the one passage forward
            if self.corruption is not None:
                # label_weights: the objective normalised its loss itself (per view, per process),
                # so processes count one each and the global loss is their mean
                count = labels.new_ones(()) if "label_weights" in batch["passage"] else (labels != -100).sum()
                parts[self.corruption[0].name] = (lm_loss, count)
            for objective, _ in self.auxiliary:
                targets = batch.get("targets", {}).get(objective.name)
                parts[objective.name] = objective.loss(self.backbone, batch["passage"], passages, targets)
        if "query" in batch and self.contrastive is not None:
            queries = self.backbone.embed(batch["query"], kind="query")
        return queries, passages, parts

    def _shares(self, parts: dict[str, tuple[torch.Tensor, torch.Tensor]], totals: dict[str, torch.Tensor],
                anchor: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The corruption and auxiliary terms: this process's part of each mean over the global
        batch, its mean times its share of the counted tokens (rows), so every process (and
        every chunk of it) adds up to the same global mean; and those parts, to log."""
        _, world = _world()
        total = anchor.new_zeros(())
        shares: dict[str, torch.Tensor] = {}
        for objective, weight in filter(None, [self.corruption, *self.auxiliary]):
            if objective.name not in parts:  # a query chunk of gradient caching
                continue
            loss, count = parts[objective.name]
            # a mean of nothing is nan; the anchor keeps the graph (and DDP's view of it) whole
            share = loss * (count / totals[objective.name].clamp(min=1)) if count > 0 else anchor.sum() * 0.0
            shares[objective.name] = share.detach()
            total = total + weight * world * share  # DDP averages gradients over processes
        return total, shares

    def forward(self, batch: dict[str, Any], mode: str = "step", grad: torch.Tensor | None = None,
                totals: dict[str, torch.Tensor] | None = None) -> Any:
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
            raise ValueError(f"TrainStep mode {mode!r}: use 'step', or 'encode'/'replay' (structret.gradcache)")
        _, world = _world()
        queries, passages, parts = self._encode(batch)
        total, logs = self._shares(parts, {name: all_sum(count) for name, (_, count) in parts.items()}, passages)
        logs = {name: all_sum(share) for name, share in logs.items()}
        if self.contrastive is not None:
            objective, weight = self.contrastive
            loss = objective.loss(gather(queries), gather(passages))
            logs[objective.name] = loss.detach()
            total = total + weight * world * loss  # DDP averages gradients over processes
        logs["loss"] = sum(w * logs[o.name] for o, w in self.objectives)
        return total, logs


# --- checkpoints -------------------------------------------------------------------------


def _rng_state() -> dict[str, Any]:
    # JSON, not pickle: a checkpoint is data, and loading it must never run code
    version, internal, gauss = random.getstate()
    np_state = np.random.get_state()
    return {
        "python": [version, list(internal), gauss],
        "numpy": [np_state[0], np_state[1].tolist(), int(np_state[2]), int(np_state[3]), float(np_state[4])],
        "torch": torch.get_rng_state().tolist(),
        "cuda": [s.tolist() for s in torch.cuda.get_rng_state_all()] if torch.cuda.is_available() else [],
    }


def _set_rng_state(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([torch.tensor(s, dtype=torch.uint8) for s in state["cuda"]])


def _all_rng_states() -> list[dict[str, Any]]:
    state = _rng_state()
    if _world()[1] == 1:
        return [state]
    states: list[Any] = [None] * _world()[1]
    dist.all_gather_object(states, state)
    return states


def model_meta(recipe: Recipe, backbone: Any, base_model: str, step: int) -> dict[str, Any]:
    """``structret.json`` of a saved model: enough to load it again and to know what made it."""
    return {
        "kind": "model",
        "backbone": recipe.backbone,
        "base_model": base_model,
        "dim": backbone.dim,
        "pooling": getattr(backbone, "pooling", "first-decoder-position"),
        "normalize": getattr(backbone, "normalize", False),
        "objective": recipe.objective,
        "step": step,
        "recipe": recipe.to_dict(),
    }


def save_model(directory: Path, backbone: Any, meta: dict[str, Any]) -> None:
    """The trained model alone: loadable by the backbone (``--backbone B --model DIR``) and transformers."""
    with atomic_dir(directory) as tmp:
        backbone.save_pretrained(tmp)
        write_meta(tmp, meta)


HEADS_FILE = "objective_heads.safetensors"


def save_checkpoint(run: Path, recipe: Recipe, backbone: Any, optimizer: Any, scheduler: Any,
                    meta: dict[str, Any], is_main: bool, heads: nn.Module | None = None) -> None:
    step = meta["step"]
    states = _all_rng_states()  # collective: every process calls it
    if is_main:
        with atomic_dir(run / f"checkpoint-{step:06d}") as tmp:
            backbone.save_pretrained(tmp)
            write_meta(tmp, meta)
            (tmp / "trainer").mkdir()
            torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()},
                       tmp / "trainer" / "optimizer.pt")
            if heads is not None and len(heads.state_dict()):
                from safetensors.torch import save_file

                save_file({k: v.detach().contiguous().cpu() for k, v in heads.state_dict().items()},
                          str(tmp / "trainer" / HEADS_FILE))
            state = {"step": step, "world_size": len(states), "rng": states}
            (tmp / "trainer" / "state.json").write_text(json.dumps(state), encoding="utf-8")
        if recipe.keep_checkpoints:
            for old in checkpoints(run)[:-recipe.keep_checkpoints]:
                shutil.rmtree(old, ignore_errors=True)


def checkpoints(run: Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    found = [p for p in run.glob("checkpoint-*") if CHECKPOINT.match(p.name) and (p / "trainer" / "state.json").is_file()]
    return sorted(found, key=lambda p: int(CHECKPOINT.match(p.name).group(1)))


def load_trainer_state(checkpoint: Path, optimizer: Any, scheduler: Any, heads: nn.Module | None = None) -> int:
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
    state = json.loads((checkpoint / "trainer" / "state.json").read_text(encoding="utf-8"))
    rank, world = _world()
    if state["world_size"] != world:
        print(f"warning: {checkpoint} was written by {state['world_size']} process(es) and is resumed by "
              f"{world}: the data order is the same, dropout randomness is not.", file=sys.stderr)
    _set_rng_state(state["rng"][rank % len(state["rng"])])
    return int(state["step"])


# --- the loop ----------------------------------------------------------------------------


def _check_resumable(run: Path, recipe: Recipe) -> None:
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


def _parameter_groups(module: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    # biases and norm scales are not decayed (the Hugging Face Trainer convention)
    decay = [p for p in module.parameters() if p.requires_grad and p.ndim >= 2]
    rest = [p for p in module.parameters() if p.requires_grad and p.ndim < 2]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def _to(batch: Any, device: torch.device) -> Any:
    if isinstance(batch, dict):
        return {k: _to(v, device) for k, v in batch.items()}
    return batch.to(device) if isinstance(batch, torch.Tensor) else batch


def create_backbone(recipe: Recipe, weights: str | Path | None = None, *, verify: bool = True) -> Any:
    """The recipe's backbone with ``weights``, a checkpoint the caller has checked (resume), or
    else with ``recipe.model``, which may be a run directory or checkpoint: checked here, unless
    ``verify`` is False."""
    from structret.retrieval import trained_model

    model = str(weights) if weights is not None else recipe.model
    trained = trained_model(model, verify=verify) if model and weights is None else None
    if trained is not None:  # --model RUN (or a checkpoint): continue from its saved model
        model = trained[1]
    registry = get_registry()
    options = recipe.options(registry.get("backbone", recipe.backbone).name)
    return registry.create("backbone", recipe.backbone, **({"model": model} if model else {}), **options)


def _text_format(recipe: Recipe) -> TextFormat:
    if not recipe.text_format:
        return TextFormat()
    return TextFormat(recipe.text_format, recipe.options(get_registry().get("linearizer", recipe.text_format).name))


def _data_options(recipe: Recipe) -> dict[str, Any]:
    from structret.data import parse_data_spec

    fmt = parse_data_spec(recipe.data)[0]
    return recipe.options(get_registry().get("dataset", fmt).name) if get_registry().has("dataset", fmt) else {}


def forward_backward(module: nn.Module, batch: dict[str, Any], accelerator: Any, grad_cache_chunk: int = 0
                     ) -> dict[str, torch.Tensor]:
    """One step's forward and backward; the gradients are left in the parameters, reduced
    over processes. ``grad_cache_chunk``: the same gradients, in chunks (structret.gradcache)."""
    if grad_cache_chunk:
        return gradcache.step(module, batch, grad_cache_chunk, accelerator)
    loss, logs = module(batch)
    accelerator.backward(loss)
    return logs


def make_accelerator(recipe: Recipe) -> Any:
    """One process, or one of the processes ``accelerate launch`` / ``torchrun`` started."""
    from accelerate import Accelerator
    from accelerate.utils import DistributedDataParallelKwargs

    return Accelerator(
        # torchrun on a machine without CUDA: accelerate runs gloo over CPU processes only
        # when told so, and would otherwise start N unrelated single-process runs
        cpu=not torch.cuda.is_available() and int(os.environ.get("WORLD_SIZE", "1")) > 1,
        mixed_precision="bf16" if recipe.dtype == "bf16" else "no",
        # pooler layers and the like get no gradient; DDP must not wait for them
        kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)],
    )


def train(recipe: Recipe, *, resume: bool = False,
          callback: Callable[[int, dict[str, float]], None] | None = None, verify: bool = True) -> Path:
    """Train as ``recipe`` says; return the directory of the final model (``OUTPUT/final``).

    ``resume=True`` continues from the newest checkpoint in ``recipe.output`` (or starts
    afresh if there is none). ``callback(step, logs)`` runs after every step, after that
    step's checkpoint is written. ``verify=False`` uses the checkpoint, or a run given as
    ``recipe.model``, even if its files do not match its checksums.json (a warning says so).
    """
    from transformers import get_linear_schedule_with_warmup

    if not recipe.data:
        raise TrainingError(f"no training data: pass --data FORMAT:PATH (e.g. codesearchnet:train.jsonl.gz) "
                            f"or --data {TEVATRON}:train.jsonl")
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
    if checkpoint is not None:
        _check_resumable(run, recipe)
        try:
            verify_checksums(checkpoint, verify=verify)
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
    gradcache.check(objectives, recipe.grad_cache_chunk)
    backbone = create_backbone(recipe, checkpoint, verify=verify)
    base_model = (json.loads((checkpoint / "structret.json").read_text(encoding="utf-8"))["base_model"]
                  if checkpoint is not None else backbone.name)
    for objective, _ in objectives:
        objective.check(backbone)
    if _role(objectives, "corruption"):
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
        if hasattr(objective, "setup"):  # e.g. value vocabularies of aspect classification
            objective.setup(examples, backbone)
    batches = Batches(examples, recipe, backbone, objectives)
    total = batches.total_steps

    step_module = TrainStep(backbone, objectives)
    optimizer = torch.optim.AdamW(_parameter_groups(step_module, recipe.weight_decay), lr=recipe.lr)
    scheduler = get_linear_schedule_with_warmup(optimizer, math.ceil(recipe.warmup * total), total)
    # the schedule is not prepared: accelerate would step it once per process, and our
    # steps are already global
    module, optimizer = accelerator.prepare(step_module, optimizer)
    backbone.device = accelerator.device
    start = load_trainer_state(checkpoint, optimizer, scheduler, step_module.heads) if checkpoint is not None else 0
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

    module.train()
    bar = tqdm(total=total, initial=start, desc="training", unit="step", disable=not accelerator.is_main_process)
    sums: dict[str, float] = {}
    since, clock = 0, time.perf_counter()
    for step in range(start, total):
        batch = _to(batches.local(step, rank, world), accelerator.device)
        logs = forward_backward(module, batch, accelerator, recipe.grad_cache_chunk)
        if recipe.max_grad_norm:
            accelerator.clip_grad_norm_(module.parameters(), recipe.max_grad_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        done = step + 1

        values = {k: float(v) for k, v in logs.items()}
        for k, v in values.items():
            sums[k] = sums.get(k, 0.0) + v
        since += 1
        if done % recipe.log_every == 0 or done == total:
            elapsed = time.perf_counter() - clock
            row = {"step": done, "epoch": step // batches.steps_per_epoch, "lr": scheduler.get_last_lr()[0],
                   "loss": sums.pop("loss") / since, **{f"loss/{k}": s / since for k, s in sums.items()},
                   "examples_per_s": since * recipe.batch_size / elapsed}
            if accelerator.is_main_process:
                with metrics.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(row) + "\n")
            bar.set_postfix(loss=f"{row['loss']:.4f}", ex_s=f"{row['examples_per_s']:.1f}")
            sums, since, clock = {}, 0, time.perf_counter()
        bar.update(1)
        if recipe.checkpoint_every and done % recipe.checkpoint_every == 0 and done < total:
            meta = model_meta(recipe, backbone, base_model, done)
            save_checkpoint(run, recipe, backbone, optimizer, scheduler, meta, accelerator.is_main_process,
                            step_module.heads)
            accelerator.wait_for_everyone()
        if callback is not None:
            callback(done, values)
    bar.close()

    final = run / "final"
    if accelerator.is_main_process:
        save_model(final, backbone, model_meta(recipe, backbone, base_model, total))
        # what corruption objectives masked and skipped (this process's batches, since start or resume)
        counts = {o.name: o.report() for o, _ in objectives if hasattr(o, "report")}
        if counts:
            (run / "counts.json").write_text(json.dumps(counts, indent=2), encoding="utf-8")
            for name, c in counts.items():
                print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in c.items()), file=sys.stderr)
    accelerator.wait_for_everyone()
    return final
