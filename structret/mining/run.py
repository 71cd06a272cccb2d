"""``mine``: the whole run, from a source tree to one CodeSearchNet file, and its report."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Sequence

from structret import registry
from structret.contracts import HasStandardMethods
from structret.errors import DataError
from structret.mining.rules import RULE_DUPLICATE, RULES, SPLIT_NAMES, check_splits
from structret.mining.shards import (
    DEFAULT_CHUNK_FILES,
    SHARDS_SUFFIX,
    Job,
    atomic_writer,
    mine_in_processes,
    mine_shard,
    plan_shards,
    prepare_shard_dir,
    read_shard,
)
from structret.mining.walk import DEFAULT_EXCLUDE, git_head, source_files

MAX_EXAMPLES = 10  # skipped files named in the summary


@dataclass
class MineReport:
    """What ``mine`` read, kept and dropped; ``functions_found == kept + sum(dropped)``."""

    src: str = ""
    language: str = ""
    out: str = ""
    exclude: tuple[str, ...] = ()
    extensions: tuple[str, ...] = ()
    files_seen: int = 0
    files_skipped: Counter = field(default_factory=Counter)
    skipped_examples: list[str] = field(default_factory=list)  # "path:line: reason"
    functions_found: int = 0
    kept: int = 0
    dropped: Counter = field(default_factory=Counter)
    splits: tuple[float, float, float] | None = None
    by_split: Counter = field(default_factory=Counter)
    # kept rows whose query came from a function's structure (--structure-pairs), by pair kind
    structure: Counter = field(default_factory=Counter)
    workers: int = 1
    shards: int = 0
    shards_reused: int = 0  # finished by an interrupted run, not mined again
    shards_discarded: int = 0  # left by a run whose files or settings differ
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def skip_file(self, where: str, reason: str, detail: str = "") -> None:
        self.files_skipped[reason] += 1
        if len(self.skipped_examples) < MAX_EXAMPLES:
            self.skipped_examples.append(f"{where}: {reason}" + (f" ({detail})" if detail else ""))

    def summary(self) -> str:
        skipped = sum(self.files_skipped.values())
        lines = [f"mined {self.language} functions from {self.src}"]
        if self.exclude:
            lines.append(f"  not entered: hidden directories and {', '.join(self.exclude)}")
        files = f"  files: {self.files_seen} seen, {self.files_seen - skipped} parsed, {skipped} skipped"
        if skipped:
            files += " (" + ", ".join(f"{r}: {n}" for r, n in self.files_skipped.most_common()) + ")"
        lines.append(files)
        if self.skipped_examples:
            lines.append("    first skipped: " + "; ".join(self.skipped_examples))
        if not self.files_seen:
            lines.append(
                f"  no file ending in {' or '.join(self.extensions)} was found; "
                f"is --language {self.language} the language of this tree?"
            )
        dropped = sum(self.dropped.values())
        lines.append(f"  functions: {self.functions_found} found = {self.kept} kept + {dropped} dropped")
        for rule in RULES:
            if self.dropped[rule]:
                lines.append(f"    dropped, {rule}: {self.dropped[rule]}")
        if self.structure:
            lines.append(f"    of the kept, from functions without a docstring (--structure-pairs): "
                         + ", ".join(f"{kind} {n}" for kind, n in sorted(self.structure.items())))
        if self.splits:
            lines.append("  kept by split: " + ", ".join(f"{s} {self.by_split[s]}" for s in SPLIT_NAMES))
            empty = [s for s in SPLIT_NAMES if not self.by_split[s]]
            if empty and self.kept:
                lines.append(f"  note: no row in {' or '.join(empty)}: splits are drawn per file (a hash of its path), "
                             f"and {self.files_seen} file(s) are too few for these shares; mine without --splits "
                             f"to search every row, or give larger shares to the empty split(s)")
        else:
            lines.append("  not split: every row is in the file without a partition (--splits to draw train/valid/test)")
        shards = (f"  {self.shards} shard{'s' if self.shards != 1 else ''}, "
                  f"{self.workers} worker process{'es' if self.workers > 1 else ''}")
        if self.shards_reused:
            shards += f"; {self.shards_reused} shards already done by an interrupted run, not mined again"
        if self.shards_discarded:
            shards += f"; {self.shards_discarded} shards of an earlier run discarded (files or settings changed)"
        lines.append(shards)
        lines.extend(f"  note: {note}" for note in self.notes)
        if self.seconds and self.shards_reused:  # rates over the whole corpus would flatter a resumed run
            lines.append(f"  {self.seconds:.1f} s to mine {self.shards - self.shards_reused} shards and merge")
        elif self.seconds:
            rate = {what: f"{n / self.seconds:.0f}" for what, n in
                    (("files", self.files_seen), ("functions", self.functions_found), ("rows", self.kept))}
            lines.append(f"  {self.seconds:.1f} s: {rate['files']} files/s, {rate['functions']} functions/s, "
                         f"{rate['rows']} rows/s")
        lines.append(f"  wrote {self.out}")
        return "\n".join(lines)


def mine(
    src: str | os.PathLike,
    language: str,
    out: str | os.PathLike,
    *,
    repo: str | None = None,
    splits: Sequence[float] | str | None = None,
    exclude: Sequence[str] = DEFAULT_EXCLUDE,
    show_progress: bool = True,
    workers: int = 1,
    chunk_files: int = DEFAULT_CHUNK_FILES,
    structure_pairs: bool = False,
    every_function: bool = False,
) -> MineReport:
    """Mine every ``language`` file under ``src`` into a CodeSearchNet jsonl(.gz) at ``out``.

    ``exclude`` names directories not to enter (hidden ones never are). ``out`` is
    gzip-compressed when it ends in ``.gz``, and appears only when complete.

    The files, in walk order, are cut into shards of ``chunk_files``; ``workers``
    processes mine the shards into ``OUT.shards/`` (each shard written atomically),
    then the shards are merged in order into ``out`` and the folder is removed. A run
    that was interrupted leaves its finished shards behind, and the same call again
    mines only the others. Duplicates are dropped while merging, so ``out`` is the same
    bytes for any ``workers`` and ``chunk_files``.

    ``splits``: shares of train, valid and test, e.g. ``(0.8, 0.1, 0.1)``; each file's functions go to
    one split, drawn from a hash of its relative path (``rules.partition_of``), so the same file lands
    in the same split on every run. ``None`` (the default): rows carry no ``partition`` and a reader
    takes them all, as one's own code to search wants.

    ``every_function``: keep every function the miner finds, whatever CodeSearchNet's rules say
    (tests, dunders, short or undocumented code, copies of one another): what an index of one's own
    code wants (``structret index SOURCE``); its query is its docstring's summary, else its name's words.

    ``structure_pairs``: a function without a docstring that passes the other rules becomes a
    row too, its query taken from its structure (``rules.structure_pair``: a leading comment,
    or its name's words and parameters) and recorded in the row's ``pair_kind``.
    """
    from tqdm import tqdm

    started = time.perf_counter()
    root = Path(src).expanduser().resolve()
    if not root.is_dir():
        raise DataError(f"{src}: not a directory. Pass the root of the source tree to mine.")
    splits = parse_splits(splits)
    if int(workers) < 1 or int(chunk_files) < 1:
        raise ValueError(f"workers={workers}, chunk_files={chunk_files}: both must be at least 1.")
    miner = registry.get_registry().create("miner", language)
    extensions = tuple(miner.extensions)
    standard_methods = frozenset(miner.standard_methods if isinstance(miner, HasStandardMethods) else ())
    out_path = Path(out).expanduser()
    if out_path.is_dir():
        raise DataError(f"{out}: is a directory. Give a file name such as {language}.jsonl.gz.")

    report = MineReport(
        src=str(root), language=language, out=str(out_path), exclude=tuple(exclude), extensions=extensions,
        workers=int(workers), splits=splits,
    )
    repo = repo if repo is not None else (root.name or str(root))
    files = list(source_files(root, extensions, frozenset(exclude)))
    report.files_seen = len(files)
    job = Job(root=str(root), language=language, repo=repo, sha=git_head(root), splits=splits,
              standard_methods=standard_methods, structure_pairs=bool(structure_pairs),
              every_function=bool(every_function))
    shard_dir = out_path.with_name(out_path.name + SHARDS_SUFFIX)
    shards = plan_shards(job, files, int(chunk_files), shard_dir)
    report.shards = len(shards)
    report.shards_discarded = prepare_shard_dir(shard_dir, job, shards)
    todo = [s for s in shards if not s.path.exists()]
    report.shards_reused = len(shards) - len(todo)
    if report.shards_reused and show_progress:
        # before the bar, so a long resumed run says at once that it is resuming
        done_files = sum(len(s.files) for s in shards) - sum(len(s.files) for s in todo)
        print(f"resuming: {report.shards_reused} of {len(shards)} shards already done ({done_files} files), "
              f"mining the other {len(todo)}", file=sys.stderr)

    def progress():
        return tqdm(total=sum(len(s.files) for s in todo), desc=f"mining {language}", unit="file",
                    disable=not show_progress)

    if int(workers) == 1 or len(todo) <= 1:
        with progress() as bar:
            for shard in todo:
                mine_shard(job, shard, miner)
                bar.update(len(shard.files))
    else:
        mine_in_processes(job, todo, int(workers), progress, shard_dir)

    with atomic_writer(out_path) as sink:
        seen_code: set[bytes] = set()
        for shard in shards:
            for entry in read_shard(job, shard, miner, report.notes):
                _merge_file(entry, report, seen_code, sink, keep_duplicates=job.every_function)
    shutil.rmtree(shard_dir, ignore_errors=True)
    report.seconds = time.perf_counter() - started
    return report


def _merge_file(entry: dict, report: MineReport, seen_code: set[bytes], sink: IO[str], *,
                keep_duplicates: bool = False) -> None:
    if "skip" in entry:
        report.skip_file(*entry["skip"])
        return
    report.functions_found += entry["found"]
    report.dropped.update(entry["dropped"])
    for row in entry["rows"]:
        key = hashlib.sha1(row["code"].encode("utf-8")).digest()
        # the first copy, in walk order, is the one kept; an index of one's own code keeps every place
        if key in seen_code and not keep_duplicates:
            report.dropped[RULE_DUPLICATE] += 1
            continue
        seen_code.add(key)
        sink.write(json.dumps(row, ensure_ascii=False) + "\n")
        report.kept += 1
        if "partition" in row:
            report.by_split[row["partition"]] += 1
        if "pair_kind" in row:
            report.structure[row["pair_kind"]] += 1


def parse_splits(splits: Sequence[float] | str | None) -> tuple[float, float, float] | None:
    """Shares of 1 for train, valid and test, given as shares or as percentages the way the command
    line writes them (``"80/10/10"``); DataError (ValueError for shares) unless they add up."""
    if splits is None:
        return None
    if not isinstance(splits, str):
        return check_splits(splits)
    try:
        return check_splits([float(v) / 100 for v in splits.split("/")])
    except ValueError:  # not numbers, not three, negative, or not adding up
        raise DataError(f"'{splits}': give three percentages for train/valid/test that add up to 100, "
                        f"e.g. 80/10/10.") from None
