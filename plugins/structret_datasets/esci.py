"""Amazon ESCI shopping queries (amazon-science/esci-data), a reranking dataset.

Two parquet files: ``shopping_queries_dataset_examples.parquet`` (one judged
query-product pair per row) and ``shopping_queries_dataset_products.parquet``, joined on
(product_locale, product_id). The corpus is the products judged in the selected examples:
each query is reranked over its own judged products, as SANTA's product evaluation does.

Labels become int levels E=3, S=2, C=1, I=0; the gains (the paper's or the official
script's) are chosen at scoring time. With ``locale="all"`` one ASIN can be a different
product in two locales, so document ids become ``{locale}/{product_id}`` there.
"""

from __future__ import annotations

import os

from structret.errors import DataError
from structret.records import Dataset, ItemRecord, Query, ReadStats

from structret_datasets._rows import check_choice, check_options

READER = "esci"
EXAMPLES = "shopping_queries_dataset_examples.parquet"
PRODUCTS = "shopping_queries_dataset_products.parquet"
EXAMPLE_COLUMNS = ["query_id", "query", "product_id", "product_locale", "esci_label", "small_version", "large_version", "split"]
PRODUCT_COLUMNS = [
    "product_id", "product_title", "product_description", "product_bullet_point",
    "product_brand", "product_color", "product_locale",
]
LEVELS = {"E": 3, "S": 2, "C": 1, "I": 0}
LOCALES = ("us", "es", "jp", "all")
OPTIONS = {"version": "small (default) or large", "locale": "us (default), es, jp or all"}
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


def _select_examples(file: str, split: str, version: str, locale: str, stats: ReadStats):
    """The examples of the chosen split, version and locale, as Python rows with their row numbers."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    table = _read_table(file, EXAMPLE_COLUMNS)
    keep = np.ones(table.num_rows, dtype=bool)
    filters = [
        (f"split is not '{split}'", "split", lambda col: pc.equal(col, split)),
        (f"not in the {version} version", f"{version}_version", lambda col: pc.equal(pc.cast(col, pa.int64()), 1)),
    ]
    if locale != "all":
        filters.append((f"locale is not '{locale}'", "product_locale", lambda col: pc.equal(col, locale)))
    for reason, column, test in filters:
        mask = _mask(table, column, file, test)
        dropped = int(np.count_nonzero(keep & ~mask))
        if dropped:
            stats.leave_out(reason, dropped)
        keep &= mask
    rows = table.filter(pa.array(keep)).select(["query_id", "query", "product_id", "product_locale", "esci_label"])
    return zip(np.flatnonzero(keep).tolist(), rows.to_pylist())


def _item(row: dict, doc_id: str) -> ItemRecord:
    def text(key: str) -> str:
        value = row.get(key)
        return value.strip() if isinstance(value, str) else ""

    bullets = [line.strip() for line in text("product_bullet_point").splitlines() if line.strip()]
    aspects = {name: [text(f"product_{name}")] for name in ("brand", "color") if text(f"product_{name}")}
    return ItemRecord(
        id=doc_id,
        title=text("product_title"),
        content=text("product_description"),
        bullets=bullets,
        aspects=aspects,
        locale=text("product_locale"),
    )


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


def read(path: str, *, split: str | None = None, **options) -> Dataset:
    check_options(READER, options, OPTIONS)
    split = check_choice(READER, "split", split or "test", ("train", "test"))
    version = check_choice(READER, "version", options.get("version", "small"), ("small", "large"))
    locale = check_choice(READER, "locale", options.get("locale", "us"), LOCALES)
    examples_file, products_file = _files(path)

    stats = ReadStats(source=f"{READER} {examples_file} (split={split}, version={version}, locale={locale})")
    selected = list(_select_examples(examples_file, split, version, locale, stats))
    wanted = {(row["product_locale"], _id(row["product_id"])) for _, row in selected}
    wanted = {key for key in wanted if isinstance(key[0], str) and key[1] is not None}
    products = _read_products(products_file, wanted)

    corpus: dict[str, ItemRecord] = {}
    queries: dict[str, Query] = {}
    qrels: dict[str, dict[str, int]] = {}
    for i, row in selected:
        where = f"{examples_file}:row {i}"
        qid, pid, text = _id(row["query_id"]), _id(row["product_id"]), row["query"]
        reason = None
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
        if reason is None:
            doc_id = f"{row['product_locale']}/{pid}" if locale == "all" else pid
            if doc_id in qrels.get(qid, {}):
                reason = "duplicate id"
        if reason:
            stats.skip(where, reason)
            continue
        stats.use()
        if doc_id not in corpus:
            corpus[doc_id] = _item(products[(row["product_locale"], pid)], doc_id)
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
    )
