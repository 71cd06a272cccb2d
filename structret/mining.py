"""``structret mine``: turn a source tree into a CodeSearchNet-format corpus.

The language-specific part (finding functions, their docstrings and tokens) is a
*miner* from the plugin registry; everything CodeSearchNet decided on top of that
is here, the same for every language:

* the query is the docstring's first paragraph, tokenized with CodeSearchNet's
  docstring tokenizer (``docstring_tokens``);
* a function is dropped, and counted under the first rule it fails, in this order:
  ``dunder or constructor``, ``standard method`` (``toString``, Ruby ``==`` ...),
  ``'test' in name``, ``no docstring``, ``docstring < 3 tokens`` (of the query),
  ``code < 3 lines`` (non-blank lines of ``code``), ``duplicate code`` (the same
  ``code`` as a function kept before it; the first copy is kept);
* the train/valid/test partition is a hash of the file's path, so every function
  of a file lands in the same split and re-mining gives the same split.

A miner is any object with

``extensions: tuple[str, ...]``
    file suffixes it reads, e.g. ``(".py",)``;
``functions(source: str, path: str) -> list[MinedFunction]``
    the functions of one file in source order. ``source`` is the decoded file with
    ``\\n`` line ends; ``path`` is only for messages. It raises ``SyntaxError``
    (with ``lineno`` set) for a file it cannot parse; ``mine`` skips and counts it;
``standard_methods: frozenset[str]`` (optional)
    method names CodeSearchNet drops as standard extension methods of the
    language (Java ``toString``, JavaScript ``valueOf`` ...).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterator, Protocol, Sequence, runtime_checkable

from structret.errors import DataError, StructretError

SPLIT_NAMES = ("train", "valid", "test")

# Directories that hold someone else's code or build output, not the project's own.
DEFAULT_EXCLUDE = ("__pycache__", "site-packages", "node_modules", "vendor")

# Drop rules, in the order they are checked.
RULE_DUNDER = "dunder or constructor"
RULE_STANDARD = "standard method"
RULE_TEST = "'test' in name"
RULE_NO_DOC = "no docstring"
RULE_SHORT_DOC = "docstring < 3 tokens"
RULE_SHORT_CODE = "code < 3 lines"
RULE_DUPLICATE = "duplicate code"
RULES = (RULE_DUNDER, RULE_STANDARD, RULE_TEST, RULE_NO_DOC, RULE_SHORT_DOC, RULE_SHORT_CODE, RULE_DUPLICATE)

# Mining writes shards of DEFAULT_CHUNK_FILES files to OUT + SHARDS_SUFFIX; each shard's
# name carries a hash of everything its content depends on, so a shard left by an
# interrupted run is reused only when it would come out the same.
SHARDS_SUFFIX = ".shards"
DEFAULT_CHUNK_FILES = 64
_SHARD_FORMAT = 1
_MANIFEST = "manifest.json"

MIN_DOCSTRING_TOKENS = 3
MIN_CODE_LINES = 3
MAX_EXAMPLES = 10

# CodeSearchNet's docstring tokenizer (function_parser, DOCSTRING_REGEX_TOKENIZER),
# written out long-hand. A word is a run of anything but whitespace and the
# delimiters below; each delimiter kind comes out as its own run ("...", "((").
# Commas and quotes are delimiters without a token of their own, so they vanish;
# '<' is not a delimiter but '>' is -- both quirks are CodeSearchNet's.
_DOCSTRING_TOKEN = re.compile(
    r"""
      [^\s,'"`.():\[\]=*;>{}+\-/\\]+     # a word
    | \\+ | \.+                          # runs of backslashes, dots
    | \(\) | \{\} | \[\]                 # empty bracket pairs stay together
    | \(+ | \)+ | \{+ | \}+ | \[+ | \]+  # runs of one bracket
    | :+ | =+ | \*+ | ;+ | >+ | \++ | -+ | /+
    """,
    re.VERBOSE,
)

_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_TAG_LINE = re.compile(r"^[ \t]*@", re.MULTILINE)
_DUNDER = re.compile(r"__\w+__")


@dataclass
class MinedFunction:
    """One function or method as a miner found it, before any filtering."""

    func_name: str  # "Class.method" for methods, else "name"
    original_string: str  # the function's source as CodeSearchNet stores it
    code: str  # the source without its docstring
    docstring: str  # the whole docstring / doc comment, comment markers removed
    start_line: int  # 1-based, inclusive
    end_line: int
    code_tokens: list[str] = field(default_factory=list)
    is_constructor: bool = False


@runtime_checkable
class Miner(Protocol):
    """What ``register_miners`` factories return; see the module docstring."""

    extensions: tuple[str, ...]

    def functions(self, source: str, path: str) -> list[MinedFunction]: ...


def tokenize_docstring(text: str) -> list[str]:
    """Split text into tokens exactly as CodeSearchNet's ``docstring_tokens`` were."""
    return _DOCSTRING_TOKEN.findall(text)


def docstring_summary(docstring: str) -> str:
    """The docstring's first paragraph: what a user would type as the query.

    Text before the first blank line; a docstring without one stops at its first
    ``@tag`` line (JavaDoc/JSDoc ``@param``), as in CodeSearchNet.
    """
    blank = _BLANK_LINE.search(docstring)
    if blank:
        return docstring[: blank.start()].strip()
    # CodeSearchNet cut at the first '@' anywhere, which also cut "{@link X}" and
    # e-mail addresses in half; only a line starting with '@' begins the tags.
    tag = _TAG_LINE.search(docstring)
    if tag:
        return docstring[: tag.start()].strip()
    return docstring.strip()


def partition_of(rel_path: str, splits: Sequence[float] = (0.8, 0.1, 0.1)) -> str:
    """The split a file belongs to: sha1 of its relative path mapped to [0, 1)."""
    digest = hashlib.sha1(rel_path.encode("utf-8")).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    bound = 0.0
    for name, share in zip(SPLIT_NAMES, splits):
        bound += share
        if u < bound:
            return name
    return SPLIT_NAMES[-1]  # u just under 1.0 with shares summing to 0.9999...


def drop_rule(
    fn: MinedFunction, docstring_tokens: list[str], standard_methods: frozenset[str] = frozenset()
) -> str | None:
    """The first CodeSearchNet rule ``fn`` fails (duplicates aside), or None to keep it."""
    short_name = fn.func_name.rsplit(".", 1)[-1]
    if fn.is_constructor or _DUNDER.fullmatch(short_name):
        return RULE_DUNDER
    if short_name in standard_methods:
        return RULE_STANDARD
    if "test" in fn.func_name.lower():
        return RULE_TEST
    if not fn.docstring.strip():
        return RULE_NO_DOC
    if len(docstring_tokens) < MIN_DOCSTRING_TOKENS:
        return RULE_SHORT_DOC
    if sum(1 for line in fn.code.splitlines() if line.strip()) < MIN_CODE_LINES:
        return RULE_SHORT_CODE
    return None


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
    by_split: Counter = field(default_factory=Counter)
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
        lines.append("  kept by split: " + ", ".join(f"{s} {self.by_split[s]}" for s in SPLIT_NAMES))
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
    splits: Sequence[float] = (0.8, 0.1, 0.1),
    exclude: Sequence[str] = DEFAULT_EXCLUDE,
    show_progress: bool = True,
    workers: int = 1,
    chunk_files: int = DEFAULT_CHUNK_FILES,
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
    """
    from tqdm import tqdm  # only a mining run pays for it

    from structret.registry import get_registry

    started = time.perf_counter()
    root = Path(src).expanduser().resolve()
    if not root.is_dir():
        raise DataError(f"{src}: not a directory. Pass the root of the source tree to mine.")
    splits = _check_splits(splits)
    if int(workers) < 1 or int(chunk_files) < 1:
        raise ValueError(f"workers={workers}, chunk_files={chunk_files}: both must be at least 1.")
    miner = get_registry().create("miner", language)
    extensions = tuple(miner.extensions)
    standard_methods = frozenset(getattr(miner, "standard_methods", ()))
    out_path = Path(out).expanduser()
    if out_path.is_dir():
        raise DataError(f"{out}: is a directory. Give a file name such as {language}.jsonl.gz.")

    report = MineReport(
        src=str(root), language=language, out=str(out_path), exclude=tuple(exclude), extensions=extensions,
        workers=int(workers),
    )
    repo = repo if repo is not None else (root.name or str(root))
    files = list(_source_files(root, extensions, frozenset(exclude)))
    report.files_seen = len(files)
    job = _Job(root=str(root), language=language, repo=repo, sha=git_head(root), splits=splits,
               standard_methods=standard_methods)
    shard_dir = out_path.with_name(out_path.name + SHARDS_SUFFIX)
    shards = _plan_shards(job, files, int(chunk_files), shard_dir)
    report.shards = len(shards)
    report.shards_discarded = _prepare_shard_dir(shard_dir, job, shards)
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
                _mine_shard(job, shard, miner)
                bar.update(len(shard.files))
    else:
        _mine_in_processes(job, todo, int(workers), progress, shard_dir)

    with _atomic_writer(out_path) as sink:
        seen_code: set[bytes] = set()
        for shard in shards:
            for entry in _read_shard(job, shard, miner, report):
                _merge_file(entry, report, seen_code, sink)
    shutil.rmtree(shard_dir, ignore_errors=True)
    report.seconds = time.perf_counter() - started
    return report


@dataclass(frozen=True)
class _Job:
    """What every shard of one run shares; picklable, for the worker processes."""

    root: str
    language: str
    repo: str
    sha: str
    splits: tuple[float, float, float]
    standard_methods: frozenset[str]


@dataclass(frozen=True)
class _Shard:
    path: Path
    files: tuple[str, ...]  # paths relative to the root, in walk order


def _plan_shards(job: _Job, files: list[Path], chunk_files: int, shard_dir: Path) -> list[_Shard]:
    try:
        from importlib.metadata import version

        code_version = version("structret")
    except Exception:  # running from a source tree that was never installed
        code_version = "unknown"
    settings = json.dumps([_SHARD_FORMAT, code_version, job.root, job.language, job.repo, job.sha, job.splits])
    shards = []
    for n, start in enumerate(range(0, len(files), chunk_files)):
        chunk = files[start : start + chunk_files]
        digest = hashlib.sha1(settings.encode("utf-8"))
        for file in chunk:
            try:
                stat = file.stat()
                stamp = f"{stat.st_size}:{stat.st_mtime_ns}"
            except OSError:  # gone or unreadable: mining counts it, the key just has to be stable
                stamp = "-"
            digest.update(f"\n{file.relative_to(job.root).as_posix()}\0{stamp}".encode("utf-8", "surrogateescape"))
        files_rel = tuple(f.relative_to(job.root).as_posix() for f in chunk)
        shards.append(_Shard(shard_dir / f"{n:05d}-{digest.hexdigest()[:16]}.jsonl.gz", files_rel))
    return shards


def _prepare_shard_dir(shard_dir: Path, job: _Job, shards: list[_Shard]) -> int:
    """Write the manifest; delete temp files and shards no longer planned. Returns how many were deleted."""
    shard_dir.mkdir(parents=True, exist_ok=True)
    wanted = {s.path.name for s in shards}
    discarded = 0
    for path in shard_dir.iterdir():
        if path.name.endswith(".tmp"):  # a shard whose writer was killed
            path.unlink(missing_ok=True)
        elif path.name.endswith(".jsonl.gz") and path.name not in wanted:
            # a source file or a setting changed since that shard was written
            path.unlink(missing_ok=True)
            discarded += 1
    manifest = {
        "what": "shards of 'structret mine'; delete this folder to start over",
        "root": job.root, "language": job.language, "repo": job.repo, "sha": job.sha, "splits": job.splits,
        "shards": [{"name": s.path.name, "files": list(s.files)} for s in shards],
    }
    with _atomic_writer(shard_dir / _MANIFEST) as f:
        json.dump(manifest, f, indent=1)
    return discarded


def _mine_in_processes(job: _Job, todo: list[_Shard], workers: int, progress, shard_dir: Path) -> None:
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    pool = ProcessPoolExecutor(max_workers=min(workers, len(todo)), initializer=_start_worker,
                               initargs=(job.language,))
    try:
        futures = {pool.submit(_mine_shard_in_worker, job, shard): shard for shard in todo}
        # the bar only now: tqdm starts a monitor thread, and forking the workers is safe only before it
        with progress() as bar:
            for future in as_completed(futures):
                future.result()
                bar.update(len(futures[future].files))
    except BrokenProcessPool:
        raise StructretError(
            f"a mining process died (killed, or out of memory?). The shards it finished are kept in "
            f"{shard_dir}: run the same command again to mine only the rest, with fewer --workers if memory "
            f"ran out."
        ) from None
    finally:
        # on Ctrl-C or an error: start no more shards; the ones running finish or leave no file
        pool.shutdown(wait=True, cancel_futures=True)
        # a worker interrupted between creating its temporary file and guarding it leaves one;
        # every worker has stopped now, so no .tmp here is still being written
        for partial in shard_dir.glob(".*.tmp"):
            partial.unlink(missing_ok=True)


_worker_miner: Miner | None = None
_worker_interrupted = False
_worker_in_shard = False


def _worker_sigint(signum: int, frame: Any) -> None:
    global _worker_interrupted
    _worker_interrupted = True
    # only inside a shard: between shards (unpickling the next job) a KeyboardInterrupt
    # would kill the worker with multiprocessing's traceback on the user's terminal
    if _worker_in_shard:
        raise KeyboardInterrupt


def _start_worker(language: str) -> None:
    # one miner per process: a tree-sitter parser cannot be pickled, and is reused for every shard
    global _worker_miner
    import threading

    from structret.registry import get_registry

    _worker_miner = get_registry().create("miner", language)
    signal.signal(signal.SIGINT, _worker_sigint)
    parent = os.getppid()

    def exit_with_parent() -> None:
        # A main process stopped by `kill PID` or the OOM killer leaves its workers waiting
        # for work forever; a half-written shard stays a .tmp file, which the next run removes.
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=exit_with_parent, daemon=True).start()


def _mine_shard_in_worker(job: _Job, shard: _Shard) -> None:
    global _worker_in_shard
    _worker_in_shard = True
    try:
        # Ctrl-C reaches every process of the group; the shards already queued to this worker
        # would still be mined one by one before the run could stop, so refuse them at once
        if _worker_interrupted:
            raise KeyboardInterrupt
        _mine_shard(job, shard, _worker_miner)
    finally:
        _worker_in_shard = False


def _mine_shard(job: _Job, shard: _Shard, miner: Miner) -> None:
    """Mine the files of one shard into its file: one JSON line per source file, in order."""
    with _atomic_writer(shard.path, compresslevel=1) as sink:  # read once, soon: speed over size
        for rel in shard.files:
            # ASCII escapes: a file name that is not UTF-8 must round-trip through the shard
            sink.write(json.dumps(_mine_file(job, rel, miner)) + "\n")


def _mine_file(job: _Job, rel: str, miner: Miner) -> dict:
    """One file's outcome: {"skip": [where, reason, detail]}, or the functions found, the
    counts dropped by each rule, and the rows kept (duplicates are decided later, in order)."""
    file = Path(job.root, rel)
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8 in the name: no row could name its path
        shown = rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        return {"path": rel, "skip": [f"{shown}:1", "file name not UTF-8", "rename it to mine it"]}
    source = _read_source(file, rel)
    if isinstance(source, list):
        return {"path": rel, "skip": source}
    try:
        functions = miner.functions(source, rel)
    except SyntaxError as exc:
        return {"path": rel, "skip": [f"{rel}:{exc.lineno or 1}", "syntax error", exc.msg or ""]}
    except Exception as exc:
        # A bug in the miner, not in the file: one file should not cost a long
        # run, and the summary shows the error so it can be reported.
        return {"path": rel, "skip": [f"{rel}:1", "miner error", repr(exc)]}
    partition = partition_of(rel, job.splits)
    dropped: Counter = Counter()
    rows = []
    for fn in functions:
        summary_tokens = tokenize_docstring(docstring_summary(fn.docstring))
        rule = drop_rule(fn, summary_tokens, job.standard_methods)
        if rule is not None:
            dropped[rule] += 1
            continue
        rows.append({
            "repo": job.repo,
            "path": rel,
            "func_name": fn.func_name,
            "original_string": fn.original_string,
            "language": job.language,
            "code": fn.code,
            "code_tokens": fn.code_tokens,
            "docstring": fn.docstring,
            "docstring_tokens": summary_tokens,
            "sha": job.sha,
            "partition": partition,
            "url": f"{file.as_uri()}#L{fn.start_line}-L{fn.end_line}",
        })
    return {"path": rel, "found": len(functions), "dropped": dropped, "rows": rows}


def _read_shard(job: _Job, shard: _Shard, miner: Miner, report: MineReport) -> list[dict]:
    """The shard's entries; a shard that cannot be read (damaged on disk) is mined again."""
    for attempt in (1, 2):
        try:
            with gzip.open(shard.path, "rt", encoding="utf-8") as f:
                entries = [json.loads(line) for line in f]
            if [e.get("path") for e in entries] == list(shard.files):
                return entries
            problem = "it does not list the files it should cover"
        except (OSError, EOFError, ValueError, zlib.error) as exc:  # gzip CRC, truncation, bad JSON
            problem = f"{type(exc).__name__}: {exc}"
        if attempt == 2:
            raise DataError(f"{shard.path}: cannot be read back right after writing it ({problem}); "
                            f"is the disk full or failing? Delete {shard.path.parent} and run again.")
        report.notes.append(f"{shard.path.name} was damaged ({problem}); mined its {len(shard.files)} files again")
        _mine_shard(job, shard, miner)
    raise AssertionError("unreachable")


def _merge_file(entry: dict, report: MineReport, seen_code: set[bytes], sink: IO[str]) -> None:
    if "skip" in entry:
        report.skip_file(*entry["skip"])
        return
    report.functions_found += entry["found"]
    report.dropped.update(entry["dropped"])
    for row in entry["rows"]:
        key = hashlib.sha1(row["code"].encode("utf-8")).digest()
        if key in seen_code:  # the first copy, in walk order, is the one kept
            report.dropped[RULE_DUPLICATE] += 1
            continue
        seen_code.add(key)
        sink.write(json.dumps(row, ensure_ascii=False) + "\n")
        report.kept += 1
        report.by_split[row["partition"]] += 1


def _check_splits(splits: Sequence[float]) -> tuple[float, float, float]:
    values = tuple(float(s) for s in splits)
    if len(values) != 3 or any(v < 0 for v in values) or abs(sum(values) - 1.0) > 1e-6:
        raise ValueError(
            f"splits={tuple(splits)!r}: give three non-negative shares for train, valid and test "
            f"that add up to 1, e.g. (0.8, 0.1, 0.1)."
        )
    return values  # type: ignore[return-value]


def _source_files(root: Path, extensions: tuple[str, ...], exclude: frozenset[str]) -> Iterator[Path]:
    """Files under ``root`` with one of ``extensions``, in a fixed (sorted) order.

    Symlinked directories are not followed: that rules out loops, and a linked
    copy of code already in the tree would only add duplicates.
    """
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in exclude)
        for name in sorted(filenames):
            if not name.startswith(".") and name.endswith(extensions):
                yield Path(dirpath, name)


