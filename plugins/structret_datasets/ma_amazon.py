"""MA-Amazon (ATTEMPT, Sun et al. CIKM 2023): Amazon ESCI's English products with crawled categories.

Published by the ATTEMPT authors: alipay/ATTEMPT_Pre-training_with_Aspect-Content_Text_Mutual_Prediction,
whose README links the "Multi-Aspect Amazon ESCI Dataset (MA-Amazon)" archive. Its files are the
ones that repository's ``scripts/make_data.py`` writes and ``src/*.sh`` read, in one folder:

* the corpus, ``amazon_corpus_with_cate_clean.jsonl`` (else ``amazon_corpus_with_cate.jsonl`` or
  ``amazon_corpus.jsonl``): one product per line, ``{"product_id", "product_title",
  "product_description", "product_bullet_point", "product_brand", "product_color",
  "product_cate"}`` -- strings ("" when ESCI has none) and ``product_cate`` a list of the
  crawled category levels, broadest first (may be empty, up to 9 levels);
* the judgements per split, ``train_qrel.txt``, ``dev_qrel.txt`` (split ``dev``, alias
  ``valid``: ATTEMPT's 3,500 queries held out of ESCI's training set) and ``test_qrel.txt``
  (or the ``*_qrel_detail.txt`` files, the same rows with the products copied in): JSON
  lines ``{"q_id", "q_text", "E_list", "S_list", "C_list", "I_list"}``, the products judged
  Exact, Substitute, Complement and Irrelevant for the query.

Products become ``ItemRecord``s as the ``esci`` reader builds them: ``title``, ``content`` =
the description, ``bullets`` = the bullet-point text, aspects ``brand`` and ``color`` (one
value, or ``[]``) and ``category_1`` ... ``category_4`` (ATTEMPT uses four levels, its
``cat_level=4``; deeper levels are not aspects). Judgements become levels E=3, S=2, C=1, I=0.

The task is ATTEMPT's: the whole corpus ranked for each query (``qrels-ranking``) with its
measures, recall at 100 and 500 counting Exact products as relevant (its ``*_qrel.trec``
files hold only E) and nDCG@50 with the graded levels (its ``*_mul.trec``: E 3, S 2, C 1).
Bad lines and judgements naming a product the corpus lacks are skipped and counted with
``file:line``; a query judged in no list is left out.
"""

from __future__ import annotations

import os

from structret.errors import DataError
from structret.records import MAX_FIELD_CHARS, QRELS_RANKING, Dataset, ItemRecord, Query, ReadStats

from structret_datasets._rows import BadRow, check_choice, get_id, get_str, iter_jsonl

READER = "ma-amazon"
CORPUS_FILES = ("amazon_corpus_with_cate_clean.jsonl", "amazon_corpus_with_cate.jsonl", "amazon_corpus.jsonl")
LEVELS = {"E": 3, "S": 2, "C": 1, "I": 0}
CATEGORY_LEVELS = 4
METRICS = ["R(rel=3)@100", "R(rel=3)@500", "nDCG@50"]
FIX = ("Use the files of ATTEMPT's MA-Amazon release (the archive its README links) unchanged: "
       f"{CORPUS_FILES[0]} and train/dev/test_qrel.txt in one folder.")


def _file(path: str, names: tuple[str, ...], what: str) -> str:
    for name in names:
        if os.path.isfile(os.path.join(path, name)):
            return os.path.join(path, name)
    present = sorted(n for n in os.listdir(path) if n.endswith((".jsonl", ".txt")))
    raise DataError(f"{READER}: {path} has no {what} ({' or '.join(names)}; its .jsonl/.txt files: "
                    f"{', '.join(present) or 'none'}). {FIX}")


def _item(row: dict) -> ItemRecord:
    def text(key: str) -> str:
        value = get_str(row, key)
        return "" if value.strip().lower() == "none" else value.strip()

    levels = row.get("product_cate", [])
    if levels is None:
        levels = []
    if not isinstance(levels, list) or not all(isinstance(v, str) for v in levels):
        raise BadRow("'product_cate' is not a list of strings")
    levels = [v.strip() for v in levels]
    aspects = {name: [text(f"product_{name}")] if text(f"product_{name}") else [] for name in ("brand", "color")}
    for k in range(CATEGORY_LEVELS):
        aspects[f"category_{k + 1}"] = [levels[k]] if k < len(levels) and levels[k] else []
    bullets = text("product_bullet_point")
    item = ItemRecord(id=get_id(row, "product_id"), title=text("product_title"),
                      content=text("product_description"), bullets=[bullets] if bullets else [], aspects=aspects,
                      locale="us")
    if not item.text():
        raise BadRow("no title and no description")
    return item


def read(path: str, *, split: str | None = None, max_field_chars: int = MAX_FIELD_CHARS) -> Dataset:
    """ATTEMPT's MA-Amazon split (options: structret_datasets.options.Reader); default ``test``."""
    split = check_choice(READER, "split", "dev" if split == "valid" else (split or "test"), ("train", "dev", "test"))
    if not os.path.isdir(path):
        what = "is a file, not a folder" if os.path.exists(path) else "does not exist"
        raise DataError(f"{READER}: {path} {what}. {FIX}")
    corpus_file = _file(path, CORPUS_FILES, "corpus")
    qrels_file = _file(path, (f"{split}_qrel.txt", f"{split}_qrel_detail.txt"), f"judgements for split '{split}'")

    stats = ReadStats(source=f"{READER} {path} (split={split})")
    corpus: dict[str, ItemRecord] = {}
    for _, where, row in iter_jsonl(corpus_file, stats, limit=max_field_chars):
        try:
            item = _item(row)
            if item.id in corpus:
                raise BadRow("duplicate product_id")
        except BadRow as bad:
            stats.skip(where, bad.reason, bad.detail)
            continue
        stats.use()
        corpus[item.id] = item

    queries: dict[str, Query] = {}
    qrels: dict[str, dict[str, int]] = {}
    for _, where, row in iter_jsonl(qrels_file, stats, limit=max_field_chars):
        try:
            qid = get_id(row, "q_id")
            text = get_str(row, "q_text", required=True).strip()
            if not text:
                raise BadRow("empty query")
            if qid in queries:
                raise BadRow("duplicate q_id")
            judged: dict[str, int] = {}
            for label, level in LEVELS.items():
                ids = row.get(f"{label}_list", [])
                if not isinstance(ids, list):
                    raise BadRow(f"'{label}_list' is not a list")
                for value in ids:
                    doc_id = get_id({"id": value}, "id")
                    if doc_id not in corpus:
                        raise BadRow(f"product in {label}_list not in the corpus")
                    judged.setdefault(doc_id, level)  # ATTEMPT de-duplicates within a list; E wins across
            if not judged:
                raise BadRow("no judged product")
        except BadRow as bad:
            stats.skip(where, bad.reason, bad.detail)
            continue
        stats.use()
        queries[qid] = Query(id=qid, text=text)
        qrels[qid] = judged
    return Dataset(name=READER, corpus=corpus, queries=queries, qrels=qrels, stats=stats,
                   labels={level: name for name, level in LEVELS.items()}, metrics=list(METRICS),
                   task=QRELS_RANKING)
