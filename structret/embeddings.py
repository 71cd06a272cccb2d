"""Embeddings that survive long runs: ``structret encode --shard I/N`` and resumable chunks.

A corpus of N rows is cut into ``n`` contiguous slices (rows ``i*N//n`` to
``(i+1)*N//n``), so the shards, concatenated in order, hold the rows in corpus order,
exactly as one unsharded run would. Layout under ``encode --out DIR``::

    DIR/                        without --shard: the embeddings artifact itself
    DIR/shard-0-of-4/           with --shard 0/4: one artifact per shard
    DIR/shard-0-of-4.chunks/    while shard 0 is being encoded: finished chunks
        00000/ 00001/ ...       (each an artifact of --chunk-rows rows)

Each artifact and each chunk is written atomically with checksums (``atomic_dir``).
A chunk is reused only if its ids, texts, model and text format are the ones it
would be encoded from again and its files match its checksums.json, so re-running
the same command picks up where it stopped and a changed corpus (or a damaged or
unchecked chunk) is encoded afresh. The ``.chunks`` folder is removed
once its shard is assembled.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence, cast

import numpy as np

from structret.artifacts import (
    META_FILE,
    atomic_dir,
    read_meta,
    write_meta,
)
from structret.errors import ArtifactError, StructretError
from structret.search.texts import write_texts

EMBEDDINGS_FILE = "embeddings.npy"
IDS_FILE = "ids.json"
CHUNKS_SUFFIX = ".chunks"
DEFAULT_CHUNK_ROWS = 10_000
_SHARD_DIR = re.compile(r"shard-(\d+)-of-(\d+)")
# what must agree between the shards of one index (and between a chunk and its re-run)
# backbone_options: dtype, pooling, max_length... change the vectors, so they key reuse too
_SAME = ("what", "backbone", "model", "model_override", "backbone_options", "text_format", "text_format_options", "corpus")


@dataclass(frozen=True)
class Shard:
    index: int  # 0-based
    count: int

    @property
    def dirname(self) -> str:
        return f"shard-{self.index}-of-{self.count}"

    def rows(self, total: int) -> tuple[int, int]:
        return self.index * total // self.count, (self.index + 1) * total // self.count

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(spec: str) -> Shard:
    """``"I/N"`` (0 <= I < N) as a Shard, or a StructretError saying what to write."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", spec)
    if not match or int(match[2]) < 1 or int(match[1]) >= int(match[2]):
        raise StructretError(
            f"--shard {spec!r}: give I/N with 0 <= I < N, e.g. --shard 0/4 for the first of four shards."
        )
    return Shard(int(match[1]), int(match[2]))


def shard_from_env(environ=os.environ) -> Shard | None:
    """Shard RANK of WORLD_SIZE when started by ``accelerate launch`` or ``torchrun``, else None."""
    try:
        world, rank = int(environ.get("WORLD_SIZE", "1")), int(environ.get("RANK", "0"))
    except ValueError:
        return None
    return Shard(rank, world) if world > 1 and 0 <= rank < world else None


def fingerprint(ids: Sequence[str], texts: Sequence[str] | None = None) -> str:
    """sha256 of the ids (and texts) in order: what decides whether saved vectors still apply."""
    digest = hashlib.sha256()
    for n, i in enumerate(ids):
        digest.update(str(i).encode("utf-8", "surrogatepass") + b"\0")
        if texts is not None:
            digest.update(texts[n].encode("utf-8", "surrogatepass") + b"\0")
    return digest.hexdigest()


@dataclass
class EncodeReport:
    out: Path
    rows: int = 0
    dim: int = 0
    chunks: int = 0
    chunks_reused: int = 0
    already_complete: bool = False


