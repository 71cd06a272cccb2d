"""Issue 14 item 6: a row with a field over ``max_field_chars`` (default 1,000,000 characters)
is skipped and counted like any bad row, in every reader: the reason names the field and the
limit, the example line its file:line and size, and the other rows are used."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from _esci_files import EXAMPLE_NAMES, PRODUCT_NAMES, write_parquet
from click.testing import CliRunner

from structret.errors import DataError, PluginError
from structret.records import MAX_FIELD_CHARS
from structret.registry import get_registry

LIMIT = 1000  # a small limit through the reader option keeps the files small


def _read(reader: str, path: Path, **kwargs):
    return get_registry().create("dataset", reader, str(path), **kwargs)  # options checked, as core reads


def _assert_one_oversized(stats, *, used: int, field: str, where: str, size: int, limit: int = LIMIT) -> None:
    reason = f"field '{field}' over max_field_chars={limit}"
    assert stats.read == stats.used + sum(stats.skipped.values())
    assert stats.used == used
    assert dict(stats.skipped) == {reason: 1}
    assert stats.examples == [f"{where}: {reason} ({size:,} chars)"]
    assert f"{reason}: 1" in stats.summary()


def _csn_row(i: int, code: str = "def f(x):\n    return x + 1\n") -> dict:
    return {"url": f"https://example.org/f{i}", "code": code, "code_tokens": ["def", "f"],
            "docstring_tokens": ["add", "one", str(i)], "func_name": f"f{i}", "language": "python",
            "partition": "test"}


def _write_jsonl_gz(path: Path, rows: list[dict]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    return path


# --- codesearchnet ------------------------------------------------------------------------


def test_codesearchnet_row_with_code_over_the_limit_is_skipped(tmp_path):
    file = _write_jsonl_gz(tmp_path / "rows.jsonl.gz", [_csn_row(1), _csn_row(2, "x" * (LIMIT + 1)), _csn_row(3)])
    ds = _read("codesearchnet", file, max_field_chars=LIMIT)
    _assert_one_oversized(ds.stats, used=2, field="code", where=f"{file}:2", size=LIMIT + 1)
    assert sorted(r.func_name for r in ds.corpus.values()) == ["f1", "f3"]


def test_codesearchnet_50_mb_code_is_skipped_under_the_default_limit(tmp_path):
    size = 50_000_000
    at_limit = _csn_row(3, "z" * MAX_FIELD_CHARS)  # the limit itself is allowed
    file = _write_jsonl_gz(tmp_path / "rows.jsonl.gz", [_csn_row(1), _csn_row(2, "y" * size), at_limit])
    ds = _read("codesearchnet", file)
    _assert_one_oversized(ds.stats, used=2, field="code", where=f"{file}:2", size=size, limit=MAX_FIELD_CHARS)
    assert len(ds.corpus[at_limit["url"]].code) == MAX_FIELD_CHARS


def test_a_line_far_over_the_limit_is_skipped_unparsed_and_the_next_line_keeps_its_number(tmp_path):
    # 64 x the field limit: many fields each under the limit, so only the line's length can tell
    padding = {f"extra{i}": "p" * (LIMIT - 10) for i in range(70)}
    file = _write_jsonl_gz(tmp_path / "rows.jsonl.gz", [_csn_row(1), {**_csn_row(2), **padding}, {"url": 3}])
    ds = _read("codesearchnet", file, max_field_chars=LIMIT)
    line = len(json.dumps({**_csn_row(2), **padding})) + 1
    reason = f"line over {64 * LIMIT} bytes (64 x max_field_chars={LIMIT})"
    assert ds.stats.used == 1
    assert dict(ds.stats.skipped) == {reason: 1, "missing field 'code'": 1}
    assert ds.stats.examples == [f"{file}:2: {reason} ({line:,} bytes)", f"{file}:3: missing field 'code'"]


def test_max_field_chars_may_be_written_2e3(tmp_path):
    file = _write_jsonl_gz(tmp_path / "rows.jsonl.gz", [_csn_row(1, "x" * 1999), _csn_row(2, "x" * 2001)])
    ds = _read("codesearchnet", file, max_field_chars=2e3)  # what --data-option max_field_chars=2e3 gives
    assert ds.stats.used == 1 and dict(ds.stats.skipped) == {"field 'code' over max_field_chars=2000": 1}


@pytest.mark.parametrize("value", [0, -5, "big", 2.5, True])
def test_a_bad_max_field_chars_is_refused(tmp_path, value):
    file = _write_jsonl_gz(tmp_path / "rows.jsonl.gz", [_csn_row(1)])
    with pytest.raises(PluginError, match=r"dataset 'codesearchnet': max_field_chars=.*(integer|greater than or equal "
                                          r"to 1|whole number)"):
        _read("codesearchnet", file, max_field_chars=value)


@pytest.mark.parametrize("reader", ["codesearchnet", "adv", "beir", "debian-packages", "esci", "esci-santa-pretrain"])
def test_every_reader_names_max_field_chars_among_its_options(tmp_path, reader):
    with pytest.raises(PluginError, match=r"no option 'max_chars'\. Did you mean 'max_field_chars'\? Its options: "
                                          r".*max_field_chars \(int, default 1000000\)"):
        _read(reader, tmp_path, max_chars=5)


# --- adv, beir ------------------------------------------------------------------------------


def test_adv_row_with_code_tokens_over_the_limit_is_skipped(tmp_path):
    rows = [{**_csn_row(i), "idx": i} for i in (1, 2, 3)]
    rows[1]["code_tokens"] = ["tok"] * 400  # 1,200 characters together, no single token long
    file = tmp_path / "test.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ds = _read("adv", file, max_field_chars=LIMIT)
    _assert_one_oversized(ds.stats, used=2, field="code_tokens", where=f"{file}:2", size=1200)
    assert sorted(ds.corpus) == ["1", "3"]


def test_beir_corpus_row_with_text_over_the_limit_is_skipped(tmp_path):
    corpus = [{"_id": "d1", "text": "a passage"}, {"_id": "d2", "text": "w" * (LIMIT + 5)}, {"_id": "d3", "text": "x"}]
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (tmp_path / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "a query"}) + "\n")
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    ds = _read("beir", tmp_path, max_field_chars=LIMIT)
    _assert_one_oversized(ds.stats, used=4, field="text", where=f"{tmp_path / 'corpus.jsonl'}:2", size=LIMIT + 5)
    assert sorted(ds.corpus) == ["d1", "d3"]


# --- debian-packages ----------------------------------------------------------------------


def _stanza(name: str, long_lines: list[str]) -> str:
    return f"Package: {name}\nSection: utils\nDescription: the {name} tool\n" + "".join(f" {x}\n" for x in long_lines)


def test_debian_stanza_with_a_description_over_the_limit_is_skipped(tmp_path):
    lines = ["long text " * 10] * 12  # 12 continuation lines: a long description over the limit
    file = tmp_path / "Packages"
    file.write_text("\n".join([_stanza("alpha", ["fine"]), _stanza("bravo", lines), _stanza("charlie", ["ok"])]))
    ds = _read("debian-packages", file, max_field_chars=LIMIT, half="both")
    size = len("the bravo tool") + sum(len(x) + 2 for x in lines)  # each line: "\n" and its leading space
    _assert_one_oversized(ds.stats, used=2, field="Description", where=f"{file}:6", size=size)
    assert sorted(ds.corpus) == ["alpha", "charlie"]


def test_debian_translation_over_the_limit_is_skipped(tmp_path):
    file = tmp_path / "Packages"
    file.write_text("Package: alpha\nDescription: the alpha tool\nDescription-md5: aaa\n\n"
                    "Package: bravo\nDescription: the bravo tool\nDescription-md5: bbb\n")
    translation = tmp_path / "Translation-en"
    translation.write_text("Package: alpha\nDescription-md5: aaa\nDescription-en: the alpha tool\n fine\n\n"
                           "Package: bravo\nDescription-md5: bbb\nDescription-en: the bravo tool\n"
                           + " more words\n" * 100)
    ds = _read("debian-packages", file, translations=str(translation), max_field_chars=LIMIT, half="both")
    reason = f"translation: field 'Description-en' over max_field_chars={LIMIT}"
    assert ds.stats.used == 1 and sorted(ds.corpus) == ["alpha"]
    assert dict(ds.stats.skipped) == {reason: 1, "no long description": 1}
    assert ds.stats.examples[0].startswith(f"{translation}:6: {reason} (")


def test_debian_description_of_many_lines_over_the_default_limit_is_skipped(tmp_path):
    lines = ["x" * 78] * 13_000  # 1,040,000 characters over 13,000 lines
    file = tmp_path / "Packages"
    file.write_text("\n".join([_stanza("alpha", ["fine"]), _stanza("bravo", lines)]))
    ds = _read("debian-packages", file, half="both")
    size = len("the bravo tool") + 80 * len(lines)
    _assert_one_oversized(ds.stats, used=1, field="Description", where=f"{file}:6", size=size, limit=MAX_FIELD_CHARS)


# --- ESCI (parquet) -----------------------------------------------------------------------

ESCI_EXAMPLES = [
    # example_id, query, query_id, product_id, product_locale, esci_label, small, large, split
    (0, "usb c charger", 201, "B01", "us", "E", 1, 1, "test"),
    (1, "usb c charger", 201, "B02", "us", "E", 1, 1, "test"),
    (2, "phone stand", 202, "B03", "us", "E", 1, 1, "test"),
    (3, "q" * (LIMIT + 1), 203, "B01", "us", "E", 1, 1, "test"),
]
ESCI_PRODUCTS = [
    # product_id, title, description, bullet_point, brand, color, locale
    ("B01", "Charger", "A wall charger.", "65W\nFoldable", "Anker", "White", "us"),
    ("B02", "Charger", "d" * (LIMIT + 2), "45W", "Ugreen", "Black", "us"),
    ("B03", "Stand", "An aluminium stand.", "Fits all phones", "Lamicall", "Silver", "us"),
]


def _esci_folder(tmp_path: Path) -> Path:
    from structret_datasets import esci

    write_parquet(tmp_path / esci.EXAMPLES, EXAMPLE_NAMES, ESCI_EXAMPLES)
    write_parquet(tmp_path / esci.PRODUCTS, PRODUCT_NAMES, ESCI_PRODUCTS)
    return tmp_path


def test_esci_example_whose_product_or_query_is_over_the_limit_is_skipped(tmp_path):
    folder = _esci_folder(tmp_path)
    ds = _read("esci", folder, max_field_chars=LIMIT)
    examples = folder / "shopping_queries_dataset_examples.parquet"
    description = f"field 'product_description' over max_field_chars={LIMIT}"
    query = f"field 'query' over max_field_chars={LIMIT}"
    assert ds.stats.used == 2 and sorted(ds.corpus) == ["B01", "B03"]
    assert dict(ds.stats.skipped) == {description: 1, query: 1}
    assert ds.stats.examples == [
        f"{examples}:row 1: {description} ({LIMIT + 2:,} chars, product B02 of shopping_queries_dataset_products.parquet)",
        f"{examples}:row 3: {query} ({LIMIT + 1:,} chars)",
    ]


def test_esci_santa_pretrain_product_over_the_limit_is_skipped(tmp_path):
    folder = _esci_folder(tmp_path)
    ds = _read("esci-santa-pretrain", folder, split="all", max_field_chars=LIMIT)
    reason = f"field 'product_description' over max_field_chars={LIMIT}"
    assert sorted(ds.corpus) == ["B01", "B03"]
    assert ds.stats.skipped[reason] == 1
    assert ds.stats.examples[0].startswith(f"{folder / 'shopping_queries_dataset_examples.parquet'}:row 1: {reason}")


# --- Tevatron training lines --------------------------------------------------------------


def test_tevatron_line_with_a_passage_over_the_limit_is_skipped(tmp_path):
    from structret.datasets import load_dataset
    from structret.training import examples_from_dataset

    def line(i: int, text: str) -> str:
        return json.dumps({"query_id": str(i), "query": f"query {i}",
                           "positive_passages": [{"docid": "d", "title": "", "text": text}]}) + "\n"

    file = tmp_path / "train.jsonl"
    file.write_text(line(1, "short") + line(2, "v" * (LIMIT + 3)) + line(3, "short"))
    dataset = load_dataset(f"tevatron:{file}", max_field_chars=LIMIT)
    examples, stats = examples_from_dataset(dataset), dataset.stats
    assert len(examples) == 2
    reason = f"field 'positive_passages' over max_field_chars={LIMIT}"
    assert dict(stats.skipped) == {reason: 1}
    assert stats.examples == [f"train.jsonl:2: {reason} ({LIMIT + 3:,} chars)"]


# --- through the command line -------------------------------------------------------------


def test_bench_reports_the_oversized_row_in_its_read_summary(tmp_path):
    from structret.cli import cli

    rows = [_csn_row(i) for i in range(1, 4)] + [_csn_row(4, "def g():\n    pass\n" * 100_000)]  # 1.8M chars
    file = _write_jsonl_gz(tmp_path / "rows.jsonl.gz", rows)
    result = CliRunner().invoke(cli, ["bench", "--data", f"codesearchnet:{file}", "--split", "test", "--system", "bm25"])
    text = result.output + (result.stderr or "")
    assert result.exit_code == 0, text
    assert "Traceback" not in text and result.exception is None
    reason = f"field 'code' over max_field_chars={MAX_FIELD_CHARS}"
    assert f"read 4 rows = 3 used + 1 skipped ({reason}: 1)" in result.stderr
    assert f"{file}:4: {reason} (1,800,000 chars)" in result.stderr
