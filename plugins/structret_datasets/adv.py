"""CodeXGLUE NL-code-search-Adv: ``train.jsonl``, ``valid.jsonl``, ``test.jsonl``.

Rows are CodeSearchNet rows plus ``idx``: ``url`` names the query, ``idx`` names the code.
The whole file is both the queries and the candidate pool.

Which fields make the texts, as CodeXGLUE's own ``Text-Code/NL-code-search-Adv/code/run.py``
(convert_examples_to_features) builds them:
- query: ``' '.join(docstring_tokens)``;
- code: ``' '.join(code_tokens)`` when the row has ``code_tokens``, else
  ``' '.join(function_tokens)``. It never reads the ``code``/``function`` strings, so by
  default neither do we; ``code_text="raw"`` takes the string instead (for extractors that
  need the original layout), without its docstring, which the tokens leave out too. CodeXGLUE replaces function and variable names in the test
  split; published scores are computed on the tokens, so the default reads those.
Its evaluator keys answers by ``url`` and compares ``idx`` values.
"""

from __future__ import annotations

import os

from structret.errors import DataError
from structret.records import CODE_SEARCH, MAX_FIELD_CHARS, CodeRecord, Dataset, Query, ReadStats

from structret_datasets._docstring import strip_python_docstring
from structret_datasets._rows import (
    BadRow,
    get_id,
    get_str,
    get_tokens,
    iter_jsonl,
)

READER = "adv"
SPLITS = ("train", "valid", "test")
EXPECTED = "the folder holding train.jsonl/valid.jsonl/test.jsonl, or one of those files"


def _resolve(path: str, split: str | None) -> str:
    if os.path.isfile(path):
        stem = os.path.basename(path).split(".")[0]
        if split and stem in SPLITS and stem != split:
            raise DataError(
                f"{READER}: {path} is the '{stem}' split, but split '{split}' was asked for. "
                f"Pass the folder to choose a split, or drop the split."
            )
        return path
    if not os.path.isdir(path):
        raise DataError(f"{READER}: {path} does not exist. Pass {EXPECTED}.")
    split = split or "test"
    for name in (f"{split}.jsonl", f"{split}.jsonl.gz"):
        if os.path.isfile(os.path.join(path, name)):
            return os.path.join(path, name)
    present = sorted(n for n in os.listdir(path) if n.endswith((".jsonl", ".jsonl.gz")))
    raise DataError(
        f"{READER}: no {split}.jsonl in {path}; the .jsonl files there are: "
        f"{', '.join(present) or '(none)'}. Choose a split among them, or run CodeXGLUE's "
        f"dataset/preprocess.py to produce train/valid/test.jsonl."
    )


def read(path: str, *, split: str | None = None, code_text: str = "tokens",
         max_field_chars: int = MAX_FIELD_CHARS) -> Dataset:
    """The rows of one split (options: structret_datasets.options.Adv)."""
    limit = max_field_chars
    file = _resolve(path, split)

    stats = ReadStats(source=f"{READER} {file}")
    corpus: dict[str, CodeRecord] = {}
    queries: dict[str, Query] = {}
    qrels: dict[str, dict[str, int]] = {}
    pairs: list[tuple[str, str]] = []

    for _, where, row in iter_jsonl(file, stats, file, limit):
        try:
            qid = get_id(row, "url")
            docid = get_id(row, "idx")
            docstring_tokens = get_tokens(row, "docstring_tokens", required=True)
            text = " ".join(docstring_tokens).strip()
            if not text:
                raise BadRow("empty query")
            # The test split has function_* where train/valid have code_*; CodeXGLUE checks code_tokens first.
            tokens_key = "code_tokens" if "code_tokens" in row else "function_tokens"
            if code_text == "tokens" and tokens_key not in row:
                raise BadRow("missing field 'code_tokens' or 'function_tokens'")
            tokens = get_tokens(row, tokens_key)
            if code_text == "tokens":
                code = " ".join(tokens)
            else:
                if "code" not in row and "function" not in row:
                    raise BadRow("missing field 'code' or 'function'")
                code = strip_python_docstring(get_str(row, "code" if "code" in row else "function"))
            if not code.strip():
                raise BadRow("empty code")
            if qid in queries or docid in corpus:
                raise BadRow("duplicate id")
            record = CodeRecord(
                id=docid,
                code=code,
                language=get_str(row, "language") or "python",  # Adv is Python only
                docstring=get_str(row, "docstring"),
                func_name=get_str(row, "func_name"),
                repo=get_str(row, "repo"),
                path=get_str(row, "path"),
                url=qid,
                code_tokens=tokens,
                docstring_tokens=docstring_tokens,
            )
        except BadRow as bad:
            stats.skip(where, bad.reason)
            continue
        stats.use()
        corpus[docid] = record
        queries[qid] = Query(id=qid, text=text)
        qrels[qid] = {docid: 1}
        pairs.append((qid, docid))

    return Dataset(name=READER, corpus=corpus, queries=queries, qrels=qrels, stats=stats, pairs=pairs,
                   task=CODE_SEARCH)
