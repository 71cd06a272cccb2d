"""Amazon ESCI shopping queries (amazon-science/esci-data), a reranking dataset.

Two parquet files: ``shopping_queries_dataset_examples.parquet`` (one judged
query-product pair per row) and ``shopping_queries_dataset_products.parquet``, joined on
(product_locale, product_id). The corpus is the products judged in the selected examples:
each query is reranked over its own judged products, as SANTA's product evaluation does.

Labels become int levels E=3, S=2, C=1, I=0; the gains (the paper's or the official
script's) are chosen at scoring time. With ``locale="all"`` one ASIN can be a different
product in two locales, so document ids become ``{locale}/{product_id}`` there.

Products (``ItemRecord``)
-------------------------
* ``title`` = product_title; ``content`` = product_description only. SANTA's product
  document is ``title : {title} text : {description}`` and its alignment text is one
  bullet point, so the bullets are *not* folded into ``content``: a positive that
  contained its own query would make the alignment task trivial. ATTEMPT's item content
  is likewise title + description, with brand/color/category as aspects.
* ``bullets``: ``product_bullet_point`` is one string, one bullet per line; blank lines
  are dropped and each bullet is stripped.
* ``aspects``: every product has the keys ``brand`` and ``color``; a missing, null or
  blank value is ``[]`` (never left out), so all products share one aspect layout and an
  ATTEMPT-style linearizer can emit an indicator token for every aspect, empty or not.
  With ``categories=PATH`` every product also has ``category_1`` ... ``category_4``.

The category file (``categories=PATH``, MA-Amazon style)
---------------------------------------------------------
ATTEMPT's MA-Amazon crawled one to four category levels per product; that file is not
published, so structret defines its own format. JSON lines (``.jsonl`` or ``.jsonl.gz``),
one product per line::

    {"product_id": "B07ZPKBL9V", "product_locale": "us",
     "categories": ["Health & Household", "Household Supplies", "Batteries", "AA Batteries"]}

* ``product_id`` (string, required); ``product_locale`` (``us``/``es``/``jp``, optional,
  default ``us``: MA-Amazon is the English part of ESCI);
* ``categories``: a list of 1 to 4 non-empty strings, the broadest level first.

Level *k* becomes the aspect ``category_k`` (a one-value list), levels the row does not
give are ``[]``; products without a row have four empty levels. One key per level, not
one ``category`` list, because ATTEMPT treats each level as its own aspect (its
ablation adds cate1, cate1-2, ...; coverage is reported per level) and a flat list
would lose which level a value belongs to. Rows that cannot be used are counted in the
dataset's ReadStats: malformed rows (bad JSON, a missing id, not 1-4 string levels, a
second row for one product) are skipped with ``file:line``; sound rows naming a product
that is not in the products file, or one the chosen split/version/locale does not
select, are counted as left out.

SANTA's pretraining pairs (reader ``esci-santa-pretrain``)
-----------------------------------------------------------
``read_santa_pretrain`` selects the examples of the *large* version, ``us`` locale,
label ``E`` (split ``train`` by default; ``test`` or ``all`` on request) and keeps each
product once, if it has both a description and at least one bullet point (SANTA pairs
"one randomly selected bullet point" with "its corresponding product description").
The Dataset has the products as its corpus and no queries, qrels or pairs:
``structret.training.examples_from_dataset`` turns each such item into
``Example(queries=bullets, positives=[record.text()])`` and draws one bullet per epoch
with the seeded RNG, which is exactly SANTA's "random bullet point" -- a fixed Query
per product would freeze one bullet for the whole run.
"""

from __future__ import annotations

import os

from structret.errors import DataError
from structret.records import GRADED_RERANK, MAX_FIELD_CHARS, PRETRAINING, Dataset, ItemRecord, Query, ReadStats

from structret_datasets._rows import (
    BadRow,
    _check_text,
    check_choice,
    get_id,
    get_str,
    iter_jsonl,
    oversized,
)

READER = "esci"
EXAMPLES = "shopping_queries_dataset_examples.parquet"
PRODUCTS = "shopping_queries_dataset_products.parquet"
EXAMPLE_COLUMNS = ["query_id", "query", "product_id", "product_locale", "esci_label", "small_version", "large_version", "split"]
PRODUCT_COLUMNS = [
    "product_id", "product_title", "product_description", "product_bullet_point",
    "product_brand", "product_color", "product_locale",
]
PRODUCT_TEXTS = ("product_title", "product_description", "product_bullet_point", "product_brand", "product_color")
LEVELS = {"E": 3, "S": 2, "C": 1, "I": 0}
LOCALES = ("us", "es", "jp", "all")
CATEGORY_LEVELS = 4
CATEGORIES_HELP = "a .jsonl(.gz) file of product_id, product_locale, categories (1-4 levels); see the module docs"
SANTA_READER = "esci-santa-pretrain"
FIX = "Use the files of amazon-science/esci-data (shopping_queries_dataset/) unchanged."


