"""CoSQA (Huang et al. 2021) and CoSQA+ (Gong et al. 2024): web queries -> Python functions.

CoSQA (``cosqa``), as its authors publish it (Jun-jie-Huang/CoCLR, ``data/search/``; also
CodeXGLUE's NL-code-search-WebQuery): one folder with

* ``code_idx_map.txt``: one JSON object ``{code string: retrieval index}``, the code base
  every query searches (6,267 functions);
* ``cosqa-retrieval-test-500.json`` / ``cosqa-retrieval-dev-500.json`` (split ``test`` /
  ``dev``, alias ``valid``): a JSON array of ``{"idx", "doc", "code", "code_tokens",
  "docstring_tokens", "label", "retrieval_idx"}``: ``idx`` names the query, ``doc`` is its
  text, ``retrieval_idx`` the answer's index in the code base;
* ``cosqa-train.json`` (split ``train``): the same rows without ``retrieval_idx``, ``label``
  1 (the code answers the query) or 0; each labelled-1 code becomes a document of its own
  (``idx`` names it), label-0 rows are left out (counted).

Each query has one answer, so the task is ``code-search`` (MRR over the whole code base, as
CoCLR's ``run_siamese_test.py`` scores it; structret reports MRR@100 of the full pool).

CoSQA+ (``cosqa-plus``), as DeepSoftwareAnalytics/CoSQA_Plus publishes it: one folder with

* ``final_augment_codebase.json``: a JSON array of ``{"code-idx", "code"}``;
* ``query.json``: a JSON array of ``{"query-idx", "query"}``;
* ``final_augment_query_code_pairs_for_search.json``: the matching pairs, a JSON array of
  ``{"pair-idx", "query-idx", "query", "code-idx", "code", "label"}`` (label 1); or
  ``final_augment_query_code_pairs.json`` (labels 1 and 0: label-0 pairs are left out).

Split ``test`` (the default) is every query with at least one matching code, as the
released benchmark is; ``{split}_query_code_pairs.json`` beside them (train, dev, test, as
the authors' ``divide_dataset.py`` writes them) selects a split's pairs instead. A query
may match several codes: the task is ``multi-answer-ranking``, the whole code base ranked,
CoSQA+'s own measure MMRR beside nDCG@10, R@100 and MRR@10.

Rows that cannot be used are skipped and counted (``file:[index]``): a missing id or
text, an answer index the code base does not have, a label that is not 0 or 1.
"""

from __future__ import annotations

import os

from structret.errors import DataError
from structret.records import CODE_SEARCH, MAX_FIELD_CHARS, MULTI_ANSWER_RANKING, CodeRecord, Dataset, Query, ReadStats

from structret_datasets._json_array import iter_json_array
from structret_datasets._rows import BadRow, check_choice, get_id, get_str

COSQA = "cosqa"
CODE_BASE = "code_idx_map.txt"
COSQA_SPLITS = {"test": "cosqa-retrieval-test-500.json", "dev": "cosqa-retrieval-dev-500.json",
                "train": "cosqa-train.json"}
COSQA_FIX = "Use the files of Jun-jie-Huang/CoCLR's data/search/ (and data/qa/cosqa-train.json) unchanged."

PLUS = "cosqa-plus"
PLUS_CODES = "final_augment_codebase.json"
PLUS_QUERIES = "query.json"
PLUS_PAIRS = ("final_augment_query_code_pairs_for_search.json", "final_augment_query_code_pairs.json")
PLUS_FIX = "Use the files of CoSQA+'s release (DeepSoftwareAnalytics/CoSQA_Plus, its README's dataset link) unchanged."