def encode_resumably(
    target: str | os.PathLike,
    ids: Sequence[str],
    texts: Sequence[str],
    encode: Callable[[list[str]], np.ndarray],
    meta: dict,
    *,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    with_texts: bool = True,
    show_progress: bool = True,
) -> EncodeReport:
    """Encode ``texts`` into the embeddings artifact ``target``, ``chunk_rows`` rows at a time.

    ``meta`` (backbone, model, what, ...) is written to ``structret.json`` with ``count``
    and ``dim``; its ``_SAME`` fields and the rows' fingerprint decide whether an existing
    ``target`` or chunk is reused.
    """
    from tqdm import tqdm

    if chunk_rows < 1:
        raise StructretError(f"chunk_rows must be at least 1, got {chunk_rows}.")
    target = Path(target)
    meta = {**meta, "artifact": "embeddings", "count": len(ids), "rows_sha256": fingerprint(ids, texts)}
    report = EncodeReport(out=target, rows=len(ids))
    if _matches(target, meta):
        report.already_complete, report.dim = True, int(read_meta(target)["dim"])
        return report

    work = target.with_name(target.name + CHUNKS_SUFFIX)
    starts = list(range(0, len(ids), chunk_rows)) or [0]
    report.chunks = len(starts)
    chunk_dirs = []
    with tqdm(total=len(ids), desc=f"encoding {target.name}", unit="text", disable=not show_progress) as bar:
        for n, start in enumerate(starts):
            end = min(start + chunk_rows, len(ids))
            chunk = work / f"{n:05d}"
            chunk_dirs.append(chunk)
            chunk_meta = {**{k: meta.get(k) for k in _SAME}, "artifact": "embedding-chunk", "count": end - start,
                          "rows_sha256": fingerprint(ids[start:end], texts[start:end])}
            if _matches(chunk, chunk_meta):
                report.chunks_reused += 1
            else:
                vectors = np.asarray(encode(list(texts[start:end])), dtype=np.float32)
                with atomic_dir(chunk) as tmp:
                    np.save(tmp / EMBEDDINGS_FILE, vectors, allow_pickle=False)
                    write_meta(tmp, {**chunk_meta, "dim": int(vectors.shape[1])})
            bar.update(end - start)

    dims = {int(read_meta(c)["dim"]) for c in chunk_dirs}
    if len(dims) != 1:
        raise ArtifactError(f"the chunks in {work} have different dimensions {sorted(dims)}; "
                            f"delete {work} and run again.")
    report.dim = dims.pop()
    with atomic_dir(target) as tmp:
        # streamed chunk by chunk into the final file: a shard never has to fit in memory twice
        out = np.lib.format.open_memmap(tmp / EMBEDDINGS_FILE, mode="w+", dtype=np.float32,
                                        shape=(len(ids), report.dim))
        row = 0
        for chunk in chunk_dirs:
            vectors = np.load(chunk / EMBEDDINGS_FILE, mmap_mode="r", allow_pickle=False)
            out[row : row + len(vectors)] = vectors
            row += len(vectors)
        out.flush()
        del out
        (tmp / IDS_FILE).write_text(json.dumps(list(ids)))
        if with_texts:
            write_texts(tmp, ids, texts)
        write_meta(tmp, {**meta, "dim": report.dim})
    shutil.rmtree(work, ignore_errors=True)
    return report


def _matches(directory: Path, want: dict) -> bool:
    """True if ``directory`` is a complete, undamaged artifact with exactly these fields."""
    if not (directory / META_FILE).is_file():
        return False
    try:
        have = read_meta(directory)  # verifies every file's size and checksum
    except ArtifactError:
        return False  # damaged or from an older structret: encode it again
    return all(have.get(k) == v for k, v in want.items())


# --- reading them back for an index ---------------------------------------------------------


@dataclass
class Part:
    path: Path
    meta: dict

    def ids(self) -> list[str]:
        return json.loads((self.path / IDS_FILE).read_text(encoding="utf-8"))

    def vectors(self) -> np.ndarray:
        return np.load(self.path / EMBEDDINGS_FILE, mmap_mode="r", allow_pickle=False)