def _id(value) -> str | None:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # pandas writes int ids as floats once a column has a null
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    return str(value).strip() or None


def _files(path: str) -> tuple[str, str]:
    if os.path.isdir(path):
        folder, examples = path, os.path.join(path, EXAMPLES)
    elif os.path.isfile(path):
        folder, examples = os.path.dirname(path) or ".", path
    else:
        raise DataError(f"{READER}: {path} does not exist. Pass the folder holding {EXAMPLES} and {PRODUCTS}.")
    products = os.path.join(folder, PRODUCTS)
    for needed in (examples, products):
        if not os.path.isfile(needed):
            present = sorted(n for n in os.listdir(folder) if n.endswith(".parquet"))
            raise DataError(
                f"{READER}: {needed} does not exist; the parquet files in {folder} are: "
                f"{', '.join(present) or '(none)'}. Put {EXAMPLES} and {PRODUCTS} side by side there."
            )
    return examples, products


def _read_table(file: str, columns: list[str], filters=None):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(file).names
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"{READER}: cannot read {file} as parquet ({exc}). {FIX}") from None
    missing = [c for c in columns if c not in names]
    if missing:
        raise DataError(
            f"{READER}: {file} lacks the column(s) {', '.join(missing)} (it has: {', '.join(names)}). {FIX}"
        )
    try:
        return pq.read_table(file, columns=columns, filters=filters)
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"{READER}: cannot read {file} ({exc}). {FIX}") from None


def _mask(table, column: str, file: str, test):
    """A numpy bool mask: ``test(column array)``, nulls false; a column of the wrong type is a DataError."""
    import pyarrow as pa

    try:
        return test(table[column]).fill_null(False).to_numpy(zero_copy_only=False)
    except pa.ArrowException:
        raise DataError(
            f"{READER}: column '{column}' of {file} has type {table.schema.field(column).type}, "
            f"which does not fit the published format. {FIX}"
        ) from None


def _select_examples(file: str, split: str, version: str, locale: str, stats: ReadStats, label: str | None = None):
    """The examples of the chosen split (``all``: every split), version, locale (and label),
    as Python rows with their row numbers."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    table = _read_table(file, EXAMPLE_COLUMNS)
    keep = np.ones(table.num_rows, dtype=bool)
    filters = []
    if split != "all":
        filters.append((f"split is not '{split}'", "split", lambda col: pc.equal(col, split)))
    filters.append(
        (f"not in the {version} version", f"{version}_version", lambda col: pc.equal(pc.cast(col, pa.int64()), 1))
    )
    if locale != "all":
        filters.append((f"locale is not '{locale}'", "product_locale", lambda col: pc.equal(col, locale)))
    if label is not None:
        filters.append((f"label is not '{label}'", "esci_label", lambda col: pc.equal(col, label)))
    for reason, column, test in filters:
        mask = _mask(table, column, file, test)
        dropped = int(np.count_nonzero(keep & ~mask))
        if dropped:
            stats.leave_out(reason, dropped)
        keep &= mask
    rows = table.filter(pa.array(keep)).select(["query_id", "query", "product_id", "product_locale", "esci_label"])
    return zip(np.flatnonzero(keep).tolist(), rows.to_pylist())


def _item(row: dict, doc_id: str, categories: dict[tuple[str, str], list[str]] | None = None) -> ItemRecord:
    """An ItemRecord; ``categories`` (when the option is given) maps (locale, product_id)
    to the product's 1-4 category levels."""

    def text(key: str) -> str:
        value = row.get(key)
        return value.strip() if isinstance(value, str) else ""

    bullets = [line.strip() for line in text("product_bullet_point").splitlines() if line.strip()]
    aspects = {name: [text(f"product_{name}")] if text(f"product_{name}") else [] for name in ("brand", "color")}
    if categories is not None:
        # no id: no levels, as before ("" is no id either)
        levels = categories.get((row["product_locale"], _id(row["product_id"]) or ""), [])
        for k in range(CATEGORY_LEVELS):
            aspects[f"category_{k + 1}"] = [levels[k]] if k < len(levels) else []
    return ItemRecord(
        id=doc_id,
        title=text("product_title"),
        content=text("product_description"),
        bullets=bullets,
        aspects=aspects,
        locale=text("product_locale"),
    )