def _folder(reader: str, path: str, needed: list[str], fix: str) -> None:
    if not os.path.isdir(path):
        what = "is a file, not a folder" if os.path.exists(path) else "does not exist"
        raise DataError(f"{reader}: {path} {what}. Pass the folder holding {', '.join(needed)}. {fix}")
    missing = [n for n in needed if not os.path.isfile(os.path.join(path, n))]
    if missing:
        present = sorted(n for n in os.listdir(path) if n.endswith((".json", ".txt")))
        raise DataError(f"{reader}: {path} has no {', '.join(missing)} (its .json/.txt files: "
                        f"{', '.join(present) or 'none'}). {fix}")


def _label(row: dict) -> int:
    label = row.get("label")
    if isinstance(label, str) and label.strip() in ("0", "1"):
        label = int(label)
    if isinstance(label, bool) or label not in (0, 1):
        raise BadRow("label is not 0 or 1")
    return int(label)


def _code(text: str, doc_id: str) -> CodeRecord:
    return CodeRecord(id=doc_id, code=text, language="python")


def read_cosqa(path: str, *, split: str | None = None, max_field_chars: int = MAX_FIELD_CHARS) -> Dataset:
    """CoSQA's code search split (options: structret_datasets.options.Reader); default ``test``."""
    split = check_choice(COSQA, "split", "dev" if split == "valid" else (split or "test"), tuple(COSQA_SPLITS))
    file = COSQA_SPLITS[split]
    _folder(COSQA, path, [file] + ([CODE_BASE] if split != "train" else []), COSQA_FIX)
    stats = ReadStats(source=f"{COSQA} {path} (split={split})")
    corpus: dict[str, CodeRecord] = {}
    if split != "train":
        corpus = _code_base(os.path.join(path, CODE_BASE), stats, max_field_chars)
    queries: dict[str, Query] = {}
    pairs: list[tuple[str, str]] = []
    for where, row in iter_json_array(os.path.join(path, file), stats, COSQA, COSQA_FIX, max_field_chars):
        try:
            qid = get_id(row, "idx")
            text = get_str(row, "doc", required=True).strip()
            if not text:
                raise BadRow("empty query")
            if qid in queries:
                raise BadRow("duplicate idx")
            if _label(row) == 0:
                stats.leave_out("label 0 (the code does not answer the query)")
                continue
            if split == "train":
                code = get_str(row, "code", required=True)
                if not code.strip():
                    raise BadRow("empty code")
                doc_id = qid
                corpus[doc_id] = _code(code, doc_id)
            else:
                doc_id = get_id(row, "retrieval_idx")
                if doc_id not in corpus:
                    raise BadRow(f"retrieval_idx not in {CODE_BASE}")
        except BadRow as bad:
            stats.skip(where, bad.reason, bad.detail)
            continue
        stats.use()
        queries[qid] = Query(id=qid, text=text)
        pairs.append((qid, doc_id))
    qrels = {q: {d: 1} for q, d in pairs}
    return Dataset(name=COSQA, corpus=corpus, queries=queries, qrels=qrels, stats=stats, pairs=pairs, task=CODE_SEARCH)


def _code_base(file: str, stats: ReadStats, limit: int) -> dict[str, CodeRecord]:
    """``code_idx_map.txt``: {code: index} -> documents keyed by the index."""
    import json

    try:
        with open(file, encoding="utf-8") as fh:
            mapping = json.load(fh)
    except UnicodeDecodeError:
        raise DataError(f"{COSQA}: {file} is not UTF-8. {COSQA_FIX}") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{COSQA}: {file}:{exc.lineno}:{exc.colno} is not valid JSON ({exc.msg}). {COSQA_FIX}") from None
    if not isinstance(mapping, dict):
        raise DataError(f"{COSQA}: {file} holds a JSON {type(mapping).__name__}, not an object "
                        f"{{code: index}}. {COSQA_FIX}")
    corpus: dict[str, CodeRecord] = {}
    for n, (code, index) in enumerate(mapping.items()):
        where = f"{file}:entry {n}"
        if isinstance(index, bool) or not isinstance(index, (int, str)) or not str(index).strip():
            stats.skip(where, "index is not an integer or a string")
            continue
        if len(code) > limit:
            stats.skip(where, f"field 'code' over max_field_chars={limit}", f"{len(code):,} chars")
            continue
        if not code.strip():
            stats.skip(where, "empty code")
            continue
        doc_id = str(index).strip()
        if doc_id in corpus:
            stats.skip(where, "duplicate index")
            continue
        stats.use()
        corpus[doc_id] = _code(code, doc_id)
    return corpus