def _read_source(file: Path, rel: str) -> str | list[str]:
    """The file as text with ``\\n`` line ends, or why it is skipped: [where, reason, detail]."""
    try:
        data = file.read_bytes()
    except OSError as exc:
        return [f"{rel}:1", "unreadable", exc.strerror or str(exc)]
    try:
        # like CodeSearchNet, which read every file as UTF-8; a BOM is not content
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return [f"{rel}:{line}", "not UTF-8", f"byte 0x{data[exc.start]:02x}"]
    return text.replace("\r\n", "\n").replace("\r", "\n")


@contextlib.contextmanager
def _atomic_writer(path: Path, compresslevel: int = 9) -> Iterator[IO[str]]:
    """Text written here lands at ``path`` only if the block finishes; else nothing does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with open(fd, "wb") as raw:
            with contextlib.ExitStack() as stack:
                binary: IO[bytes] = raw
                if path.name.endswith(".gz"):
                    # no file name and a zero mtime in the header: the same corpus, the same bytes
                    binary = stack.enter_context(
                        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=compresslevel)
                    )
                text = io.TextIOWrapper(binary, encoding="utf-8", newline="\n")
                yield text
                text.flush()
                text.detach()  # what lies underneath is closed by its own `with`
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def git_head(path: Path) -> str:
    """The commit checked out at ``path`` if it is the root of a git checkout, else "".

    Reads ``.git`` directly so mining needs no git binary; worktrees and
    submodules (a ``.git`` file pointing elsewhere) and packed refs are handled.
    Directories above ``path`` are not searched: a checkout that merely contains
    the tree (a home directory under git, say) says nothing about its source.
    """
    dotgit = path / ".git"
    try:
        if dotgit.is_dir():
            return _resolve_head(dotgit)
        if dotgit.is_file():
            target = dotgit.read_text(encoding="utf-8").strip()
            if target.startswith("gitdir:"):
                return _resolve_head((path / target[len("gitdir:"):].strip()).resolve())
    except (OSError, ValueError):  # unreadable or not text: no sha rather than no corpus
        pass
    return ""


_SHA = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


def _resolve_head(gitdir: Path) -> str:
    head = (gitdir / "HEAD").read_text(encoding="utf-8").strip()
    if not head.startswith("ref:"):
        return head if _SHA.fullmatch(head) else ""
    ref = head[len("ref:"):].strip()
    common = gitdir
    if (gitdir / "commondir").is_file():  # a linked worktree keeps its branches in the main .git
        common = (gitdir / (gitdir / "commondir").read_text(encoding="utf-8").strip()).resolve()
    for base in (gitdir, common):
        loose = base / ref
        if loose.is_file():
            value = loose.read_text(encoding="utf-8").strip()
            return value if _SHA.fullmatch(value) else ""
    packed = common / "packed-refs"
    if packed.is_file():
        for line in packed.read_text(encoding="utf-8").splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1] == ref and _SHA.fullmatch(parts[0]):
                return parts[0]
    return ""  # a branch with no commit yet
