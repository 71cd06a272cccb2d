"""A source folder as a search index, in one call, kept fresh by running it again.

``index_source("~/src/project", "idx")`` mines every language the registered miners read
(found by file extension), keeps every function as written (documented or not, tests and short
ones too), encodes them, and writes a hybrid index (BM25 per field of a function, fused with the
vectors) that records the folder it came from.

Running it again costs what changed, not what is there. The index keeps a manifest of the files
it was built from (``source-files.json``: each file's size, modification time, SHA-256 and the ids
of its functions), so a re-run

- lists the folder and compares sizes and times: a file whose size and time are unchanged is not
  read; one whose time moved but whose content hash is the same is not mined;
- mines only new and edited files, drops the functions of deleted ones, and updates the index in
  place (``updates.apply_update``: the same atomic swap as ``structret index --add/--remove``), the
  vectors of unchanged texts kept in ``STRUCTRET_CACHE`` (structret.vector_cache);
- with nothing changed, answers without loading the model;
- encodes a few edited functions with the model's ONNX copy made at build (structret.project.vectors),
  so it imports neither torch nor transformers (seconds of a re-run's start).

A file that no longer parses keeps its previous functions and is named in the result. A different
model, index kind, metric, lexical side or fusion, or a folder moved elsewhere, rebuilds the index;
so does a change touching most of the files (mined then in worker processes).
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from structret import defaults
from structret.search.update import apply_update, update_lock
from structret.artifacts import atomic_dir, verify_checksums
from structret.contracts import HasClose, HasFingerprint, HasRemove, HasStandardMethods
from structret.datasets import load_dataset
from structret.errors import ArtifactError, DataError, StructretError
from structret.mining import Job, mine, mine_file
from structret.models import Model, ModelChoice, load_model
from structret.registry import get_registry
from structret.search.build import build_index, lexical_reader
from structret.search.index import load_index
from structret.project.vectors import encode, make_twin, open_twin, vectors_key
from structret.project.files import FORMAT, read_manifest, rel_of, same_request, scan, sha256, write_manifest

# a change touching more files than this share (and at least _REBUILD_MIN of them) is mined from scratch,
# in worker processes, rather than file by file
_REBUILD_SHARE = 0.25
_REBUILD_MIN = 64
_FEW = 64  # functions to encode that the model's ONNX copy encodes without reading the vector cache


@dataclass
class SourceIndexResult:
    """What ``index_source`` found and did, against the index it replaced (if any)."""

    path: str
    languages: dict[str, int] = field(default_factory=dict)  # language -> functions indexed
    functions: int = 0
    # against the index it replaced, by function text (an edit above a function moves its lines, and
    # so its id, not its text): an edited function counts as new and as gone
    new: int = 0  # functions whose text the previous index did not hold
    gone: int = 0  # texts it held that are no longer there
    unchanged: int = 0
    encoded: int = 0  # texts encoded now
    reused: int = 0  # texts whose vectors were kept from an earlier run
    files: int = 0  # source files the miners read
    files_read: int = 0  # of those, read now (new, or size or time changed)
    files_mined: int = 0  # mined now (new or edited)
    files_gone: int = 0  # deleted since the last run
    rebuilt: bool = True  # False: the index was updated in place (or left as it was)
    reason: str = ""  # why it was built from scratch
    failed: dict[str, str] = field(default_factory=dict)  # file -> why it kept its previous functions
    skipped: dict[str, str] = field(default_factory=dict)  # file -> why it has no functions (not UTF-8, ...)

    def summary(self) -> str:
        found = ", ".join(f"{n} {language}" for language, n in sorted(self.languages.items()))
        text = (f"indexed {self.functions} functions of {self.path} ({found}): {self.new} new or edited, "
                f"{self.gone} gone or edited, {self.unchanged} unchanged; {self.encoded} encoded, "
                f"{self.reused} vectors reused")
        if self.rebuilt:
            text += f"; built from all {self.files} files" + (f" ({self.reason})" if self.reason else "")
        else:
            unchanged = self.files_read - self.files_mined - len(self.failed) - len(self.skipped)
            text += (f"; {self.files_mined} of {self.files} files mined, {self.files_gone} gone, "
                     f"{unchanged} read and found unchanged")
        if self.skipped:
            text += f"; {len(self.skipped)} files skipped ({_some(self.skipped)})"
        if self.failed:
            text += f"; {len(self.failed)} files no longer parse and keep their previous functions ({_some(self.failed)})"
        return text


def _some(reasons: dict[str, str], shown: int = 3) -> str:
    listed = ", ".join(f"{where}: {why}" for where, why in list(reasons.items())[:shown])
    return listed + (f", and {len(reasons) - shown} more" if len(reasons) > shown else "")


def index_source(path: str | os.PathLike, out: str | os.PathLike, *, model: Any = defaults.BACKBONE,
                 kind: str = defaults.INDEX, metric: str = "ip", lexical: str | None = defaults.SOURCE_LEXICAL,
                 fusion: Any = None, batch_size: int = 32, show_progress: bool = True, loaded: Model | None = None,
                 **index_options: Any) -> SourceIndexResult:
    """Index every function under the folder ``path`` into ``out``, or bring the index there up to date
    (see the module docstring). ``model``: a ``Model``, a name or run for ``load_model``, or a
    ``ModelChoice`` (opened only if something must be encoded); ``loaded``: that model, already open
    (a server that keeps it), used instead of opening it again."""
    source = Path(path).expanduser().resolve()
    if not source.is_dir():
        raise DataError(f"{path} is not a folder; give the root of the source tree to index.")
    out = Path(out)
    choice = model if isinstance(model, ModelChoice) else None
    opened: list[Model] = [model] if isinstance(model, Model) else [loaded] if loaded is not None else []

    def the_model(twin: Any = None) -> Model:
        """The model given or open; else the ONNX copy ``twin`` a manifest records, if it opens; else opened."""
        if not opened:
            if (quick := open_twin(twin) if isinstance(twin, dict) else None) is not None:
                return quick
            opened.append(choice.open() if choice is not None else load_model(str(model)))
        return opened[0]

    if isinstance(model, Model):
        backbone = model.backbone
        model_identity: dict[str, Any] = {"name": model.name, "fingerprint": backbone.fingerprint()
                                          if isinstance(backbone, HasFingerprint) else None}
    else:
        model_identity = choice.identity() if choice is not None else {"load": str(model)}
    request = {"model": model_identity, "kind": kind, "metric": metric, "lexical": lexical,
               "fusion": _spec(fusion), "index_options": {k: index_options[k] for k in sorted(index_options)}}
    if lexical:
        # a lexical side may read each function with its place (SearchIndex.readings): an index built before
        # indexes kept those readings has none for its unchanged functions, so it is built again, once.
        # Not asked of the retriever: that imports it, a tenth of an unchanged re-run
        request["readings"] = 1

    with update_lock(out):
        files = scan(source)
        if not files:
            raise DataError(f"{source} holds no file a registered miner reads (structret plugins --kind miner lists "
                            f"them and their languages).")
        previous = read_manifest(out)
        reason = ("no index there yet" if not (out / "structret.json").is_file() else
                  "the index has no manifest of its files, or a damaged one" if previous is None else
                  "the folder moved" if previous.get("root") != str(source) else
                  "another model, index or fusion was asked for" if not same_request(previous, request) else "")
        if reason:
            return _build(source, out, files, request, the_model, kind, metric, lexical, fusion, batch_size,
                          show_progress, index_options, reason)
        assert previous is not None  # no reason to rebuild: there is a manifest
        return _refresh(source, out, files, previous, the_model, batch_size, show_progress, kind, metric, lexical,
                        fusion, index_options, request)


def _spec(fusion: Any) -> Any:
    """A fusion as JSON can hold it (None, a spec string, or a dict of its fields)."""
    if fusion is None or isinstance(fusion, (str, dict)):
        return fusion
    as_dict = getattr(fusion, "as_dict", None)
    return as_dict() if callable(as_dict) else str(fusion)


def _mine_all(source: Path, languages: list[str], tmp: Path, show_progress: bool) -> dict[str, Path]:
    """Every file of each language mined in worker processes: language -> CodeSearchNet rows file."""
    rows = {}
    for language in languages:
        rows[language] = tmp / f"{language}.jsonl.gz"
        mine(source, language, rows[language], repo=source.name, show_progress=show_progress, every_function=True,
             workers=max(1, min(4, os.cpu_count() or 1)))
    return rows


def _records(rows: Path) -> Any:
    # every split: a user's own code is all searchable; each function as written, its lines the file's
    return load_dataset(f"codesearchnet:{rows}", code_field="original_string")


def _build(source: Path, out: Path, files: dict[str, tuple[str, int, int]], request: dict[str, Any],
           the_model: Callable[..., Model], kind: str, metric: str, lexical: str | None, fusion: Any,
           batch_size: int, show_progress: bool, index_options: dict[str, Any], reason: str) -> SourceIndexResult:
    """Mine every file, encode what the vector cache lacks, write a new index and its manifest."""
    result = SourceIndexResult(str(source), files=len(files), files_read=len(files), files_mined=len(files),
                               reason=reason)
    languages = sorted({language for language, _, _ in files.values()})
    ids: list[str] = []
    texts: list[str] = []
    # how the lexical side reads a function (bm25-fields: with its file and class), if its own way
    reader = lexical_reader(lexical) if lexical else None
    readings: list[str] = []
    by_file: dict[str, list[str]] = {rel: [] for rel in files}
    model = the_model()
    with tempfile.TemporaryDirectory(prefix="structret-source-") as tmp:
        for language, rows in _mine_all(source, languages, Path(tmp), show_progress).items():
            dataset = _records(rows)
            result.languages[language] = len(dataset.corpus)
            for doc_id, record in dataset.corpus.items():
                ids.append(doc_id)
                texts.append(model.text(record, "document"))
                if reader is not None:
                    readings.append(reader(record))
                rel = rel_of(doc_id, source)
                if rel in by_file:
                    by_file[rel].append(doc_id)
    if not ids:
        raise DataError(f"the miners found no function in the files under {source} ({', '.join(languages)}); "
                        f"'structret mine {source} --language LANG' shows which files they skipped and why.")
    result.functions = len(ids)
    before = Counter(_previous_texts(out).values())
    now = Counter(texts)
    result.new = sum((now - before).values())
    result.gone = sum((before - now).values())
    result.unchanged = len(texts) - result.new
    key = vectors_key(model)
    vectors, result.encoded, result.reused = encode(model, texts, key, batch_size=batch_size,
                                                    show_progress=show_progress)
    twin = make_twin(model, key, show_progress=show_progress)
    built = build_index(model, vectors=vectors, ids=ids, texts=texts, kind=kind, metric=metric, lexical=lexical,
                        fusion=fusion, readings=readings if reader is not None else None, **index_options)
    built.meta["source"] = {"path": str(source), "languages": result.languages}
    manifest = {"format": FORMAT, "root": str(source), "request": request, **({"encoder": twin} if twin else {}),
                "files": {rel: {"language": language, "size": size, "mtime_ns": mtime,
                                "sha256": sha256(source / rel), "ids": by_file[rel]}
                          for rel, (language, size, mtime) in files.items()}}
    with atomic_dir(out) as staged:  # the previous index stays whole until this one is
        built.save(staged)
        write_manifest(staged, manifest)
    return result


def _refresh(source: Path, out: Path, files: dict[str, tuple[str, int, int]], previous: dict[str, Any],
             the_model: Callable[..., Model], batch_size: int, show_progress: bool, kind: str, metric: str,
             lexical: str | None, fusion: Any, index_options: dict[str, Any],
             request: dict[str, Any]) -> SourceIndexResult:
    """Mine the new and edited files, drop the functions of deleted ones, update the index in place."""
    known: dict[str, dict[str, Any]] = previous["files"]
    result = SourceIndexResult(str(source), files=len(files), rebuilt=False)
    changed: list[str] = []
    entries = dict(known)
    for rel, (language, size, mtime) in files.items():
        was = known.get(rel)
        if was is not None and (was["size"], was["mtime_ns"], was["language"]) == (size, mtime, language):
            continue
        result.files_read += 1
        digest = sha256(source / rel)
        if was is not None and digest is not None and digest == was["sha256"] and was["language"] == language:
            entries[rel] = {**was, "size": size, "mtime_ns": mtime}  # touched, not edited
            continue
        changed.append(rel)
    gone = [rel for rel in known if rel not in files]
    result.files_gone = len(gone)
    if len(changed) > max(_REBUILD_MIN, _REBUILD_SHARE * len(files)):
        return _build(source, out, files, request, the_model, kind, metric, lexical, fusion, batch_size,
                      show_progress, index_options, f"{len(changed)} of {len(files)} files new or edited")
    if not changed and not gone:
        return _unchanged(result, known)

    rows_by_language: dict[str, list[dict[str, Any]]] = {}
    mined: dict[str, list[str]] = {}
    for rel in changed:
        language = files[rel][0]
        miner = get_registry().create("miner", language)
        job = Job(root=str(source), language=language, repo=source.name, sha="", splits=None,
                  standard_methods=frozenset(miner.standard_methods if isinstance(miner, HasStandardMethods) else ()),
                  every_function=True)
        entry = mine_file(job, rel, miner)
        if "skip" in entry:
            where, why, detail = entry["skip"]
            reason = f"{why} at {where}" + (f" ({detail})" if detail else "")
            if rel in known and known[rel]["ids"]:  # keeps its previous functions, and is named
                result.failed[rel] = reason
                entries[rel] = known[rel]  # its old size and time: the next run tries it again
            else:
                result.skipped[rel] = reason
                entries[rel] = {"language": language, "size": files[rel][1], "mtime_ns": files[rel][2],
                                "sha256": sha256(source / rel), "ids": []}
            continue
        result.files_mined += 1
        rows_by_language.setdefault(language, []).extend(entry["rows"])
        mined[rel] = []
        entries[rel] = {"language": language, "size": files[rel][1], "mtime_ns": files[rel][2],
                        "sha256": sha256(source / rel), "ids": mined[rel]}
    for rel in gone:
        entries.pop(rel, None)
    if not mined and not gone:  # every changed file failed or holds nothing: the index stays as it is
        return _unchanged(result, known)

    recorded = previous.get("encoder")
    twin: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
    model = the_model(twin or None)
    quick = bool(twin) and model.backbone_name == "onnx" and model.model == twin.get("onnx")
    add_ids: list[str] = []
    add_texts: list[str] = []
    reader = lexical_reader(lexical) if lexical else None
    add_readings: list[str] = []
    with tempfile.TemporaryDirectory(prefix="structret-source-") as tmp:
        for language, rows in rows_by_language.items():
            file = Path(tmp) / f"{language}.jsonl.gz"
            with gzip.open(file, "wt", encoding="utf-8") as sink:
                sink.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
            for doc_id, record in _records(file).corpus.items():
                owner = rel_of(doc_id, source)
                if owner in mined:
                    mined[owner].append(doc_id)
                add_ids.append(doc_id)
                add_texts.append(model.text(record, "document"))
                if reader is not None:
                    add_readings.append(reader(record))
    remove = [i for rel in [*mined, *gone] for i in (known.get(rel) or {}).get("ids", [])]
    if sum(len(e["ids"]) for e in entries.values()) == 0:
        raise DataError(f"the miners found no function left in the files under {source}; the index at {out} "
                        f"was left as it was.")

    found = load_index(out, texts=True)
    if remove and not isinstance(found.index, HasRemove):  # this kind cannot remove: build anew
        if isinstance(found.index, HasClose):
            found.index.close()
        return _build(source, out, files, request, the_model, kind, metric, lexical, fusion, batch_size,
                      show_progress, index_options, f"a {found.kind} index cannot remove the functions of edited files")
    before = Counter(found.texts[i] for i in remove if found.texts and i in found.texts)
    now = Counter(add_texts)
    result.new = sum((now - before).values())
    result.gone = sum((before - now).values())
    # the ONNX copy encodes a few functions faster than the cache of all the model's vectors is read
    key = (twin["vectors"] if len(add_texts) > _FEW else None) if quick else vectors_key(model)
    vectors, result.encoded, result.reused = encode(model, add_texts, key, keep=not quick, batch_size=batch_size,
                                                    show_progress=show_progress) if add_ids else (None, 0, 0)
    languages: Counter[str] = Counter()
    for entry in entries.values():
        languages[entry["language"]] += len(entry["ids"])
    result.languages = {language: n for language, n in languages.items() if n}
    result.functions = sum(languages.values())
    result.unchanged = result.functions - result.new
    found.meta["source"] = {"path": str(source), "languages": result.languages}
    manifest = {**previous, "files": entries}
    try:
        apply_update(found, out, add_ids, vectors, add_texts, remove, f"{source} (files changed since the last run)",
                     extra=lambda staged: write_manifest(staged, manifest),
                     readings=add_readings if reader is not None else None)
    finally:
        if isinstance(found.index, HasClose):
            found.index.close()
    return result


def _unchanged(result: SourceIndexResult, known: dict[str, dict[str, Any]]) -> SourceIndexResult:
    """Nothing to mine or drop: the index stays as it is, and the model is never loaded."""
    languages: Counter[str] = Counter()
    for entry in known.values():
        languages[entry["language"]] += len(entry["ids"])
    result.languages = {language: n for language, n in languages.items() if n}
    result.functions = result.unchanged = sum(languages.values())
    result.reused = 0
    return result


def refresh_source(out: str | os.PathLike, *, batch_size: int = 32, show_progress: bool = True,
                   loaded: Model | None = None) -> SourceIndexResult:
    """``index_source`` again, on the folder the index at ``out`` records, with the model, index and fusion it
    was built with (its manifest): what ``structret mcp``'s refresh runs. ``loaded``: the index's model,
    already open (the server's), so a refresh costs what changed and no model load."""
    manifest = read_manifest(Path(out))
    if manifest is None:
        raise StructretError(f"{out} has no manifest of the files it was built from (an index of a dataset, or one "
                             f"built by an older structret); build it with 'structret index SOURCE --out {out}'.")
    asked = manifest["request"]
    recorded = asked["model"]
    model: Any
    if "backbone" in recorded:  # what a command named
        model = ModelChoice(recorded["backbone"], recorded["model"], recorded.get("options") or {})
    elif "load" in recorded:
        model = recorded["load"]
    else:  # a Model given from Python: the one the index records (its fingerprint is compared)
        model = load_index(out, texts=False).model
    if not Path(manifest["root"]).is_dir():
        raise StructretError(f"the folder this index was built from, {manifest['root']}, is gone; index the project "
                             f"where it is now with 'structret index PATH --out {out}'.")
    return index_source(manifest["root"], out, model=model, kind=asked["kind"], metric=asked["metric"],
                        lexical=asked["lexical"], fusion=asked["fusion"], batch_size=batch_size,
                        show_progress=show_progress, loaded=loaded, **asked["index_options"])


def _previous_texts(out: str | os.PathLike) -> dict[str, str]:
    """The texts of the index already at ``out`` (empty: none, one without texts, or a damaged one,
    which is replaced: then everything counts as new). Only the texts are read, not the index."""
    from structret.search.texts import read_index_texts

    if not (Path(out) / "structret.json").is_file():
        return {}
    try:
        verify_checksums(out)
    except (ArtifactError, StructretError):
        return {}
    return read_index_texts(out)[0]
