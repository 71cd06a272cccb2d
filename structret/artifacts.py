"""Saving artifacts so that an interrupted save never destroys the previous one, and checking them on load.

Over 400 lines because saving, checksums and the verification stamps are one protocol: a save seals
what it wrote with checksums.json and stamps it, a load checks against both, and an update's hard-linked
files reuse the hashes a check made; apart, each would reach into the other's internals.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import errno
import glob
import hashlib
import json
import os
import re
import shutil
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

from structret.errors import ArtifactError

META_FILE = "structret.json"
# sizes and sha256 of every file of an artifact (structret.json too), written last: a missing,
# truncated, changed or added file is refused on load instead of serving wrong results or
# surfacing as a numpy or safetensors error
CHECKSUMS_FILE = "checksums.json"


def cache_dir() -> Path:
    """Where structret keeps what it can make again (mined corpora, runs, vectors, exports):
    ``STRUCTRET_CACHE``, else ``~/.cache/structret``."""
    return Path(os.environ.get("STRUCTRET_CACHE") or Path.home() / ".cache" / "structret")


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary sibling directory; on success it replaces ``path`` in one rename.

    If the body raises (or the process dies), ``path`` still holds what it held before.
    Temporary directories that a killed save left next to ``path`` are removed here.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    _clean_up_after_killed_saves(final)
    # host and pid in the name: a later save can tell a dead writer's leftovers from a live one's
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.{_HOST}.{os.getpid()}.", suffix=".tmp", dir=final.parent))
    try:
        yield tmp
        write_checksums(tmp)
        if final.exists() and _exchange(tmp, final):
            # one step: there is no moment without an artifact at ``path``; tmp now holds the previous one
            shutil.rmtree(tmp, ignore_errors=True)
            _stamp_as_written(final)
            return
        old = None
        if final.exists():
            # no atomic exchange here (not Linux, or a file system without it): the previous
            # artifact waits in .NAME.old between the two renames, and a killed save is put
            # back by the next one (_clean_up_after_killed_saves)
            old = final.with_name(f".{final.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(final, old)
        os.replace(tmp, final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        _stamp_as_written(final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


_HOST = socket.gethostname().replace(os.sep, "_") or "localhost"
_RENAME_EXCHANGE = 2  # linux/fs.h


def _exchange(a: Path, b: Path) -> bool:
    """Swap two directories atomically (Linux renameat2); False where the system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2  # glibc >= 2.28
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd = -100
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # the file system or kernel has no exchange
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def _clean_up_after_killed_saves(final: Path) -> None:
    """Remove temporary siblings of ``final`` whose writer died on this host; put back a
    previous artifact that a killed non-atomic replace left in ``.NAME.old``."""
    old = final.with_name(f".{final.name}.old")
    if old.is_dir() and not final.exists():
        os.replace(old, final)
    pattern = re.compile(rf"^\.{re.escape(final.name)}\.(.+)\.(\d+)\.[^.]+\.tmp$")
    # a save inside a save (an index update stages a folder the index plugin then saves into) leaves
    # ".{the staged name}.HOST.PID.x.tmp" beside it: the outer writer's pid decides for both
    nested = re.compile(rf"^\.\.{re.escape(final.name)}\.(.+?)\.(\d+)\.[^.]+\.tmp\..+\.tmp$")
    for sibling in [*final.parent.glob(f".{glob.escape(final.name)}.*.tmp"),
                    *final.parent.glob(f"..{glob.escape(final.name)}.*.tmp")]:
        found = pattern.match(sibling.name) or nested.match(sibling.name)
        if found and found.group(1) == _HOST and not _alive(int(found.group(2))):
            shutil.rmtree(sibling, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*")
                  if p.is_file() and p.relative_to(directory).as_posix() != CHECKSUMS_FILE)


# sha256 of files this process hashed or verified, by (device, inode, size, mtime): a file hard-linked
# into a new artifact (an index update keeps its unchanged segments that way) is not read again
_known: dict[tuple[int, int, int, int], str] = {}


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _entry(path: Path) -> dict[str, Any]:
    st = path.stat()
    digest = _known.get(_identity(st))
    if digest is None:
        digest = _known[_identity(st)] = _sha256(path)
    return {"bytes": st.st_size, "sha256": digest}


def write_checksums(directory: str | os.PathLike) -> None:
    directory = Path(directory)
    sums = {p.relative_to(directory).as_posix(): _entry(p) for p in _files(directory)}
    (directory / CHECKSUMS_FILE).write_text(json.dumps(sums, indent=1, sort_keys=True), encoding="utf-8")


