"""A source folder as a search index, in one call, kept fresh by running it again.

``index_source("~/src/project", "idx")`` mines every language the registered miners read
(found by file extension), keeps every function (documented or not, tests and short ones too),
encodes them, and writes a hybrid index (BM25 per field of a function, fused with the vectors)
that records the folder it came from. Running it again on the same folder re-encodes only
functions whose text changed: vectors are kept by text in ``STRUCTRET_CACHE`` (structret.
vector_cache), and the result says how many functions are new or edited, gone, and unchanged.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from structret import defaults
from structret.api.updates import update_lock
from structret.artifacts import cache_dir, verify_checksums
from structret.contracts import optional
from structret.datasets import load_dataset
from structret.errors import ArtifactError, DataError
from structret.mining import mine
from structret.mining.sources import DEFAULT_EXCLUDE, source_files
from structret.models import Model, load_model
from structret.registry import get_registry
from structret.search_index import build_index


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

    def summary(self) -> str:
        found = ", ".join(f"{n} {language}" for language, n in self.languages.items())
        return (f"indexed {self.functions} functions of {self.path} ({found}): {self.new} new or edited, "
                f"{self.gone} gone or edited, {self.unchanged} unchanged; {self.encoded} encoded, "
                f"{self.reused} vectors reused")


def languages_in(path: str | os.PathLike) -> list[str]:
    """The languages (registered miners' names) with at least one file under ``path``."""
    registry = get_registry()
    return [name for name in registry.names("miner")
            if next(source_files(Path(path), tuple(registry.create("miner", name).extensions),
                                 frozenset(DEFAULT_EXCLUDE)), None) is not None]


def index_source(path: str | os.PathLike, out: str | os.PathLike, *, model: Any = defaults.BACKBONE, kind: str = defaults.INDEX,
                 metric: str = "ip", lexical: str | None = defaults.SOURCE_LEXICAL, fusion: Any = None, batch_size: int = 32,
                 show_progress: bool = True, **index_options: Any) -> SourceIndexResult:
    """Index every function under the folder ``path`` into ``out`` (see the module docstring)."""
    from structret.vector_cache import VectorCache, cache_key  # numpy: kept out of import structret.api

    source = Path(path).expanduser().resolve()
    if not source.is_dir():
        raise DataError(f"{path} is not a folder; give the root of the source tree to index.")
    languages = languages_in(source)
    if not languages:
        raise DataError(f"{source} holds no file a registered miner reads (structret plugins --kind miner lists "
                        f"them and their languages).")
    model = model if isinstance(model, Model) else load_model(str(model))
    if fusion is None and lexical:  # a trained run's recipe carries the fusion chosen on validation with it
        fusion = model.recipe.get("fusion") or None
    ids: list[str] = []
    texts: list[str] = []
    result = SourceIndexResult(str(source))
    with tempfile.TemporaryDirectory(prefix="structret-source-") as tmp:
        for language in languages:
            rows = Path(tmp) / f"{language}.jsonl.gz"
            mine(source, language, rows, repo=source.name, show_progress=show_progress, every_function=True,
                 workers=max(1, min(4, os.cpu_count() or 1)))
            # every split: a user's own code is all searchable; each function as written, its lines the file's
            dataset = load_dataset(f"codesearchnet:{rows}", code_field="original_string")
            result.languages[language] = len(dataset.corpus)
            for doc_id, record in dataset.corpus.items():
                ids.append(doc_id)
                texts.append(model.text(record, "document"))
    if not ids:
        raise DataError(f"the miners found no function in the files under {source} ({', '.join(languages)}); "
                        f"'structret mine {source} --language LANG' shows which files they skipped and why.")
    result.functions = len(ids)
    with update_lock(out):
        before = Counter(_previous_texts(out).values())
        now = Counter(texts)
        result.new = sum((now - before).values())
        result.gone = sum((before - now).values())
        result.unchanged = len(texts) - result.new
        backbone = model.backbone
        fingerprint = optional("backbone", backbone, "fingerprint")
        if fingerprint is not None:
            cache = VectorCache(cache_dir(), cache_key(fingerprint(), "document", model.text_format.name or ""))
            vectors = cache.encode(texts, lambda batch: backbone.encode(
                batch, kind="document", batch_size=batch_size, show_progress=show_progress))
            result.encoded, result.reused = cache.encoded, cache.reused
        else:
            vectors = backbone.encode(texts, kind="document", batch_size=batch_size, show_progress=show_progress)
            result.encoded = len(texts)
        built = build_index(model, vectors=vectors, ids=ids, texts=texts, kind=kind, metric=metric, lexical=lexical,
                            fusion=fusion, **index_options)
        built.meta["source"] = {"path": str(source), "languages": result.languages}
        built.save(out)
    return result


def _previous_texts(out: str | os.PathLike) -> dict[str, str]:
    """The texts of the index already at ``out`` (empty: none, one without texts, or a damaged one,
    which is replaced: then everything counts as new). Only the texts are read, not the index."""
    from structret.embeddings import read_index_texts  # numpy: kept out of import structret.api

    if not (Path(out) / "structret.json").is_file():
        return {}
    try:
        verify_checksums(out)
    except ArtifactError:
        return {}
    return read_index_texts(out)[0]
