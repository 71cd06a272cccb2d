"""The malformed-data corpus (tests/data/bad/, written by make_bad_data.py) through every reader.

Each file gives either a DataError that names the file (and line where there is one) and
says what to do, or rows skipped and counted with reasons and file:line, and always
read == used + skipped.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from structret.errors import DataError
from structret.registry import get_registry

BAD = Path(__file__).parent / "data" / "bad"


def _read(reader: str, path: Path, **kwargs):
    return get_registry().create("dataset", reader, str(path), **kwargs)


def _check(stats, *, read: int, used: int, skipped: dict[str, int], file: Path) -> None:
    assert stats.read == stats.used + sum(stats.skipped.values())
    assert (stats.read, stats.used) == (read, used)
    assert dict(stats.skipped) == skipped
    assert stats.examples and all(line.startswith(f"{file}:") or line.startswith(f"{file.name}:")
                                  for line in stats.examples)
    assert f"read {read} rows = {used} used + {read - used} skipped" in stats.summary()


CSN_SKIPS = {
    "bad JSON": 2,                              # line 2 cut off, line 11 nested 5,000 deep
    "wrong type for 'code'": 1,                 # line 3: code is a number
    "wrong type for 'docstring_tokens'": 2,     # line 4: a string; line 12: a token is a number
    "empty query": 1,                           # line 6: empty docstring
    "missing field 'code'": 1,                  # line 7
    "not a JSON object": 1,                     # line 8
    "undecodable bytes": 2,                     # line 9: latin-1; line 10: a lone surrogate escape
}


@pytest.mark.parametrize("split", [None, "test"])
def test_codesearchnet_bad_rows_are_skipped_and_counted(split):
    file = BAD / "csn-bad-rows.jsonl"
    ds = _read("codesearchnet", file, split=split)
    _check(ds.stats, read=13, used=3, skipped=CSN_SKIPS, file=file)
    assert f"{file}:2: bad JSON" in ds.stats.examples
    # a missing func_name is not a fault: the row is used, with an empty name
    used = {r.func_name for r in ds.corpus.values()}
    assert used == {"f1", "", "f13"}


def test_codesearchnet_truncated_gzip_keeps_the_rows_before_the_damage():
    file = BAD / "csn-truncated.jsonl.gz"
    ds = _read("codesearchnet", file)
    assert dict(ds.stats.skipped) == {"truncated gzip": 1}
    assert 0 < ds.stats.used < 400 and ds.stats.read == ds.stats.used + 1
    assert ds.stats.examples == [f"{file}:{ds.stats.used + 1}: truncated gzip"]
    assert list(ds.corpus)[-1].endswith(f"#L{ds.stats.used}")  # rows kept in order, none lost before the cut


def test_esci_products_without_a_title_column_is_a_clear_data_error():
    folder = BAD / "esci-no-title"
    for reader in ("esci", "esci-santa-pretrain"):
        with pytest.raises(DataError) as info:
            _read(reader, folder, split="test")
        message = str(info.value)
        assert "shopping_queries_dataset_products.parquet" in message and "product_title" in message
        assert "Use the files of amazon-science/esci-data" in message  # what to do


def test_beir_bad_rows_are_skipped_and_counted():
    folder = BAD / "beir-bad"
    ds = _read("beir", folder)
    stats = ds.stats
    assert stats.read == stats.used + sum(stats.skipped.values()) == 7 + 4 + 5  # corpus + queries + qrels rows
    assert stats.used == 6  # d1, d2; q1, q2; two qrels rows
    assert dict(stats.skipped) == {
        "missing field '_id'": 1, "wrong type for '_id'": 1, "empty text": 1, "bad JSON": 1, "duplicate id": 1,
        "missing field 'text'": 1,
        "score is not an integer": 1, "unknown corpus id": 1, "not 3 tab-separated fields": 1,
        "no qrels in split 'test'": 1,  # q4: left out, not a fault
    }
    assert f"{folder / 'corpus.jsonl'}:2: missing field '_id'" in stats.examples
    assert ds.qrels == {"q1": {"d1": 1}, "q2": {"d2": 2}}


def test_beir_qrels_faults_name_their_line(tmp_path):
    # the same folder with a clean corpus and queries, so the qrels faults are the examples shown
    import shutil

    folder = tmp_path / "beir"
    shutil.copytree(BAD / "beir-bad", folder)
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "x"}\n{"_id": "d2", "text": "y"}\n')
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "a"}\n{"_id": "q2", "text": "b"}\n')
    stats = _read("beir", folder).stats
    qrels = folder / "qrels" / "test.tsv"
    assert stats.examples == [f"{qrels}:3: score is not an integer", f"{qrels}:5: unknown corpus id",
                              f"{qrels}:6: not 3 tab-separated fields"]


def test_debian_broken_packages_are_skipped_and_counted():
    file = BAD / "Packages-broken"
    ds = _read("debian-packages", file, half="both")
    assert ds.stats.read == ds.stats.used + sum(ds.stats.skipped.values()) == 10
    assert ds.stats.used == 2
    assert ds.stats.skipped["malformed line (not 'Field: value')"] == 1
    assert f"{file}:24: undecodable bytes" in ds.stats.examples


def test_tevatron_bad_lines_are_skipped_and_counted():
    from structret.datasets import load_dataset
    from structret.training import examples_from_dataset

    file = BAD / "tevatron-bad.jsonl"
    dataset = load_dataset(f"tevatron:{file}")
    examples, stats = examples_from_dataset(dataset), dataset.stats
    _check(stats, read=9, used=2, file=file, skipped={
        "not JSON": 2,  # line 2 cut off, line 7 nested 5,000 deep
        "not a JSON object": 1, "missing or empty 'query'": 1, "no positive passage with text": 1,
        "undecodable bytes": 1,  # line 6: latin-1 (before: the whole file was refused)
        "'positive_passages' is not a list": 1,  # line 9 (before: a TypeError)
    })
    assert [e.queries for e in examples] == [["sort a list"], ["read a file"]]


def test_tevatron_truncated_gzip_is_a_data_error_naming_file_and_line():
    from structret.datasets import load_dataset

    file = BAD / "tevatron-truncated.jsonl.gz"
    with pytest.raises(DataError) as info:
        load_dataset(f"tevatron:{file}")
    message = str(info.value)
    assert str(file) in message and " at line " in message and "truncated or corrupt" in message
    assert "Write it again" in message  # what to do


def test_cli_prints_the_read_summary(monkeypatch):
    from structret.cli import cli

    monkeypatch.chdir(Path(__file__).parent.parent)
    result = CliRunner().invoke(cli, ["bench", "--data", "codesearchnet:tests/data/bad/csn-bad-rows.jsonl",
                                      "--system", "bm25", "--limit", "5"])
    assert result.exit_code == 0, result.output
    assert "read 13 rows = 3 used + 10 skipped" in result.stderr
    assert "tests/data/bad/csn-bad-rows.jsonl:2: bad JSON" in result.stderr


def test_cli_reports_a_data_error_as_one_clean_message(monkeypatch):
    from structret.cli import cli

    monkeypatch.chdir(Path(__file__).parent.parent)
    result = CliRunner().invoke(cli, ["bench", "--data", "esci:tests/data/bad/esci-no-title", "--system", "bm25"])
    assert result.exit_code != 0
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)  # no traceback
    assert "Error: esci: tests/data/bad/esci-no-title/shopping_queries_dataset_products.parquet lacks the column(s) product_title" in result.stderr
