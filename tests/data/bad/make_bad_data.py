"""Writes the malformed-data corpus of this folder (tests/test_bad_data.py reads it).

The files are committed; run this again only to change them:
    python tests/data/bad/make_bad_data.py
(Packages-broken is hand-written and not touched here.)
"""

from __future__ import annotations

import gzip
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def _csn(i: int, **fields) -> dict:
    row = {
        "repo": "octo/demo", "path": "demo.py", "func_name": f"f{i}", "language": "python", "partition": "test",
        "url": f"https://github.com/octo/demo/blob/main/demo.py#L{i}",
        "code": f'def f{i}(x):\n    """Return x plus {i}."""\n    return x + {i}\n',
        "code_tokens": ["def", f"f{i}", "(", "x", ")", ":", "return", "x", "+", str(i)],
        "docstring": f"Return x plus {i}.",
        "docstring_tokens": ["Return", "x", "plus", str(i), "."],
    }
    row.update(fields)
    return row


def _line(row) -> bytes:
    return json.dumps(row).encode()


def csn_bad_rows() -> None:
    no_func_name = _csn(5)
    del no_func_name["func_name"]
    no_code = _csn(7)
    del no_code["code"]
    lines = [
        _line(_csn(1)),                                                  # 1 used
        b'{"code": "def f(): pass", "docstring_tokens": ["a", ',         # 2 bad JSON (cut off)
        _line(_csn(3, code=42)),                                         # 3 code is a number
        _line(_csn(4, docstring_tokens="Return x plus 4.")),             # 4 docstring_tokens is a string
        _line(no_func_name),                                             # 5 used: func_name is optional
        _line(_csn(6, docstring="", docstring_tokens=[])),               # 6 empty docstring: no query
        _line(no_code),                                                  # 7 missing code
        b"[1, 2, 3]",                                                    # 8 not an object
        b'{"code": "def caf\xe9(): pass", "docstring_tokens": ["x"]}',   # 9 latin-1, not UTF-8
        _line(_csn(10, docstring_tokens=["\udc80"])),                   # 10 a lone surrogate (JSON escape)
        b"[" * 5000,                                                     # 11 nested 5,000 deep
        _line(_csn(12, docstring_tokens=["Return", 12])),                # 12 a token is a number
        _line(_csn(13)),                                                 # 13 used
    ]
    with open(os.path.join(HERE, "csn-bad-rows.jsonl"), "wb") as fh:
        fh.write(b"\n".join(lines) + b"\n")


def csn_truncated() -> None:
    data = b"".join(_line(_csn(i)) + b"\n" for i in range(1, 401))
    packed = gzip.compress(data, mtime=0)
    with open(os.path.join(HERE, "csn-truncated.jsonl.gz"), "wb") as fh:
        fh.write(packed[: len(packed) // 2])  # cut in the middle of the deflate stream


def esci_missing_column() -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = os.path.join(HERE, "esci-no-title")
    os.makedirs(folder, exist_ok=True)
    examples = {
        "example_id": [0, 1], "query": ["aa batteries", "aa batteries"], "query_id": [1, 1],
        "product_id": ["B01", "B02"], "product_locale": ["us", "us"], "esci_label": ["E", "S"],
        "small_version": [1, 1], "large_version": [1, 1], "split": ["test", "test"],
    }
    products = {  # no product_title
        "product_id": ["B01", "B02"], "product_description": ["Long-lasting.", "Rechargeable."],
        "product_bullet_point": ["48 pack\nLasts 10 years", "4 pack"], "product_brand": ["Acme", "Volta"],
        "product_color": ["", "blue"], "product_locale": ["us", "us"],
    }
    pq.write_table(pa.table(examples), os.path.join(folder, "shopping_queries_dataset_examples.parquet"))
    pq.write_table(pa.table(products), os.path.join(folder, "shopping_queries_dataset_products.parquet"))


def beir_bad() -> None:
    folder = os.path.join(HERE, "beir-bad")
    os.makedirs(os.path.join(folder, "qrels"), exist_ok=True)
    corpus = [
        _line({"_id": "d1", "title": "Sorting", "text": "sorted() returns a new list."}),   # 1 used
        _line({"title": "No id", "text": "this document has no _id"}),                      # 2 missing _id
        _line({"_id": ["d3"], "text": "an id that is a list"}),                             # 3 wrong type
        _line({"_id": "d4", "title": "", "text": ""}),                                      # 4 empty text
        b'{"_id": "d5", "text": "cut off',                                                  # 5 bad JSON
        _line({"_id": "d2", "title": "Files", "text": "open() returns a file object."}),    # 6 used
        _line({"_id": "d1", "text": "the same id again"}),                                  # 7 duplicate id
    ]
    queries = [
        _line({"_id": "q1", "text": "how to sort a list"}),    # used (has qrels)
        _line({"_id": "q2", "text": "open a file"}),           # used (has qrels)
        _line({"_id": "q3"}),                                  # missing text
        _line({"_id": "q4", "text": "no judgements"}),         # left out: no qrels in the split
    ]
    qrels = [
        b"query-id\tcorpus-id\tscore",  # the header: not a row
        b"q1\td1\t1",                   # used
        b"q2\td2\tvery",                # score is not an integer
        b"q2\td2\t2",                   # used
        b"q1\td9\t1",                   # unknown corpus id
        b"q1 d1 1",                     # not tab-separated
    ]
    for name, lines in (("corpus.jsonl", corpus), ("queries.jsonl", queries), ("qrels/test.tsv", qrels)):
        with open(os.path.join(folder, name), "wb") as fh:
            fh.write(b"\n".join(lines) + b"\n")


def tevatron() -> None:
    good = {"query_id": "1", "query": "sort a list", "positive_passages": [{"docid": "a", "title": "", "text": "sorted(x)"}],
            "negative_passages": [{"docid": "b", "title": "", "text": "open(f)"}]}
    lines = [
        _line(good),                                                          # 1 used
        b'{"query": "cut off", "positive_passages": [',                       # 2 not JSON
        b'"just a string"',                                                   # 3 not an object
        _line({**good, "query": ""}),                                         # 4 empty query
        _line({**good, "positive_passages": [{"docid": "a"}]}),               # 5 positive without text
        b'{"query": "caf\xe9", "positive_passages": [{"text": "x"}]}',        # 6 not UTF-8
        b"[" * 5000,                                                          # 7 nested 5,000 deep
        _line({**good, "query": "read a file"}),                              # 8 used
        _line({**good, "positive_passages": True}),                           # 9 passages not a list
    ]
    data = b"\n".join(lines) + b"\n"
    with open(os.path.join(HERE, "tevatron-bad.jsonl"), "wb") as fh:
        fh.write(data)
    packed = gzip.compress(_line(good) + b"\n" + data * 50, mtime=0)
    with open(os.path.join(HERE, "tevatron-truncated.jsonl.gz"), "wb") as fh:
        fh.write(packed[: len(packed) // 2])


if __name__ == "__main__":
    csn_bad_rows()
    csn_truncated()
    esci_missing_column()
    beir_bad()
    tevatron()
