"""CodeSearchNet jsonl(.gz), as published by github/CodeSearchNet and as ``structret mine`` writes it.

Published layout: ``{lang}/final/jsonl/{split}/{lang}_{split}_{n}.jsonl.gz``. The query is
``' '.join(docstring_tokens)`` (the CodeBERT/CodeXGLUE convention: the tokenized first
paragraph); the ``docstring`` field holds the whole docstring and would leak far more than
a user's query does. The document is ``code``; for Python that field still holds the
docstring the query came from, so it is taken out (see ``_docstring``).
"""

from __future__ import annotations

import glob
import os
import re

from structret.errors import DataError
from structret.records import CODE_SEARCH, MAX_FIELD_CHARS, CodeRecord, Dataset, Query, ReadStats

from structret_datasets._docstring import strip_python_docstring
from structret_datasets._rows import (
    BadRow,
    LeftOut,
    get_str,
    get_tokens,
    iter_jsonl,
    natural_key,
    record_skip,
)

READER = "codesearchnet"
SPLITS = ("train", "valid", "test")
EXPECTED = "a CodeSearchNet .jsonl/.jsonl.gz file, a glob, or a folder such as python/final/jsonl"


class _File:
    """One input file and what its place in the published layout says about it."""

    def __init__(self, path: str, display: str, splits: tuple[str, ...], under_root: bool):
        self.path = path
        self.display = display
        self.name = os.path.basename(path)
        self.split = None
        self.language = None
        match = re.match(r"^(.+)_([A-Za-z]+)_\d+\.jsonl(?:\.gz)?$", self.name)
        if match and match.group(2) in splits:
            self.language, self.split = match.group(1), match.group(2)
        elif under_root:
            # Folder names count only below the folder the user gave: a mined file that
            # happens to live in /tmp/test/ is not the 'test' split.
            parts = display.replace(os.sep, "/").split("/")
            folders = [p for p in parts[:-1] if p in splits]
            self.split = folders[-1] if folders else None
            if "final" in parts[1:-1]:
                self.language = parts[parts.index("final", 1) - 1]


def _find_files(path: str, splits: tuple[str, ...]) -> list[_File]:
    if os.path.isdir(path):
        found = [
            os.path.join(folder, name)
            for folder, _, names in os.walk(path)
            for name in names
            if name.endswith((".jsonl", ".jsonl.gz"))
        ]
        if not found:
            raise DataError(f"{READER}: no .jsonl or .jsonl.gz files under the folder {path}. Pass {EXPECTED}.")
        files = [_File(f, os.path.relpath(f, path), splits, True) for f in found]
    elif os.path.isfile(path):
        files = [_File(path, path, splits, False)]
    elif glob.has_magic(path):
        found = [f for f in glob.glob(path, recursive=True) if os.path.isfile(f)]
        if not found:
            raise DataError(f"{READER}: the pattern {path} matches no files. Pass {EXPECTED}.")
        files = [_File(f, f, splits, False) for f in found]
    else:
        raise DataError(f"{READER}: {path} does not exist. Pass {EXPECTED}.")
    # CodeSearchNet's 999-distractor batches follow file order, so python_test_10 must follow _9.
    return sorted(files, key=lambda f: natural_key(f.display))


def _select(files: list[_File], path: str, split: str | None, language: str | None) -> list[_File]:
    if language:
        kept = [f for f in files if f.language is None or f.language.lower() == language]
        if not kept:
            found = sorted({f.language for f in files if f.language})
            raise DataError(
                f"{READER}: no files for language '{language}' under {path}; "
                f"the languages found are: {', '.join(found)}. Choose one of them."
            )
        files = kept
    if split:
        # A file in the published layout belongs to one split; a file without that
        # structure (what 'structret mine' writes) is filtered row by row on 'partition'.
        kept = [f for f in files if f.split is None or f.split == split]
        if not kept:
            found = sorted({f.split for f in files if f.split})
            raise DataError(
                f"{READER}: no files for split '{split}' in {path}; "
                f"the splits found are: {', '.join(found)}. Choose one of them."
            )
        files = kept
    return files


def read(path: str, *, split: str | None = None, language: str | None = None, code_field: str = "code",
         max_field_chars: int = MAX_FIELD_CHARS) -> Dataset:
    """The rows of ``path`` (options: structret_datasets.options.CodeSearchNet)."""
    language = language.lower() if language else None
    limit = max_field_chars
    splits = SPLITS if split is None or split in SPLITS else (*SPLITS, split)
    files = _select(_find_files(path, splits), path, split, language)

    described = ", ".join(f"{k}={v}" for k, v in (("split", split), ("language", language)) if v)
    stats = ReadStats(source=f"{READER} {path}" + (f" ({described})" if described else "") + f", {len(files)} file(s)")
    corpus: dict[str, CodeRecord] = {}
    queries: dict[str, Query] = {}
    qrels: dict[str, dict[str, int]] = {}
    pairs: list[tuple[str, str]] = []
    unsplit = 0  # rows asked for by split that have no partition: a file mined without --splits

    for file in files:
        for lineno, where, row in iter_jsonl(file.path, stats, file.display, limit):
            try:
                if split and file.split is None:
                    partition = get_str(row, "partition")
                    if not partition:
                        unsplit += 1
                        raise BadRow("missing field 'partition'")
                    if partition != split:
                        raise LeftOut(f"partition is not '{split}'")
                row_language = get_str(row, "language") or file.language or ""
                if language and row_language.lower() != language:
                    raise LeftOut(f"language is not '{language}'")
                if code_field == "original_string":  # as written; rows without it (older files) fall back
                    code = get_str(row, "original_string") or get_str(row, "code", required=True)
                else:
                    code = get_str(row, "code", required=True)
                    if row_language.lower() == "python":
                        code = strip_python_docstring(code)
                if not code.strip():
                    raise BadRow("empty code")
                docstring_tokens = get_tokens(row, "docstring_tokens", required=True)
                text = " ".join(docstring_tokens).strip()
                if not text:
                    raise BadRow("empty query")
                url = get_str(row, "url")
                # The url names a function in CodeSearchNet; rows without one (or repeating
                # one) still get a stable id from where they are.
                rid = url if url and url not in corpus else f"{file.name}:{lineno}"
                if rid in corpus:
                    raise BadRow("duplicate id")
                record = CodeRecord(
                    id=rid,
                    code=code,
                    language=row_language,
                    docstring=get_str(row, "docstring"),
                    func_name=get_str(row, "func_name"),
                    repo=get_str(row, "repo"),
                    path=get_str(row, "path"),
                    url=url,
                    code_tokens=get_tokens(row, "code_tokens"),
                    docstring_tokens=docstring_tokens,
                    pair_kind=get_str(row, "pair_kind"),
                )
            except BadRow as bad:
                record_skip(stats, where, bad)
                continue
            stats.use()
            corpus[rid] = record
            queries[rid] = Query(id=rid, text=text)
            qrels[rid] = {rid: 1}
            pairs.append((rid, rid))

    if split and not corpus and unsplit:
        raise DataError(
            f"{READER} {path}: split '{split}' asked for, but {unsplit} row(s) have no 'partition' "
            f"(mined without --splits). Leave out --split to use every row, or mine again with "
            f"--splits 80/10/10."
        )
    return Dataset(name=READER, corpus=corpus, queries=queries, qrels=qrels, stats=stats, pairs=pairs,
                   task=CODE_SEARCH)
