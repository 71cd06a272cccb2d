"""A source folder as a search index, in one call, kept fresh by running it again.

``index_source("~/src/project", "idx")`` cuts every file the chunker reads (19 languages by their
tree-sitter grammars, and text files) into units that hold every line: each definition, and the code
between definitions (structret.project.units, the ``syntax`` chunker); encodes them and writes a hybrid
index (BM25 per field of a unit and its place in the project, fused with the vectors) that records the
folder it came from. ``model=None``: a lexical index, no vectors (searched without a model).

Running it again costs what changed, not what is there. The index keeps a manifest of the files
it was built from (``source-files.json``: each file's size, modification time, SHA-256 and the ids
of its units), so a re-run

- lists the folder and compares sizes and times: a file whose size and time are unchanged is not
  read; one whose time moved but whose content hash is the same is not cut again;
- cuts only new and edited files, drops the units of deleted ones, and updates the index in
  place (``updates.apply_update``: the same atomic swap as ``structret index --add/--remove``), the
  vectors of unchanged texts kept in ``STRUCTRET_CACHE`` (structret.vector_cache);
- with nothing changed, answers without loading the model;
- encodes a few edited units with the model's ONNX copy made at build (structret.project.vectors),
  so it imports neither torch nor transformers (seconds of a re-run's start).

A file left out (binary, not UTF-8, too large, minified, unreadable, gone while indexing) is named and
counted; one left out for a reason that may pass is tried again by the next run, and an edited file the
chunker fails on keeps its previous units. A different model, chunker, index kind, metric, lexical side
or fusion, or a folder moved elsewhere, rebuilds the index; so does a change touching most of the files.
A lexical index is rebuilt on any change (cutting and fitting BM25 cost about a second; no vectors).

Over 400 lines because a build and a refresh share one request, one manifest and one result, and read
best side by side (_Build); cutting a file is structret.project.units, its vectors .vectors.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from structret import defaults
from structret.search.update import apply_update, update_lock
from structret.artifacts import atomic_dir, verify_checksums
from structret.contracts import HasClose, HasFingerprint, HasRemove
from structret.errors import ArtifactError, DataError, StructretError
from structret.models import Model, ModelChoice, load_model
from structret.registry import get_registry
from structret.search.build import build_index, lexical_reader
from structret.search.index import load_index
from structret.search.ranking import Ranking
from structret.project.vectors import encode, make_twin, open_twin, vectors_key
from structret.project.files import FORMAT, list_files, read_manifest, same_request, sha256, write_manifest
from structret.project.units import FileUnits, cut_file

# a change touching more files than this share (and at least _REBUILD_MIN of them) is built from scratch,
# in worker processes, rather than file by file
_REBUILD_SHARE = 0.25
_REBUILD_MIN = 64
_FEW = 64  # units to encode that the model's ONNX copy encodes without reading the vector cache


@dataclass
class SourceIndexResult:
    """What ``index_source`` found and did, against the index it replaced (if any)."""

    path: str
    languages: dict[str, int] = field(default_factory=dict)  # language -> units indexed
    units: int = 0
    # against the index it replaced, by unit text (an edit above a unit moves its lines, and so its id,
    # not its text): an edited unit counts as new and as gone
    new: int = 0  # units whose text the previous index did not hold
    gone: int = 0  # texts it held that are no longer there
    unchanged: int = 0
    encoded: int = 0  # texts encoded now
    reused: int = 0  # texts whose vectors were kept from an earlier run
    files: int = 0  # files the chunker reads
    files_read: int = 0  # of those, read now (new, or size or time changed)
    files_cut: int = 0  # cut into units now (new or edited)
    files_gone: int = 0  # deleted since the last run
    other_files: int = 0  # files of a type the chunker does not read (images, archives ...)
    rebuilt: bool = True  # False: the index was updated in place (or left as it was)
    reason: str = ""  # why it was built from scratch
    failed: dict[str, str] = field(default_factory=dict)  # file -> why it kept its previous units
    skipped: dict[str, str] = field(default_factory=dict)  # file -> why it has no units (not UTF-8, ...)

    def summary(self) -> str:
        found = ", ".join(f"{n} {language}" for language, n in sorted(self.languages.items()))
        text = (f"indexed {self.units} units of {self.path} ({found}): {self.new} new or edited, "
                f"{self.gone} gone or edited, {self.unchanged} unchanged; {self.encoded} encoded, "
                f"{self.reused} vectors reused")
        if self.rebuilt:
            text += f"; built from all {self.files} files" + (f" ({self.reason})" if self.reason else "")
        else:
            unchanged = self.files_read - self.files_cut - len(self.failed) - len(self.skipped)
            text += (f"; {self.files_cut} of {self.files} files cut, {self.files_gone} gone, "
                     f"{unchanged} read and found unchanged")
        if self.skipped:
            text += f"; {len(self.skipped)} files skipped ({_some(self.skipped)})"
        if self.failed:
            text += f"; {len(self.failed)} files failed and keep their previous units ({_some(self.failed)})"
        return text


def _some(reasons: dict[str, str], shown: int = 3) -> str:
    listed = ", ".join(f"{where}: {why}" for where, why in list(reasons.items())[:shown])
    return listed + (f", and {len(reasons) - shown} more" if len(reasons) > shown else "")


def index_source(path: str | os.PathLike, out: str | os.PathLike, *, model: Any = defaults.BACKBONE,
                 kind: str = defaults.INDEX, metric: str = "ip", lexical: str | None = defaults.SOURCE_LEXICAL,
                 fusion: Any = None, batch_size: int = 32, show_progress: bool = True, loaded: Model | None = None,
                 chunker: str = defaults.CHUNKER, chunker_options: dict[str, Any] | None = None,
                 ranking: Any = None, **index_options: Any) -> SourceIndexResult:
    """Index every file under the folder ``path`` into ``out``, cut into units by the registered ``chunker``
    (with ``chunker_options``), or bring the index there up to date (see the module docstring). ``model``: a
    ``Model``, a name or run for ``load_model``, a ``ModelChoice`` (opened only if something must be
    encoded), or None: a lexical index (``lexical`` needed); ``loaded``: that model, already open (a server
    that keeps it), used instead of opening it again. ``ranking``: the rules its searches apply
    (structret.search.ranking: a Ranking, a dict or a spec; "" none); None: the defaults chosen on semble's
    validation repositories for a lexical or a hybrid index (defaults.RANKING)."""
    source = Path(path).expanduser().resolve()
    if not source.is_dir():
        raise DataError(f"{path} is not a folder; give the root of the source tree to index.")
    if model is None and not lexical:
        raise StructretError("an index without a model is a lexical index: give lexical= (bm25-project).")
    out = Path(out)
    choice = model if isinstance(model, ModelChoice) else None
    opened: list[Model] = [model] if isinstance(model, Model) else [loaded] if loaded is not None else []

    def the_model(twin: Any = None) -> Model | None:
        """The model given or open; else the ONNX copy ``twin`` a manifest records, if it opens; else opened.
        None for a lexical index."""
        if model is None:
            return None
        if not opened:
            if (quick := open_twin(twin) if isinstance(twin, dict) else None) is not None:
                return quick
            opened.append(choice.open() if choice is not None else load_model(str(model)))
        return opened[0]

    if isinstance(model, Model):
        backbone = model.backbone
        model_identity: dict[str, Any] | None = {"name": model.name, "fingerprint": backbone.fingerprint()
                                                 if isinstance(backbone, HasFingerprint) else None}
    else:
        model_identity = choice.identity() if choice is not None else None if model is None else {"load": str(model)}
    options = dict(chunker_options or {})
    if ranking is None:
        ranking = defaults.RANKING["lexical" if model is None else "hybrid"] if lexical else ""
    rules = Ranking.of(ranking or None).as_dict()
    request = {"model": model_identity, "kind": kind, "metric": metric, "lexical": lexical,
               "fusion": _spec(fusion), "index_options": {k: index_options[k] for k in sorted(index_options)},
               "chunker": {"name": chunker, "options": {k: options[k] for k in sorted(options)}}, "ranking": rules}
    if lexical:
        # a lexical side may read each unit with its place (SearchIndex.readings): an index built before
        # indexes kept those readings has none for its unchanged units, so it is built again, once.
        # Not asked of the retriever: that imports it, a tenth of an unchanged re-run
        request["readings"] = 1
    cutter = get_registry().create("chunker", chunker, **options)

    with update_lock(out):
        files = list_files(source)
        previous = read_manifest(out)
        reason = ("no index there yet" if not (out / "structret.json").is_file() else
                  "the index has no manifest of its files, or a damaged one" if previous is None else
                  "the folder moved" if previous.get("root") != str(source) else
                  "another model, chunker, index or fusion was asked for" if not same_request(previous, request)
                  else "")
        build = _Build(source, out, cutter, request, the_model, kind, metric, lexical, fusion, batch_size,
                       show_progress, index_options)
        if reason:
            return build.all(files, reason)
        assert previous is not None  # no reason to rebuild: there is a manifest
        return build.refresh(files, previous)


def _spec(fusion: Any) -> Any:
    """A fusion as JSON can hold it (None, a spec string, or a dict of its fields)."""
    if fusion is None or isinstance(fusion, (str, dict)):
        return fusion
    as_dict = getattr(fusion, "as_dict", None)
    return as_dict() if callable(as_dict) else str(fusion)


@dataclass
class _Build:
    """One run of index_source: what it was asked for, and the two ways to answer it."""

    source: Path
    out: Path
    chunker: Any
    request: dict[str, Any]
    the_model: Callable[..., Model | None]
    kind: str
    metric: str
    lexical: str | None
    fusion: Any
    batch_size: int
    show_progress: bool
    index_options: dict[str, Any]

    def _cut(self, rels: list[str]) -> list[FileUnits]:
        from tqdm.auto import tqdm

        return [cut_file(self.source, rel, self.chunker)
                for rel in tqdm(rels, desc="cutting files into units", unit="file", disable=not self.show_progress)]

    def all(self, files: dict[str, tuple[int, int]], reason: str) -> SourceIndexResult:
        """Cut every file, encode what the vector cache lacks, write a new index and its manifest."""
        source, out = self.source, self.out
        result = SourceIndexResult(str(source), files=len(files), files_read=len(files), reason=reason)
        ids: list[str] = []
        texts: list[str] = []
        # how the lexical side reads a unit (bm25-project: with its file and scope), if its own way
        reader = lexical_reader(self.lexical) if self.lexical else None
        readings: list[str] = []
        entries: dict[str, dict[str, Any]] = {}
        model = self.the_model()
        for cut in self._cut(list(files)):
            size, mtime = files[cut.rel]
            if cut.language is None and not cut.skipped:
                result.other_files += 1
            elif cut.skipped:
                result.skipped[cut.rel] = cut.skipped
            elif cut.language is not None:
                result.files_cut += 1
                result.languages[cut.language] = result.languages.get(cut.language, 0) + len(cut.records)
            if cut.retry:
                continue  # not recorded: the next run tries it again
            entries[cut.rel] = {"language": cut.language, "size": size, "mtime_ns": mtime,
                                "sha256": sha256(source / cut.rel) if cut.records else None,
                                "ids": [r.id for r in cut.records]}
            for record in cut.records:
                ids.append(record.id)
                texts.append(model.text(record, "document") if model is not None else record.code)
                if reader is not None:
                    readings.append(reader(record))
        result.files = len(files) - result.other_files
        if not ids:
            raise DataError(f"{source} holds no file the chunker reads, or only empty ones ({len(files)} files; "
                            f"{len(result.skipped)} left out: {_some(result.skipped) or 'none'}).")
        result.units = len(ids)
        before = Counter(_previous_texts(out).values())
        now = Counter(texts)
        result.new = sum((now - before).values())
        result.gone = sum((before - now).values())
        result.unchanged = len(texts) - result.new
        twin = None
        if model is None:
            built = build_index(None, ids=ids, texts=texts, lexical=self.lexical,
                                readings=readings if reader is not None else None)
        else:
            key = vectors_key(model)
            vectors, result.encoded, result.reused = encode(model, texts, key, batch_size=self.batch_size,
                                                            show_progress=self.show_progress)
            twin = make_twin(model, key, show_progress=self.show_progress)
            built = build_index(model, vectors=vectors, ids=ids, texts=texts, kind=self.kind, metric=self.metric,
                                lexical=self.lexical, fusion=self.fusion, default_fusion=defaults.SOURCE_FUSION,
                                readings=readings if reader is not None else None, **self.index_options)
        built.meta["source"] = {"path": str(source), "languages": result.languages}
        built.set_ranking(self.request["ranking"])
        manifest = {"format": FORMAT, "root": str(source), "request": self.request,
                    **({"encoder": twin} if twin else {}), "files": entries}
        with atomic_dir(out) as staged:  # the previous index stays whole until this one is
            built.save(staged)
            write_manifest(staged, manifest)
        return result

    def refresh(self, files: dict[str, tuple[int, int]], previous: dict[str, Any]) -> SourceIndexResult:
        """Cut the new and edited files, drop the units of deleted ones, update the index in place."""
        source, out = self.source, self.out
        known: dict[str, dict[str, Any]] = previous["files"]
        result = SourceIndexResult(str(source), files=len(files), rebuilt=False)
        changed: list[str] = []
        entries = dict(known)
        for rel, (size, mtime) in files.items():
            was = known.get(rel)
            if was is not None and (was["size"], was["mtime_ns"]) == (size, mtime):
                continue
            result.files_read += 1
            digest = sha256(source / rel)
            if was is not None and digest is not None and digest == was["sha256"]:
                entries[rel] = {**was, "size": size, "mtime_ns": mtime}  # touched, not edited
                continue
            changed.append(rel)
        gone = [rel for rel in known if rel not in files]
        result.files_gone = len(gone)
        if len(changed) > max(_REBUILD_MIN, _REBUILD_SHARE * len(files)):
            return self.all(files, f"{len(changed)} of {len(files)} files new or edited")
        if not changed and not gone:
            return _unchanged(result, known)
        if self.request["model"] is None:  # a lexical index: no vectors to keep, so cut and fit anew
            return self.all(files, "a lexical index is built again on any change")

        added: list[Any] = []
        cut_now: dict[str, list[str]] = {}
        for cut in self._cut(changed):
            size, mtime = files[cut.rel]
            if cut.skipped and cut.retry and known.get(cut.rel, {}).get("ids"):
                result.failed[cut.rel] = cut.skipped  # keeps its previous units; its old size and time: tried again
                continue
            if cut.skipped:
                result.skipped[cut.rel] = cut.skipped
            elif cut.language is not None:
                result.files_cut += 1
            if cut.retry:
                entries.pop(cut.rel, None)
                if cut.rel in known:
                    gone.append(cut.rel)
                continue
            cut_now[cut.rel] = [r.id for r in cut.records]
            entries[cut.rel] = {"language": cut.language, "size": size, "mtime_ns": mtime,
                                "sha256": sha256(source / cut.rel) if cut.records else None, "ids": cut_now[cut.rel]}
            added.extend(cut.records)
        for rel in gone:
            entries.pop(rel, None)
        if not cut_now and not gone:  # every changed file failed: the index stays as it is
            return _unchanged(result, known)

        recorded = previous.get("encoder")
        twin: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
        model = self.the_model(twin or None)
        assert model is not None  # a lexical index was built again above
        quick = bool(twin) and model.backbone_name == "onnx" and model.model == twin.get("onnx")
        reader = lexical_reader(self.lexical) if self.lexical else None
        add_ids = [r.id for r in added]
        add_texts = [model.text(r, "document") for r in added]
        add_readings = [reader(r) for r in added] if reader is not None else []
        remove = [i for rel in [*cut_now, *gone] for i in (known.get(rel) or {}).get("ids", [])]
        if sum(len(e["ids"]) for e in entries.values()) == 0:
            raise DataError(f"no unit is left in the files under {source}; the index at {out} was left as it was.")

        found = load_index(out, texts=True)
        if remove and not isinstance(found.index, HasRemove):  # this kind cannot remove: build anew
            if isinstance(found.index, HasClose):
                found.index.close()
            return self.all(files, f"a {found.kind} index cannot remove the units of edited files")
        before = Counter(found.texts[i] for i in remove if found.texts and i in found.texts)
        now = Counter(add_texts)
        result.new = sum((now - before).values())
        result.gone = sum((before - now).values())
        # the ONNX copy encodes a few units faster than the cache of all the model's vectors is read
        key = (twin["vectors"] if len(add_texts) > _FEW else None) if quick else vectors_key(model)
        vectors, result.encoded, result.reused = encode(model, add_texts, key, keep=not quick,
                                                        batch_size=self.batch_size,
                                                        show_progress=self.show_progress) if add_ids else (None, 0, 0)
        _count(result, entries)
        result.unchanged = result.units - result.new
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


def _count(result: SourceIndexResult, entries: dict[str, dict[str, Any]]) -> None:
    """The units per language, and the files the chunker reads, of a manifest's entries."""
    languages: Counter[str] = Counter()
    for entry in entries.values():
        if entry["language"] is not None:
            languages[entry["language"]] += len(entry["ids"])
    result.languages = {language: n for language, n in languages.items() if n}
    result.units = sum(languages.values())
    result.other_files = sum(entry["language"] is None for entry in entries.values())
    result.files = len(entries) - result.other_files