def read_cosqa_plus(path: str, *, split: str | None = None, max_field_chars: int = MAX_FIELD_CHARS) -> Dataset:
    """CoSQA+'s queries and code base (options: structret_datasets.options.Reader); default ``test``."""
    split = check_choice(PLUS, "split", "dev" if split == "valid" else (split or "test"), ("train", "dev", "test"))
    split_file = f"{split}_query_code_pairs.json"
    if os.path.isfile(os.path.join(path, split_file)):
        pairs_file = split_file
    elif split != "test":
        raise DataError(f"{PLUS}: split '{split}' needs {split_file} in {path} (the authors' divide_dataset.py "
                        f"writes train/dev/test_query_code_pairs.json); without it only split test, every query, exists.")
    else:
        pairs_file = next((f for f in PLUS_PAIRS if os.path.isfile(os.path.join(path, f))), PLUS_PAIRS[0])
    _folder(PLUS, path, [PLUS_CODES, PLUS_QUERIES, pairs_file], PLUS_FIX)
    limit = max_field_chars
    stats = ReadStats(source=f"{PLUS} {path} (split={split})")

    corpus: dict[str, CodeRecord] = {}
    for where, row in iter_json_array(os.path.join(path, PLUS_CODES), stats, PLUS, PLUS_FIX, limit):
        try:
            doc_id = get_id(row, "code-idx")
            code = get_str(row, "code", required=True)
            if not code.strip():
                raise BadRow("empty code")
            if doc_id in corpus:
                raise BadRow("duplicate code-idx")
        except BadRow as bad:
            stats.skip(where, bad.reason, bad.detail)
            continue
        stats.use()
        corpus[doc_id] = _code(code, doc_id)

    candidates: dict[str, Query] = {}
    for where, row in iter_json_array(os.path.join(path, PLUS_QUERIES), stats, PLUS, PLUS_FIX, limit):
        try:
            qid = get_id(row, "query-idx")
            text = get_str(row, "query", required=True).strip()
            if not text:
                raise BadRow("empty query")
            if qid in candidates:
                raise BadRow("duplicate query-idx")
        except BadRow as bad:
            stats.skip(where, bad.reason, bad.detail)
            continue
        candidates[qid] = Query(id=qid, text=text)  # counted once its pairs are known

    qrels: dict[str, dict[str, int]] = {}
    for where, row in iter_json_array(os.path.join(path, pairs_file), stats, PLUS, PLUS_FIX, limit):
        try:
            qid, doc_id = get_id(row, "query-idx"), get_id(row, "code-idx")
            if _label(row) == 0:
                stats.leave_out("label 0 (the code does not answer the query)")
                continue
            if qid not in candidates:
                raise BadRow(f"query-idx not in {PLUS_QUERIES}")
            if doc_id not in corpus:
                raise BadRow(f"code-idx not in {PLUS_CODES}")
            if doc_id in qrels.get(qid, {}):
                raise BadRow("duplicate pair")
        except BadRow as bad:
            stats.skip(where, bad.reason, bad.detail)
            continue
        stats.use()
        qrels.setdefault(qid, {})[doc_id] = 1
    queries: dict[str, Query] = {}
    for qid, query in candidates.items():
        if qid in qrels:
            stats.use()
            queries[qid] = query
        else:
            stats.leave_out(f"no matching code in {pairs_file}")
    return Dataset(name=PLUS, corpus=corpus, queries=queries, qrels=qrels, stats=stats, task=MULTI_ANSWER_RANKING)
