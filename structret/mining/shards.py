"""Mining in shards: the files cut into chunks, each mined (in worker processes, if asked)
into its own file that survives an interrupted run, so the same call again mines only
the rest. A shard holds one JSON line per source file: its rows before de-duplication,
or why it was skipped.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import importlib.metadata
import io
import json
import os
import signal
import tempfile
import threading
import time
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterator

from structret import registry
from structret.errors import DataError, StructretError
from structret.mining.rules import (
    RULE_NO_DOC,
    Miner,
    docstring_summary,
    drop_rule,
    name_words,
    partition_of,
    structure_pair,
    tokenize_docstring,
)
from structret.mining.walk import read_source

# Mining writes shards of DEFAULT_CHUNK_FILES files to OUT + SHARDS_SUFFIX; each shard's
# name carries a hash of everything its content depends on, so a shard left by an
# interrupted run is reused only when it would come out the same.
SHARDS_SUFFIX = ".shards"
DEFAULT_CHUNK_FILES = 64
_SHARD_FORMAT = 1
_MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Job:
    """What every shard of one run shares; picklable, for the worker processes."""

    root: str
    language: str
    repo: str
    sha: str
    splits: tuple[float, float, float] | None  # None: rows carry no partition
    standard_methods: frozenset[str]
    structure_pairs: bool = False  # rows from functions without a docstring (rules.structure_pair)
    every_function: bool = False  # no rule drops a function (an index of one's own code)


@dataclass(frozen=True)
class Shard:
    path: Path
    files: tuple[str, ...]  # paths relative to the root, in walk order


def plan_shards(job: Job, files: list[Path], chunk_files: int, shard_dir: Path) -> list[Shard]:
    try:
        code_version = importlib.metadata.version("structret")
    except Exception:  # running from a source tree that was never installed
        code_version = "unknown"
    settings = json.dumps([_SHARD_FORMAT, code_version, job.root, job.language, job.repo, job.sha, job.splits]
                          + ([True] if job.structure_pairs else []) + (["every"] if job.every_function else []))
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
        shards.append(Shard(shard_dir / f"{n:05d}-{digest.hexdigest()[:16]}.jsonl.gz", files_rel))
    return shards


def prepare_shard_dir(shard_dir: Path, job: Job, shards: list[Shard]) -> int:
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
    with atomic_writer(shard_dir / _MANIFEST) as f:
        json.dump(manifest, f, indent=1)
    return discarded


def mine_in_processes(job: Job, todo: list[Shard], workers: int, progress, shard_dir: Path) -> None:
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
    _worker_miner = registry.get_registry().create("miner", language)
    signal.signal(signal.SIGINT, _worker_sigint)
    parent = os.getppid()

    def exit_with_parent() -> None:
        # A main process stopped by `kill PID` or the OOM killer leaves its workers waiting
        # for work forever; a half-written shard stays a .tmp file, which the next run removes.
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=exit_with_parent, daemon=True).start()


def _mine_shard_in_worker(job: Job, shard: Shard) -> None:
    global _worker_in_shard
    _worker_in_shard = True
    try:
        # Ctrl-C reaches every process of the group; the shards already queued to this worker
        # would still be mined one by one before the run could stop, so refuse them at once
        if _worker_interrupted:
            raise KeyboardInterrupt
        assert _worker_miner is not None  # the pool's initializer set it
        mine_shard(job, shard, _worker_miner)
    finally:
        _worker_in_shard = False


def mine_shard(job: Job, shard: Shard, miner: Miner) -> None:
    """Mine the files of one shard into its file: one JSON line per source file, in order."""
    with atomic_writer(shard.path, compresslevel=1) as sink:  # read once, soon: speed over size
        for rel in shard.files:
            # ASCII escapes: a file name that is not UTF-8 must round-trip through the shard
            sink.write(json.dumps(mine_file(job, rel, miner)) + "\n")


def mine_file(job: Job, rel: str, miner: Miner) -> dict:
    """One file's outcome: {"skip": [where, reason, detail]}, or the functions found, the
    counts dropped by each rule, and the rows kept (duplicates are decided later, in order)."""
    file = Path(job.root, rel)
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8 in the name: no row could name its path
        shown = rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        return {"path": rel, "skip": [f"{shown}:1", "file name not UTF-8", "rename it to mine it"]}
    source = read_source(file, rel)
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
    partition = partition_of(rel, job.splits) if job.splits is not None else None
    dropped: Counter = Counter()
    rows = []
    for fn in functions:
        summary_tokens = tokenize_docstring(docstring_summary(fn.docstring))
        rule = None if job.every_function else drop_rule(fn, summary_tokens, job.standard_methods)
        if job.every_function and not summary_tokens:  # its name says what it is, for the lexical side too
            summary_tokens = name_words(fn.func_name) or [fn.func_name]
        if rule == RULE_NO_DOC and job.structure_pairs:
            pair = structure_pair(fn)
            if pair is not None:
                rows.append(_structure_row(job, rel, partition, fn, file, *pair))
                continue
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
            **({"partition": partition} if partition else {}),
            "url": f"{file.as_uri()}#L{fn.start_line}-L{fn.end_line}",
        })
    return {"path": rel, "found": len(functions), "dropped": dropped, "rows": rows}


def _structure_row(job: Job, rel: str, partition: str | None, fn: Any, file: Path, kind: str, query: str,
                   code: str) -> dict:
    """A row whose query comes from the function's structure; ``pair_kind`` says how."""
    return {"repo": job.repo, "path": rel, "func_name": fn.func_name, "original_string": fn.original_string,
            "language": job.language, "code": code, "code_tokens": fn.code_tokens, "docstring": "",
            "docstring_tokens": tokenize_docstring(query), "sha": job.sha,
            **({"partition": partition} if partition else {}),
            "url": f"{file.as_uri()}#L{fn.start_line}-L{fn.end_line}", "pair_kind": kind}


def read_shard(job: Job, shard: Shard, miner: Miner, notes: list[str]) -> list[dict]:
    """The shard's entries; a shard that cannot be read (damaged on disk) is mined again, and ``notes`` says so."""
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
        notes.append(f"{shard.path.name} was damaged ({problem}); mined its {len(shard.files)} files again")
        mine_shard(job, shard, miner)
    raise AssertionError("unreachable")


@contextlib.contextmanager
def atomic_writer(path: Path, compresslevel: int = 9) -> Iterator[IO[str]]:
    """Text written here lands at ``path`` only if the block finishes; else nothing does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with open(fd, "wb") as raw:
            with contextlib.ExitStack() as stack:
                binary: IO[bytes] | gzip.GzipFile = raw
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