def _category_levels(row: dict) -> list[str]:
    value = row.get("categories")
    if value is None:
        raise BadRow("missing field 'categories'")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadRow("'categories' is not a list of strings")
    levels = [_check_text(v).strip() for v in value]
    if not 1 <= len(levels) <= CATEGORY_LEVELS:
        raise BadRow(f"not 1-{CATEGORY_LEVELS} category levels")
    if not all(levels):
        raise BadRow("empty category level")
    return levels


def _read_categories(
    path, products_file: str, selected: set[tuple[str, str]], stats: ReadStats, limit: int
) -> dict[tuple[str, str], list[str]]:
    """(locale, product_id) -> levels, for the selected products; every other row is counted."""
    if not isinstance(path, str) or not path.strip():
        raise DataError(f"{READER}: option categories needs a file path ({CATEGORIES_HELP}).")
    if not os.path.isfile(path):
        raise DataError(f"{READER}: the category file {path} does not exist. Pass {CATEGORIES_HELP}.")
    known = None  # every (locale, id) of the products file, read only if a row names an unselected product
    seen: set[tuple[str, str]] = set()
    categories: dict[tuple[str, str], list[str]] = {}
    for _, where, row in iter_jsonl(path, stats, limit=limit):
        try:
            pid = get_id(row, "product_id")
            locale = get_str(row, "product_locale", default="us").strip().lower()
            if locale not in LOCALES[:-1]:
                raise BadRow("product_locale is not us, es or jp")
            levels = _category_levels(row)
            if (locale, pid) in seen:
                raise BadRow("second category row for one product")
        except BadRow as bad:
            stats.skip(where, f"category file: {bad.reason}")
            continue
        seen.add((locale, pid))
        if (locale, pid) in selected:
            categories[(locale, pid)] = levels
            continue
        if known is None:
            known = _product_keys(products_file)
        if (locale, pid) in known:
            stats.leave_out("category row: product not selected")
        else:
            stats.leave_out("category row: product not in products file")
    return categories


def _product_keys(file: str) -> set[tuple[str, str | None]]:
    table = _read_table(file, ["product_locale", "product_id"])
    return {(loc, _id(pid)) for loc, pid in zip(table["product_locale"].to_pylist(), table["product_id"].to_pylist())}


def _too_long_product(product: dict, limit: int, products_file: str) -> BadRow | None:
    """An oversized text of the product, as the skip of the example row that names it."""
    bad = oversized(product, limit, PRODUCT_TEXTS)
    if bad:
        bad.detail += f", product {_id(product['product_id'])} of {os.path.basename(products_file)}"
    return bad


def _read_products(file: str, wanted: set[tuple[str, str]]) -> dict[tuple[str, str], dict]:
    import pyarrow.compute as pc

    if not wanted:
        return {}
    # Filter while scanning: the products file has 1.8M rows of long descriptions.
    locales = sorted({loc for loc, _ in wanted})
    ids = sorted({pid for _, pid in wanted})
    condition = pc.field("product_locale").isin(locales) & pc.field("product_id").isin(ids)
    products: dict[tuple[str, str], dict] = {}
    for row in _read_table(file, PRODUCT_COLUMNS, filters=condition).to_pylist():
        key = (row["product_locale"], _id(row["product_id"]))
        if key in wanted:
            products.setdefault(key, row)  # the first row wins if the file repeats a product
    return products


def held_out(query_id: str, share: float) -> bool:
    """Whether a train-split query belongs to the validation split (``valid_share``): stable
    across machines and versions, from the sha1 of its id."""
    import hashlib

    return int.from_bytes(hashlib.sha1(str(query_id).encode("utf-8")).digest()[:8], "big") / 2**64 < share


