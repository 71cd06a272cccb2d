"""ESCI's published parquet layout, for tests that write small ESCI folders."""

from __future__ import annotations

from pathlib import Path

EXAMPLE_NAMES = ["example_id", "query", "query_id", "product_id", "product_locale", "esci_label",
                 "small_version", "large_version", "split"]
PRODUCT_NAMES = ["product_id", "product_title", "product_description", "product_bullet_point",
                 "product_brand", "product_color", "product_locale"]


def write_parquet(path: Path, names: list[str], rows: list[tuple]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)}), path)