def _unchanged(result: SourceIndexResult, known: dict[str, dict[str, Any]]) -> SourceIndexResult:
    """Nothing to cut or drop: the index stays as it is, and the model is never loaded."""
    _count(result, known)
    result.unchanged = result.units
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
    if recorded is None:  # a lexical index
        model = None
    elif "backbone" in recorded:  # what a command named
        model = ModelChoice(recorded["backbone"], recorded["model"], recorded.get("options") or {})
    elif "load" in recorded:
        model = recorded["load"]
    else:  # a Model given from Python: the one the index records (its fingerprint is compared)
        model = load_index(out, texts=False).model
    if not Path(manifest["root"]).is_dir():
        raise StructretError(f"the folder this index was built from, {manifest['root']}, is gone; index the project "
                             f"where it is now with 'structret index PATH --out {out}'.")
    chunker = asked.get("chunker") or {}
    return index_source(manifest["root"], out, model=model, kind=asked["kind"], metric=asked["metric"],
                        lexical=asked["lexical"], fusion=asked["fusion"], batch_size=batch_size,
                        show_progress=show_progress, loaded=loaded, chunker=chunker.get("name", defaults.CHUNKER),
                        chunker_options=chunker.get("options"), ranking=asked.get("ranking") or "",
                        **asked["index_options"])


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