def read(path: str, *, split: str | None = None, version: str = "small", locale: str = "us",
         categories: str | None = None, max_field_chars: int = MAX_FIELD_CHARS, valid_share: float = 0.0) -> Dataset:
    """The judged pairs of ``split`` (train, valid or test; default test), reranked per query
    (options: structret_datasets.options.ESCI). ``valid`` is the share ``valid_share`` of the
    train split's queries, which ``train`` then leaves out (ATTEMPT's division of ESCI)."""
    split = check_choice(READER, "split", split or "test", ("train", "valid", "test"))
    if split == "valid" and not valid_share:
        raise DataError(f"{READER}: ESCI has no validation split of its own; set the option valid_share (e.g. "
                        f"--data-option valid_share=0.17, ATTEMPT's 3.5K of 20.5K training queries) to hold out "
                        f"that share of the train split's queries as split=valid.")
    limit = max_field_chars
    examples_file, products_file = _files(path)

    stats = ReadStats(source=f"{READER} {examples_file} (split={split}, version={version}, locale={locale})")
    selected = list(_select_examples(examples_file, "train" if split == "valid" else split, version, locale, stats))
    if valid_share and split != "test":
        keep = [(i, row) for i, row in selected if held_out(_id(row["query_id"]) or "", valid_share) == (split == "valid")]
        if len(keep) < len(selected):
            stats.leave_out("valid-split query" if split == "train" else "train-split query",
                            len(selected) - len(keep))
        selected = keep
    keys = {(row["product_locale"], _id(row["product_id"])) for _, row in selected}
    wanted = {(loc, pid) for loc, pid in keys if isinstance(loc, str) and pid is not None}
    products = _read_products(products_file, wanted)
    levels = None
    if categories is not None:
        levels = _read_categories(categories, products_file, set(products), stats, limit)

    corpus: dict[str, ItemRecord] = {}
    queries: dict[str, Query] = {}
    qrels: dict[str, dict[str, int]] = {}
    for i, row in selected:
        where = f"{examples_file}:row {i}"
        qid, pid, text = _id(row["query_id"]), _id(row["product_id"]), row["query"]
        reason, detail = None, ""
        if qid is None:
            reason = "missing field 'query_id'"
        elif pid is None:
            reason = "missing field 'product_id'"
        elif not isinstance(text, str) or not text.strip():
            reason = "empty query"
        elif not isinstance(row["esci_label"], str) or row["esci_label"] not in LEVELS:
            reason = "label is not E/S/C/I"
        elif (row["product_locale"], pid) not in products:
            reason = "product not in products file"
        elif bad := oversized(row, limit, ("query",)) or _too_long_product(
            products[(row["product_locale"], pid)], limit, products_file
        ):
            reason, detail = bad.reason, bad.detail
        if reason is None:
            assert qid is not None and pid is not None  # else a reason was set above
            doc_id = f"{row['product_locale']}/{pid}" if locale == "all" else pid
            if doc_id in qrels.get(qid, {}):
                reason = "duplicate id"
        if reason:
            stats.skip(where, reason, detail)
            continue
        stats.use()
        assert qid is not None and pid is not None  # a row without them has a reason and was skipped
        if doc_id not in corpus:
            corpus[doc_id] = _item(products[(row["product_locale"], pid)], doc_id, levels)
        queries.setdefault(qid, Query(id=qid, text=text.strip()))
        qrels.setdefault(qid, {})[doc_id] = LEVELS[row["esci_label"]]

    return Dataset(
        name=READER,
        corpus=corpus,
        queries=queries,
        qrels=qrels,
        stats=stats,
        labels={level: name for name, level in LEVELS.items()},
        default_gains="esci-paper",
        task=GRADED_RERANK,
    )


def read_santa_pretrain(path: str, *, split: str | None = None, categories: str | None = None,
                        max_field_chars: int = MAX_FIELD_CHARS) -> Dataset:
    """SANTA's product pretraining pairs: large version, us, Exact rows; one item per product
    with a description and bullet points (see the module docs). Options:
    structret_datasets.options.Categories."""
    split = check_choice(SANTA_READER, "split", split or "train", ("train", "test", "all"))
    limit = max_field_chars
    examples_file, products_file = _files(path)

    stats = ReadStats(source=f"{SANTA_READER} {examples_file} (split={split}, version=large, locale=us, label=E)")
    selected = list(_select_examples(examples_file, split, "large", "us", stats, label="E"))
    wanted = {("us", pid) for pid in (_id(row["product_id"]) for _, row in selected) if pid is not None}
    products = _read_products(products_file, wanted)
    levels = None
    if categories is not None:
        levels = _read_categories(categories, products_file, set(products), stats, limit)

    corpus: dict[str, ItemRecord] = {}
    for i, row in selected:
        pid = _id(row["product_id"])
        if pid is None:
            stats.skip(f"{examples_file}:row {i}", "missing field 'product_id'")
            continue
        if ("us", pid) not in products:
            stats.skip(f"{examples_file}:row {i}", "product not in products file")
            continue
        if pid in corpus:
            stats.leave_out("product already paired (judged E for another query)")
            continue
        bad = _too_long_product(products[("us", pid)], limit, products_file)
        if bad:
            stats.skip(f"{examples_file}:row {i}", bad.reason, bad.detail)
            continue
        item = _item(products[("us", pid)], pid, levels)
        if not item.content:
            stats.leave_out("product without a description")
            continue
        if not item.bullets:
            stats.leave_out("product without bullet points")
            continue
        stats.use()
        corpus[pid] = item
    return Dataset(name=SANTA_READER, corpus=corpus, queries={}, qrels={}, stats=stats, task=PRETRAINING)