def _stamp_as_written(directory: Path) -> None:
    """The stamp a full check would leave: this process just hashed (or linked hashed) every file, so
    the next load need not. Taken after the swap and the old folder's removal, which change the
    ctime of files the two folders shared."""
    try:
        manifest = (directory / CHECKSUMS_FILE).read_bytes()
        names = json.loads(manifest.decode("utf-8"))
        _write_stamp(_stamp_path(directory, manifest), {name: _stat(directory / name) for name in names})
    except (OSError, ValueError):
        pass  # no stamp: the next load hashes, as it always did


def add_to_checksums(directory: str | os.PathLike, name: str) -> None:
    """List ``name`` in the checksums.json of an artifact saved already (``structret index``
    writes the texts beside the index its plugin has just saved)."""
    directory = Path(directory)
    before = (directory / CHECKSUMS_FILE).read_bytes()
    sums = json.loads(before.decode("utf-8"))
    sums[name] = _entry(directory / name)
    # replaced in one rename: the artifact is in place already, and a reader must never see
    # a half-written manifest
    after = json.dumps(sums, indent=1, sort_keys=True).encode("utf-8")
    partial = directory / f"{CHECKSUMS_FILE}.{os.getpid()}.part"
    partial.write_bytes(after)
    os.replace(partial, directory / CHECKSUMS_FILE)
    # a stamp the artifact had, its files untouched since, holds for the new manifest too
    stamped = _read_stamp(_stamp_path(directory, before))
    try:
        if stamped is not None and all(_stat(directory / n) == seen for n, seen in stamped.items()):
            _write_stamp(_stamp_path(directory, after), {**stamped, name: _stat(directory / name)})
    except OSError:
        pass


def checksummed(directory: str | os.PathLike, name: str) -> bool:
    """True if the checksums.json of ``directory`` covers the file ``name``."""
    return name in listed(directory)