def collect_parts(paths: Sequence[str | os.PathLike], *, what: str = "documents", verify: bool = True) -> list[Part]:
    """The embeddings to index, in corpus order: one unsharded artifact, or every shard of one corpus.

    Each path is an artifact or a folder of ``shard-I-of-N`` artifacts (``encode --out``).
    All N shards must be present once, with the same model, text format and corpus;
    otherwise ArtifactError says which are missing or disagree and what to run. Each one's
    files must match its checksums.json, unless ``verify`` is False (a warning says so).
    """
    parts: list[Part] = []
    unfinished: list[str] = []
    for given in paths:
        path = Path(given)
        shards = sorted((p for p in path.iterdir() if p.is_dir() and _SHARD_DIR.fullmatch(p.name)),
                        key=lambda p: tuple(int(x) for x in cast(re.Match, _SHARD_DIR.fullmatch(p.name)).groups()))
        if (path / META_FILE).is_file():
            if shards:  # an unsharded run and later shards into the same --out: which one was meant?
                raise ArtifactError(f"{path} holds whole-corpus embeddings and also {len(shards)} shard folders "
                                    f"({shards[0].name}, ...); move one of them elsewhere and index that.")
            parts.append(Part(path, read_meta(path, artifact="embeddings", what=what, verify=verify)))
            continue
        unfinished += [_describe_unfinished(p) for p in sorted(path.glob("shard-*-of-*" + CHUNKS_SUFFIX))]
        incomplete = [p for p in shards if not (p / META_FILE).is_file()]
        if incomplete:
            raise ArtifactError(f"{incomplete[0]} has no {META_FILE}: it is not a finished shard. Delete it and "
                                f"encode that shard again.")
        if not shards and not unfinished:
            raise ArtifactError(
                f"{path} holds neither embeddings ({META_FILE}) nor encode shards (shard-I-of-N folders). "
                f"Give the --out folder of 'structret encode'."
            )
        parts += [Part(p, read_meta(p, artifact="embeddings", what=what, verify=verify)) for p in shards]

    whole = [p for p in parts if "shard" not in p.meta]
    if whole and len(paths) == 1 and len(parts) == 1:
        return parts
    if whole:
        raise ArtifactError(
            f"{whole[0].path} holds the embeddings of a whole corpus, not a shard; give either one such folder "
            f"or the shards of one corpus (made with 'structret encode --shard I/N')."
        )
    return _check_shards(parts, unfinished, paths)


def _describe_unfinished(chunks: Path) -> str:
    done = sum(1 for c in chunks.iterdir() if (c / META_FILE).is_file())
    return f"{chunks} holds {done} finished chunk{'s' if done != 1 else ''} (being encoded, or interrupted)"


def _check_shards(parts: list[Part], unfinished: list[str], paths: Sequence) -> list[Part]:
    if not parts:
        raise ArtifactError("no finished shard was found: " + "; ".join(unfinished)
                            + ". Run (or re-run) 'structret encode --shard I/N' with the same options to finish them.")
    first = parts[0]
    count = first.meta["shard"][1]
    for part in parts[1:]:
        for key in _SAME + ("dim",):
            if part.meta.get(key) != first.meta.get(key):
                raise ArtifactError(
                    f"{part.path} and {first.path} differ in {key} ({part.meta.get(key)!r} vs "
                    f"{first.meta.get(key)!r}): they are not shards of one encoding. Encode every shard with the "
                    f"same --data, --split, --backbone and --model."
                )
        if part.meta["shard"][1] != count:
            raise ArtifactError(f"{part.path} is one of {part.meta['shard'][1]} shards but {first.path} one of "
                                f"{count}; encode all shards with the same N in --shard I/N.")
    by_index: dict[int, Part] = {}
    for part in parts:
        i = part.meta["shard"][0]
        if i in by_index:
            raise ArtifactError(f"shard {i}/{count} is given twice: {by_index[i].path} and {part.path}; give it once.")
        by_index[i] = part
    missing = [i for i in range(count) if i not in by_index]
    if missing:
        listed = ", ".join(f"{i}/{count}" for i in missing)
        where = ", ".join(str(p) for p in paths)
        found = ", ".join(by_index[i].path.name for i in sorted(by_index))
        message = f"{where}: {len(missing)} of {count} shards missing ({listed}); found {found}."
        if unfinished:
            message += " " + "; ".join(unfinished) + "."
        raise ArtifactError(message + f" Run 'structret encode' with the same options and --shard "
                            f"{missing[0]}/{count} (and each other missing one), or re-run an interrupted one to "
                            f"resume it; then index again.")
    ordered = [by_index[i] for i in range(count)]
    total = (first.meta.get("corpus") or {}).get("count", -1)
    for i, part in enumerate(ordered):
        if part.meta.get("rows") != list(Shard(i, count).rows(total)):
            raise ArtifactError(f"{part.path} covers rows {part.meta['rows']}, not the rows of shard {i}/{count} of a "
                                f"{total}-row corpus; it is damaged or was edited. Encode it again.")
    return ordered