def listed(directory: str | os.PathLike) -> set[str]:
    """The files the checksums.json of ``directory`` covers (none if it has none, or one unreadable)."""
    try:
        return set(json.loads((Path(directory) / CHECKSUMS_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return set()


_CHECKPOINT = re.compile(r"checkpoint-(\d+)")  # as structret.training names them


def rebuild_hint(directory: str | os.PathLike) -> str:
    """What to run to write ``directory`` again, as far as its structret.json (or, without
    one, its name) tells; a sentence without its full stop."""
    directory = Path(directory)
    try:
        meta = json.loads((directory / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        meta = None
    meta = meta if isinstance(meta, dict) else {}
    model = f" --model {meta['model_override']}" if meta.get("model_override") else ""
    if meta.get("index"):
        source = " ".join(f"--embeddings {e}" for e in meta.get("embeddings") or []) or (
            f"--data FORMAT:PATH --backbone {meta.get('backbone') or 'BACKBONE'}{model}")
        return f"Rebuild the index: structret index {source} --index {meta['index']} --out {directory}"
    if meta.get("artifact") == "embeddings":
        shard = meta.get("shard")
        command = [f"--data {meta.get('data') or 'FORMAT:PATH'}"]
        command += [f"--split {meta['split']}"] if meta.get("split") else []
        command += [f"--backbone {meta.get('backbone')}{model}"]
        command += [f"--backbone-option {o}" for o in meta.get("backbone_options") or []]
        command += [f"--what {meta['what']}"] if meta.get("what") == "queries" else []
        command += [f"--shard {shard[0]}/{shard[1]}"] if shard else []
        command += [f"--out {directory.parent if shard else directory}"]
        return f"Encode it again: structret encode {' '.join(command)}"
    if meta.get("artifact") == "embedding-chunk":
        return f"Delete {directory} and run the same 'structret encode' again, which encodes that chunk afresh"
    run, step = directory.parent, _CHECKPOINT.fullmatch(directory.name)
    if step:
        earlier = sorted(int(m[1]) for p in run.glob("checkpoint-*")
                         if (m := _CHECKPOINT.fullmatch(p.name)) and int(m[1]) < int(step[1]))
        then = f"resumes from checkpoint-{earlier[-1]:06d}" if earlier else "starts the run afresh"
        return (f"Delete {directory} (a checkpoint cannot be rebuilt); 'structret train --out {run} --resume' "
                f"then {then}")
    if meta.get("kind") == "model" or directory.name == "final":
        return f"Train it again: structret train --recipe {run / 'recipe.toml'} --out NEW_RUN_DIR"
    return "Rebuild it with the structret command that wrote it"


# directories checked (or, with verify=False, warned about) for the load under way: an index
# plugin's load() checks its directory again through read_index_meta, which must neither hash
# every file a second time nor override the caller's verify=False
_decided: contextvars.ContextVar[frozenset[Path]] = contextvars.ContextVar("structret_decided",
                                                                          default=frozenset())


# set by unverified(): every artifact loaded inside is used unchecked (a command's --no-verify)
_unchecked: contextvars.ContextVar[bool] = contextvars.ContextVar("structret_unchecked", default=False)

# set by checked_once(): directory -> its checksums.json as it was when checked (or warned about) in the
# command under way. A command's pre-flight and its work open the same run; it is checked once.
_checked: contextvars.ContextVar[dict[Path, tuple[tuple[int, int, int] | None, bool]] | None] = (
    contextvars.ContextVar("structret_checked", default=None))


@contextlib.contextmanager
def unverified(skip: bool = True) -> Iterator[None]:
    """Inside the block, artifacts load without their checksums checked (each says so on stderr):
    what ``--no-verify`` means for a command that loads several (runs, indexes, embeddings)."""
    token = _unchecked.set(bool(skip) or _unchecked.get())
    try:
        yield
    finally:
        _unchecked.reset(token)


@contextlib.contextmanager
def checked_once() -> Iterator[None]:
    """Inside the block (one command), an artifact checked (or, with --no-verify, warned about) is not
    checked again while its checksums.json is the same file: a folder swapped in by an update
    (structret serve reloading an index) has a new one and is checked."""
    token = _checked.set({})
    try:
        yield
    finally:
        _checked.reset(token)


def _manifest(directory: Path) -> tuple[int, int, int] | None:
    try:
        st = (directory / CHECKSUMS_FILE).stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


@contextlib.contextmanager
def verified(directory: str | os.PathLike, *, verify: bool = True) -> Iterator[None]:
    """Check ``directory`` (verify_checksums) once for everything loaded from it inside the block."""
    verify_checksums(directory, verify=verify)
    token = _decided.set(_decided.get() | {Path(directory).resolve()})
    try:
        yield
    finally:
        _decided.reset(token)


def verify_checksums(directory: str | os.PathLike, *, verify: bool = True, full: bool = False) -> None:
    """Raise ArtifactError unless ``directory`` holds exactly the files its ``checksums.json``
    lists, each with its recorded size and sha256. No checksums.json (an artifact of a
    structret older than checksums, or the file was deleted) is refused too.

    Manifests written before structret.json was listed in them (older structret) are checked
    for what they list; files they leave out (structret.json, an index's texts.jsonl.gz) are
    not refused, and 'structret search' does not show such texts.

    ``verify=False`` checks nothing and says so on stderr (``--no-verify``).

    Hashing is O(size): a 15 GB index would be read whole before its first search. So a full check
    that passes leaves a stamp in ``STRUCTRET_CACHE/verified/``: each file's size, inode, mtime and
    ctime (ctime moves on any write and cannot be set back, unlike mtime), with checksums.json's own
    digest. A later load whose files all still match their stamp skips the hashing (sizes and the
    list of files are still checked); any difference means a full check again. ``full=True``
    (``structret verify PATH``) always hashes.
    """
    directory = Path(directory)
    if directory.resolve() in _decided.get():
        return
    checked = _checked.get()
    if checked is None or full:
        _check(directory, verify=verify, full=full)
        return
    key, hashing = directory.resolve(), verify and not _unchecked.get()
    before = checked.get(key)  # (its manifest then, whether it was really checked)
    if before is not None and before[0] == _manifest(directory) and (before[1] or not hashing):
        return
    _check(directory, verify=verify, full=full)
    checked[key] = (_manifest(directory), hashing)


def _check(directory: Path, *, verify: bool, full: bool) -> None:
    _refuse_if_not_an_artifact(directory)
    if not verify or _unchecked.get():
        print(f"warning: --no-verify: {directory} was not checked against {CHECKSUMS_FILE}; files missing, "
              f"truncated, changed or added since it was saved go unnoticed and can give wrong results.",
              file=sys.stderr)
        return
    file = directory / CHECKSUMS_FILE
    if not file.is_file():
        raise ArtifactError(f"{file} is missing, so the files of {directory} cannot be checked: it was saved by a "
                            f"structret older than checksums, or the file was deleted. {rebuild_hint(directory)}. "
                            f"Or pass --no-verify to use it unchecked, at the risk of wrong results.")
    manifest = file.read_bytes()
    try:
        sums = json.loads(manifest.decode("utf-8"))
        wanted = {str(name): (int(want["bytes"]), str(want["sha256"])) for name, want in sums.items()}
    except (ValueError, UnicodeDecodeError, TypeError, KeyError, AttributeError):
        raise ArtifactError(f"{file} is damaged, so {directory} cannot be checked. "
                            f"{rebuild_hint(directory)}.") from None
    stamp = _stamp_path(directory, manifest)
    stamped = None if full else _read_stamp(stamp)
    seen: dict[str, list[int]] = {}
    for name, (size, sha256) in sorted(wanted.items()):
        path = directory / name
        if not path.is_file():
            raise ArtifactError(f"{path} is missing from {directory} (it is listed in {CHECKSUMS_FILE}): it was "
                                f"deleted, or the artifact was copied incompletely. {rebuild_hint(directory)}.")
        seen[name] = _stat(path)
        if seen[name][0] != size:
            raise ArtifactError(f"{path} has {seen[name][0]} bytes but was saved with {size}: it is truncated "
                                f"or overwritten. {rebuild_hint(directory)}.")
        if stamped is not None and stamped.get(name) == seen[name]:
            _known[_identity(path.stat())] = sha256
            continue  # hashed before, untouched since
        if _sha256(path) != sha256:
            raise ArtifactError(f"{path} does not match the checksum it was saved with: the file is damaged or was "
                                f"edited. {rebuild_hint(directory)}.")
        _known[_identity(path.stat())] = sha256
    if META_FILE in wanted:  # a manifest that lists structret.json lists every file of its artifact
        for path in _files(directory):
            if path.relative_to(directory).as_posix() not in wanted:
                hint = rebuild_hint(directory)
                raise ArtifactError(f"{path} is not listed in {file}: it was put there after {directory} was "
                                    f"saved, so nothing vouches for it. Remove it if it does not belong there; "
                                    f"otherwise {hint[:1].lower()}{hint[1:]}.")
    if seen != stamped:
        _write_stamp(stamp, seen)


def verify_tree(path: str | os.PathLike) -> list[tuple[Path, int, int]]:
    """Fully check (every byte hashed, stamps ignored and renewed) each artifact at or under ``path``:
    every folder holding a checksums.json. ``[(folder, files, bytes)]``; ArtifactError at the first bad one."""
    root = Path(path)
    folders = sorted({p.parent for p in root.rglob(CHECKSUMS_FILE)})  # rglob finds root's own too
    if not folders:
        _refuse_if_not_an_artifact(root)  # says what is missing
        raise ArtifactError(f"{root} holds no {CHECKSUMS_FILE}, so nothing in it can be checked; "
                            f"{rebuild_hint(root)}.")
    done = []
    for folder in folders:
        verify_checksums(folder, full=True)
        sums = json.loads((folder / CHECKSUMS_FILE).read_text(encoding="utf-8"))
        done.append((folder, len(sums), sum(int(v["bytes"]) for v in sums.values())))
    return done


# A stamp is named after the artifact's path and its checksums.json's digest: a re-saved artifact
# (new checksums) or a different folder never reads another's stamp.
STAMPS = "verified"


def _stat(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]


def _stamp_path(directory: Path, manifest: bytes) -> Path:
    key = hashlib.sha256(str(directory.resolve()).encode() + b"\0" + manifest).hexdigest()
    return cache_dir() / STAMPS / f"{key[:32]}.json"


def _read_stamp(stamp: Path) -> dict[str, list[int]] | None:
    try:
        found = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # none yet, or damaged: hash everything, as without stamps
        return None
    return found if isinstance(found, dict) else None


def _write_stamp(stamp: Path, seen: dict[str, list[int]]) -> None:
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        tmp = stamp.with_name(f".{stamp.name}.{os.getpid()}")
        tmp.write_text(json.dumps(seen), encoding="utf-8")
        os.replace(tmp, stamp)
    except OSError:  # a read-only cache: the next load hashes again, nothing worse
        pass


def _refuse_if_not_an_artifact(directory: Path) -> None:
    if not (directory / META_FILE).is_file() and not (directory / CHECKSUMS_FILE).is_file():
        raise ArtifactError(f"{directory} is not a structret artifact: {META_FILE} is missing. "
                            f"Was it written by 'structret index', 'structret encode' or 'structret train'?")


def write_meta(directory: str | os.PathLike, meta: dict[str, Any]) -> None:
    with open(Path(directory) / META_FILE, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2, sort_keys=True)


def read_meta(directory: str | os.PathLike, *, verify: bool = True, **expected: Any) -> dict[str, Any]:
    """Read ``structret.json`` (after verify_checksums) and check that the given fields have
    the expected values."""
    file = Path(directory) / META_FILE
    _refuse_if_not_an_artifact(Path(directory))
    verify_checksums(directory, verify=verify)
    if not file.is_file():  # an older manifest did not list it; or verify=False
        raise ArtifactError(f"{file} is missing; {directory} is incomplete. {rebuild_hint(directory)}.")
    try:
        meta = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"{file}:{exc.lineno}: not valid JSON ({exc.msg}); the artifact is damaged, rebuild it.") from None
    for key, want in expected.items():
        if want is not None and meta.get(key) != want:
            raise ArtifactError(
                f"{file}: {key} is {meta.get(key)!r} but {want!r} was expected. "
                f"Rebuild the artifact, or use the {key} it was built with."
            )
    return meta
