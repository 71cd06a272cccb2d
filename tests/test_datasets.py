"""The four built-in dataset readers, on small fixtures in the published formats."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from _esci_files import EXAMPLE_NAMES, PRODUCT_NAMES, write_parquet

from structret.errors import DataError, PluginError
from structret.records import CodeRecord, ItemRecord, TextRecord
from structret.registry import get_registry
from structret_datasets import adv, beir, codesearchnet, esci

DATA = Path(__file__).parent / "data"
CSN = DATA / "csn" / "data"
CSN_PY_TEST = CSN / "python" / "final" / "jsonl" / "test" / "python_test_0.jsonl.gz"
MINED = DATA / "csn" / "mined" / "functions.jsonl.gz"
ADV = DATA / "adv"
BEIR = DATA / "beir"


def create(reader: str, path, **options):
    """The reader as core calls it: options checked by its options model."""
    return get_registry().create("dataset", reader, str(path), **options)


def counts(ds) -> tuple[int, dict[str, int]]:
    """(used, skipped by reason), after checking the invariant read == used + skipped."""
    stats = ds.stats
    assert stats.read == stats.used + sum(stats.skipped.values())
    return stats.used, dict(stats.skipped)


def gz_rows(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def write_gz(path: Path, lines: list[bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wb") as fh:
        fh.write(b"".join(line + b"\n" for line in lines))


# --- CodeSearchNet ----------------------------------------------------------------------


def test_csn_test_split_of_the_published_layout():
    ds = codesearchnet.read(str(CSN), split="test")
    assert counts(ds) == (7, {})
    py_rows = gz_rows(CSN_PY_TEST)
    # files in path order: go/ before python/, rows in file order
    assert [q for q, _ in ds.pairs][2:] == [r["url"] for r in py_rows]
    assert ds.pairs[0][0].startswith("https://github.com/gravel/gravel/")
    assert all(q == d and ds.qrels[q] == {d: 1} for q, d in ds.pairs)

    first = py_rows[0]
    query = ds.queries[first["url"]]
    # the tokenized summary, not the docstring field (which goes on past the first paragraph)
    assert query.text == "Split an iterable into lists of at most size items ."
    assert "shorter" in first["docstring"] and "shorter" not in query.text

    doc = ds.corpus[first["url"]]
    assert isinstance(doc, CodeRecord)
    assert (doc.language, doc.func_name, doc.repo, doc.path) == ("python", "chunked", "lumen/lumen-utils", "lumen/iterutils.py")
    assert doc.code_tokens == first["code_tokens"] and doc.docstring == first["docstring"]


def test_csn_python_code_loses_the_docstring_it_carries():
    ds = codesearchnet.read(str(CSN_PY_TEST))
    row = gz_rows(CSN_PY_TEST)[0]
    assert '"""Split an iterable' in row["code"]  # CodeSearchNet keeps it in 'code'
    code = ds.corpus[row["url"]].code
    assert code.startswith("def chunked(iterable, size):\n    if size < 1:\n")
    assert "Split an iterable" not in code and code.endswith("        yield chunk")

    method = ds.corpus[gz_rows(CSN_PY_TEST)[2]["url"]].code  # LRUCache.get, body indented 8
    assert method.startswith("def get(self, key, default=None):\n        try:\n")


def test_csn_go_code_is_kept_as_is():
    ds = codesearchnet.read(str(CSN), split="test", language="go")
    assert counts(ds) == (2, {})
    push = ds.corpus[ds.pairs[0][1]]
    assert push.code.startswith("func (r *Ring) Push(v int) {")
    assert ds.queries[ds.pairs[0][0]].text == "Push adds v to the ring , overwriting the oldest value when full ."


@pytest.mark.parametrize(
    ("split", "language", "n", "first_func"),
    [
        ("valid", None, 2, "parse_duration"),
        ("train", None, 3, "Store.put"),
        ("test", "python", 5, "chunked"),
        (None, None, 12, "Ring.Push"),
    ],
)
def test_csn_split_and_language_select_files(split, language, n, first_func):
    ds = codesearchnet.read(str(CSN), split=split, language=language)
    # whole files are chosen: nothing of the other splits or languages is read
    assert counts(ds) == (n, {})
    assert ds.corpus[ds.pairs[0][1]].func_name == first_func


def test_csn_glob():
    ds = codesearchnet.read(str(CSN / "*" / "final" / "jsonl" / "test" / "*.jsonl.gz"))
    assert counts(ds) == (7, {})


def test_csn_mined_file_is_filtered_on_partition():
    ds = codesearchnet.read(str(MINED), split="test")
    assert counts(ds) == (2, {"partition is not 'test'": 5})
    assert [ds.corpus[d].func_name for _, d in ds.pairs] == ["chunked", "slugify"]
    assert ds.stats.examples == []  # rows left out by choice are no faults to show

    assert counts(codesearchnet.read(str(MINED), split="train")) == (3, {"partition is not 'train'": 4})
    assert counts(codesearchnet.read(str(MINED))) == (7, {})
    # no language in the file name: rows are checked one by one
    assert counts(codesearchnet.read(str(MINED), language="go")) == (0, {"language is not 'go'": 7})


def test_csn_mined_file_in_a_folder_named_like_a_split(tmp_path):
    # a folder named 'test' above the path the user gave says nothing about the split
    target = tmp_path / "test" / "functions.jsonl.gz"
    target.parent.mkdir()
    shutil.copy(MINED, target)
    assert counts(codesearchnet.read(str(target), split="valid")) == (2, {"partition is not 'valid'": 5})


def test_csn_files_follow_natural_order(tmp_path):
    folder = tmp_path / "python" / "final" / "jsonl" / "test"
    row = gz_rows(CSN_PY_TEST)[0]
    del row["url"]  # ids fall back to file:line, which shows where each row came from
    for n in range(12):
        write_gz(folder / f"python_test_{n}.jsonl.gz", [json.dumps(row).encode()])
    ds = codesearchnet.read(str(tmp_path), split="test")
    assert [q for q, _ in ds.pairs] == [f"python_test_{n}.jsonl.gz:1" for n in range(12)]


def test_csn_bad_rows_are_skipped_and_counted(tmp_path):
    good = gz_rows(CSN_PY_TEST)
    row = lambda **changes: json.dumps({**good[1], **changes}).encode()  # noqa: E731
    missing_code = {k: v for k, v in good[1].items() if k != "code"}
    lines = [
        json.dumps(good[0]).encode(),                                         # 1 used
        b'{"repo": "lumen/lumen-utils", "code": "def f(:',                  # 2 bad JSON
        json.dumps(missing_code).encode(),                                     # 3 missing field
        row(docstring_tokens="Convert a title"),                               # 4 wrong type
        b'{"code": "def f():\\n    return 1", "docstring_tokens": ["caf\xe9"]}',  # 5 latin-1 byte
        row(docstring_tokens=[]),                                              # 6 empty query
        row(code="   \n"),                                                     # 7 empty code
        b"[1, 2, 3]",                                                          # 8 not an object
        json.dumps(good[0]).encode(),                                          # 9 same url: new id
        b"",                                                                   # blank: not a row
        json.dumps({**good[2], "code_tokens": [1, 2]}).encode(),               # 11 wrong type
        row(url="u", docstring_tokens=["\ud800 lone"]),                        # 12 lone surrogate
        json.dumps(good[3]).encode(),                                          # 13 used
    ]
    path = tmp_path / "python_test_0.jsonl.gz"
    write_gz(path, lines)
    ds = codesearchnet.read(str(path))
    assert counts(ds) == (
        3,
        {
            "bad JSON": 1,
            "missing field 'code'": 1,
            "wrong type for 'docstring_tokens'": 1,
            "undecodable bytes": 2,
            "empty query": 1,
            "empty code": 1,
            "not a JSON object": 1,
            "wrong type for 'code_tokens'": 1,
        },
    )
    assert ds.stats.examples[:3] == [
        f"{path}:2: bad JSON",
        f"{path}:3: missing field 'code'",
        f"{path}:4: wrong type for 'docstring_tokens'",
    ]
    assert [q for q, _ in ds.pairs] == [good[0]["url"], "python_test_0.jsonl.gz:9", good[3]["url"]]
    assert "read 12 rows = 3 used + 9 skipped" in ds.stats.summary()  # the blank line is no row


def test_csn_truncated_gzip_keeps_the_rows_before_the_damage(tmp_path):
    good = gz_rows(CSN_PY_TEST)
    rows = [{**good[n % 5], "url": f"u{n}"} for n in range(200)]
    whole = tmp_path / "whole.jsonl.gz"
    write_gz(whole, [json.dumps(r).encode() for r in rows])
    cut = tmp_path / "cut.jsonl.gz"
    data = whole.read_bytes()
    cut.write_bytes(data[: len(data) * 2 // 3])

    ds = codesearchnet.read(str(cut))
    used, skipped = counts(ds)
    assert skipped == {"truncated gzip": 1}
    assert 0 < used < 200
    assert [q for q, _ in ds.pairs] == [f"u{n}" for n in range(used)]
    assert ds.stats.examples == [f"{cut}:{used + 1}: truncated gzip"]


def test_csn_plain_jsonl_named_gz_still_reads(tmp_path):
    path = tmp_path / "python_test_0.jsonl.gz"
    path.write_text("".join(json.dumps(r) + "\n" for r in gz_rows(CSN_PY_TEST)))
    assert counts(codesearchnet.read(str(path))) == (5, {})


def test_csn_errors_say_what_exists(tmp_path):
    with pytest.raises(DataError, match=r"no files for split 'dev' .*splits found are: test, train, valid"):
        codesearchnet.read(str(CSN), split="dev")
    with pytest.raises(DataError, match=r"no files for language 'java' .*languages found are: go, python"):
        codesearchnet.read(str(CSN), language="java")
    with pytest.raises(DataError, match=r"splits found are: test"):
        codesearchnet.read(str(CSN_PY_TEST), split="train")
    with pytest.raises(DataError, match=r"nowhere\.jsonl\.gz does not exist"):
        codesearchnet.read(str(tmp_path / "nowhere.jsonl.gz"))
    with pytest.raises(DataError, match=r"no \.jsonl or \.jsonl\.gz files under the folder"):
        codesearchnet.read(str(tmp_path))
    with pytest.raises(DataError, match=r"pattern .* matches no files"):
        codesearchnet.read(str(tmp_path / "*.jsonl.gz"))
    with pytest.raises(PluginError, match=r"'codesearchnet' has no option 'lang'\. Did you mean 'language'\?"):
        create("codesearchnet", CSN, lang="python")


def test_csn_is_registered_under_its_alias():
    from structret.registry import get_registry

    ds = get_registry().create("dataset", "csn", str(CSN), split="valid")
    assert counts(ds) == (2, {})


# --- CodeXGLUE Adv ----------------------------------------------------------------------


def adv_rows(split: str) -> list[dict]:
    return [json.loads(line) for line in (ADV / f"{split}.jsonl").read_text().splitlines()]


def test_adv_test_split_follows_codexglue():
    ds = adv.read(str(ADV))
    rows = adv_rows("test")
    assert counts(ds) == (5, {})
    assert ds.pairs == [(r["url"], str(r["idx"])) for r in rows]
    assert all(ds.qrels[r["url"]] == {str(r["idx"]): 1} for r in rows)
    # query: ' '.join(docstring_tokens); code: ' '.join(function_tokens), names normalised
    assert ds.queries[rows[0]["url"]].text == "Split an iterable into lists of at most size items ."
    code = ds.corpus["0"].code
    assert code.startswith("def Func ( arg_0 , arg_1 ) : if arg_1 < 1 :")
    assert "chunked" not in code and "Split" not in code


def test_adv_train_rows_use_code_tokens():
    ds = adv.read(str(ADV), split="train")
    assert counts(ds) == (3, {})
    assert ds.corpus["0"].code.startswith("def put ( self , key , value , ttl = None ) :")
    assert ds.corpus["0"].language == "python"


def test_adv_raw_code_text_drops_the_docstring():
    ds = adv.read(str(ADV / "test.jsonl"), code_text="raw")
    code = ds.corpus["0"].code
    assert code.startswith("def chunked(iterable, size):\n    if size < 1:")
    assert "Split an iterable" not in code


def test_adv_bad_rows(tmp_path):
    good = adv_rows("test")
    broken = [
        good[0],
        {k: v for k, v in good[1].items() if k != "idx"},        # 2 missing idx
        {**good[1], "idx": [1]},                                  # 3 wrong type
        {**good[1], "url": good[0]["url"], "idx": 99},            # 4 same query
        {**good[1], "idx": 0},                                    # 5 same code
        {k: v for k, v in good[2].items() if k != "function_tokens"},  # 6 no code at all
        {**good[3], "docstring_tokens": None},                    # 7 missing query
        good[4],
    ]
    path = tmp_path / "test.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in broken) + '{"url": "x", "idx": \n')
    ds = adv.read(str(path))
    assert counts(ds) == (
        2,
        {
            "missing field 'idx'": 1,
            "wrong type for 'idx'": 1,
            "duplicate id": 2,
            "missing field 'code_tokens' or 'function_tokens'": 1,
            "missing field 'docstring_tokens'": 1,
            "bad JSON": 1,
        },
    )
    assert ds.stats.examples[0] == f"{path}:2: missing field 'idx'"
    assert ds.pairs == [(good[0]["url"], "0"), (good[4]["url"], "4")]


def test_adv_errors():
    with pytest.raises(DataError, match=r"no dev\.jsonl .*are: test\.jsonl, train\.jsonl, valid\.jsonl"):
        adv.read(str(ADV), split="dev")
    with pytest.raises(DataError, match=r"is the 'test' split, but split 'valid' was asked"):
        adv.read(str(ADV / "test.jsonl"), split="valid")
    with pytest.raises(PluginError, match=r"code_text='ast': Input should be 'tokens' or 'raw'"):
        create("adv", ADV, code_text="ast")
    with pytest.raises(PluginError, match=r"no option 'language'.*Its options: .*code_text"):
        create("adv", ADV, language="python")
    assert create("adv", ADV / "test.jsonl", code_text="RAW").corpus  # a choice is read in any case
    with pytest.raises(DataError, match=r"does not exist"):
        adv.read(str(ADV / "missing"))


# --- ESCI -------------------------------------------------------------------------------

EXAMPLES = [
    # example_id, query, query_id, product_id, product_locale, esci_label, small, large, split
    (0, "aa batteries 100 pack", 101, "B00MNV8E0C", "us", "E", 1, 1, "test"),
    (1, "aa batteries 100 pack", 101, "B07ZPKBL9V", "us", "S", 1, 1, "test"),
    (2, "aa batteries 100 pack", 101, "B075GR2ZPN", "us", "C", 1, 1, "test"),
    (3, "aa batteries 100 pack", 101, "B01B8R6PF2", "us", "I", 1, 1, "test"),
    (4, "wireless earbuds for iphone", 102, "B09JQMJHXY", "us", "E", 1, 1, "test"),
    (5, "wireless earbuds for iphone", 102, "B0000GONE0", "us", "E", 1, 1, "test"),   # no product row
    (6, "wireless earbuds for iphone", 102, "B00MNV8E0C", "us", "X", 1, 1, "test"),   # bad label
    (7, "kitchen timer magnetic", 103, "B07TXNR3Q9", "us", "E", 0, 1, "test"),        # large only
    (8, "zapatillas running hombre", 104, "B08KT2Z93D", "es", "S", 1, 1, "test"),
    (9, "zapatillas running hombre", 104, "B00MNV8E0C", "es", "I", 1, 1, "test"),     # same ASIN, es
    (10, "usb c cable", 105, "B00MNV8E0C", "us", "C", 1, 1, "train"),
    (11, "イヤホン bluetooth", 106, "B08F7PTF53", "jp", "E", 1, 1, "test"),
    (12, "aa batteries 100 pack", 101, "B00MNV8E0C", "us", "E", 1, 1, "test"),        # repeated pair
]
PRODUCTS = [
    # product_id, title, description, bullet_point, brand, color, locale
    ("B00MNV8E0C", "Amazon Basics 100 Pack AA High-Performance Alkaline Batteries",
     "AA alkaline batteries for everyday devices.",
     "  Long-lasting power for toys and remotes\n\n100 AA batteries per pack \n", "Amazon Basics", None, "us"),
    ("B00MNV8E0C", "Pilas alcalinas AA, paquete de 100", None, None, "Amazon Basics", "", "es"),
    ("B07ZPKBL9V", "Energizer AA Batteries, Max Double A Battery, 48 Count", "Energizer MAX AA batteries.",
     "Long-lasting\nLeak-resistant", "", "Black", "us"),
    ("B075GR2ZPN", "AA Battery Charger with 8 Rechargeable Batteries", None, "", "EBL", "White", "us"),
    ("B01B8R6PF2", "Flashlight LED Tactical, 2 Pack", "Bright flashlight.", None, "GearLight", None, "us"),
    ("B09JQMJHXY", "Wireless Earbuds Bluetooth 5.3 Headphones", "In-ear earbuds.", "Touch control", "TOZO", "Black", "us"),
    ("B07TXNR3Q9", "Digital Kitchen Timer with Magnetic Back", "Timer.", "Loud alarm", "Antonki", "White", "us"),
    ("B08KT2Z93D", "Zapatillas de running para hombre", "Zapatillas ligeras.", "Suela de goma", "Adidas", "Negro", "es"),
    ("B08F7PTF53", "ワイヤレスイヤホン Bluetooth 5.0", "高音質", "防水", "Anker", "ブラック", "jp"),
]


@pytest.fixture(scope="module")
def esci_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("esci")
    write_parquet(folder / esci.EXAMPLES, EXAMPLE_NAMES, EXAMPLES)
    write_parquet(folder / esci.PRODUCTS, PRODUCT_NAMES, PRODUCTS)
    return folder


def test_esci_default_is_small_us_test(esci_dir):
    ds = esci.read(str(esci_dir))
    assert counts(ds) == (
        5,
        {
            "product not in products file": 1,
            "label is not E/S/C/I": 1,
            "duplicate id": 1,
            "not in the small version": 1,
            "locale is not 'us'": 3,
            "split is not 'test'": 1,
        },
    )
    assert ds.stats.read == len(EXAMPLES)
    examples_file = esci_dir / esci.EXAMPLES
    assert ds.stats.examples == [
        f"{examples_file}:row 5: product not in products file",
        f"{examples_file}:row 6: label is not E/S/C/I",
        f"{examples_file}:row 12: duplicate id",
    ]
    assert {q: query.text for q, query in ds.queries.items()} == {
        "101": "aa batteries 100 pack",
        "102": "wireless earbuds for iphone",
    }
    assert ds.qrels == {
        "101": {"B00MNV8E0C": 3, "B07ZPKBL9V": 2, "B075GR2ZPN": 1, "B01B8R6PF2": 0},
        "102": {"B09JQMJHXY": 3},
    }
    assert sorted(ds.corpus) == ["B00MNV8E0C", "B01B8R6PF2", "B075GR2ZPN", "B07ZPKBL9V", "B09JQMJHXY"]
    assert ds.labels == {3: "E", 2: "S", 1: "C", 0: "I"} and ds.default_gains == "esci-paper"
    assert ds.pairs is None


def test_esci_items(esci_dir):
    ds = esci.read(str(esci_dir))
    batteries = ds.corpus["B00MNV8E0C"]
    assert isinstance(batteries, ItemRecord)
    assert batteries.title == "Amazon Basics 100 Pack AA High-Performance Alkaline Batteries"
    assert batteries.content == "AA alkaline batteries for everyday devices."
    assert batteries.bullets == ["Long-lasting power for toys and remotes", "100 AA batteries per pack"]
    assert batteries.aspects == {"brand": ["Amazon Basics"], "color": []}  # color is None: an empty list
    assert batteries.locale == "us"
    energizer = ds.corpus["B07ZPKBL9V"]
    assert energizer.aspects == {"brand": [], "color": ["Black"]}  # brand is "": an empty list
    assert energizer.bullets == ["Long-lasting", "Leak-resistant"]
    charger = ds.corpus["B075GR2ZPN"]
    assert (charger.content, charger.bullets) == ("", [])


def test_esci_options_select_rows(esci_dir):
    large = esci.read(str(esci_dir), version="large")
    assert "103" in large.queries and large.qrels["103"] == {"B07TXNR3Q9": 3}

    spanish = esci.read(str(esci_dir), locale="es")
    assert spanish.qrels == {"104": {"B08KT2Z93D": 2, "B00MNV8E0C": 0}}
    assert spanish.corpus["B00MNV8E0C"].title == "Pilas alcalinas AA, paquete de 100"  # the es row of that ASIN

    train = esci.read(str(esci_dir / esci.EXAMPLES), split="train")  # the examples file itself
    assert train.qrels == {"105": {"B00MNV8E0C": 1}}

    every = esci.read(str(esci_dir), locale="all")
    assert every.qrels["104"] == {"es/B08KT2Z93D": 2, "es/B00MNV8E0C": 0}
    assert every.qrels["101"]["us/B00MNV8E0C"] == 3
    assert every.corpus["jp/B08F7PTF53"].aspects == {"brand": ["Anker"], "color": ["ブラック"]}
    assert counts(every)[0] == 8


def test_esci_errors(esci_dir, tmp_path):
    with pytest.raises(PluginError, match=r"locale='de': Input should be 'us', 'es', 'jp' or 'all'"):
        create("esci", esci_dir, locale="de")
    with pytest.raises(DataError, match=r"split 'dev' is not one of: train, valid, test"):
        esci.read(str(esci_dir), split="dev")
    with pytest.raises(PluginError, match=r"version='medium': Input should be 'small' or 'large'"):
        create("esci", esci_dir, version="medium")
    with pytest.raises(PluginError, match=r"'esci' has no option 'lang'"):
        create("esci", esci_dir, lang="us")
    with pytest.raises(DataError, match=r"does not exist"):
        esci.read(str(tmp_path / "nowhere"))

    # examples without the label and version columns; products missing altogether
    write_parquet(tmp_path / esci.EXAMPLES, EXAMPLE_NAMES[:5] + ["split"], [r[:5] + (r[8],) for r in EXAMPLES])
    with pytest.raises(DataError, match=r"shopping_queries_dataset_products\.parquet does not exist"):
        esci.read(str(tmp_path))
    write_parquet(tmp_path / esci.PRODUCTS, PRODUCT_NAMES, PRODUCTS)
    with pytest.raises(DataError) as err:
        esci.read(str(tmp_path))
    message = str(err.value)
    assert str(tmp_path / esci.EXAMPLES) in message
    assert "lacks the column(s) esci_label, small_version, large_version" in message


# --- BEIR -------------------------------------------------------------------------------


def test_beir_test_split():
    ds = beir.read(str(BEIR))
    # 6 corpus lines + 4 qrels lines + 3 queries with qrels; 2 queries belong to dev only
    assert counts(ds) == (13, {"no qrels in split 'test'": 2})
    assert ds.qrels == {"1": {"4983": 1}, "3": {"5836": 1, "7912": 2}, "5": {"18670": 0}}
    assert sorted(ds.queries) == ["1", "3", "5"]
    assert ds.queries["5"].text == "1/2000 in UK have abnormal PrP positivity."
    assert len(ds.corpus) == 6
    doc = ds.corpus["4983"]
    assert isinstance(doc, TextRecord)
    assert doc.title.startswith("Microstructural development") and doc.text_.startswith("Alterations of")
    assert ds.corpus["19238"].text() == "The ability of the brain to repair itself after injury declines with age."


def test_beir_dev_split():
    ds = beir.read(str(BEIR), split="dev")
    assert ds.qrels == {"13": {"19238": 1}, "36": {"33370": 1}}
    assert sorted(ds.queries) == ["13", "36"]


def test_beir_bad_rows(tmp_path):
    shutil.copytree(BEIR, tmp_path, dirs_exist_ok=True)
    with open(tmp_path / "corpus.jsonl", "a") as fh:
        fh.write('{"docid": "900", "title": "A docid key, as Tevatron writes", "text": "Kept."}\n')
        fh.write('{"_id": "4983", "text": "A second 4983."}\n')
        fh.write('{"_id": "901", "text": 7}\n')
        fh.write('{"_id": "902", "text": \n')
    with open(tmp_path / "qrels" / "test.tsv", "a") as fh:
        fh.write("1\t900\t2\n")
        fh.write("404\t4983\t1\n")
        fh.write("1\t404\t1\n")
        fh.write("1\t7912\trelevant\n")
        fh.write("1 7912 1\n")
        fh.write("1\t4983\t1\n")
    ds = beir.read(str(tmp_path))
    assert counts(ds) == (
        15,
        {
            "duplicate id": 1,
            "wrong type for 'text'": 1,
            "bad JSON": 1,
            "unknown query id": 1,
            "unknown corpus id": 1,
            "score is not an integer": 1,
            "not 3 tab-separated fields": 1,
            "duplicate qrels row": 1,
            "no qrels in split 'test'": 2,
        },
    )
    assert ds.qrels["1"] == {"4983": 1, "900": 2}
    assert ds.corpus["4983"].text_.startswith("Alterations of")  # the first one stays
    assert ds.stats.examples[0] == f"{tmp_path / 'corpus.jsonl'}:8: duplicate id"


def test_beir_errors(tmp_path):
    with pytest.raises(DataError, match=r"no qrels for split 'train'.*splits in .* are: dev, test"):
        beir.read(str(BEIR), split="train")
    with pytest.raises(DataError, match=r"has no corpus\.jsonl"):
        beir.read(str(tmp_path))
    with pytest.raises(DataError, match=r"is a file, not a folder"):
        beir.read(str(BEIR / "corpus.jsonl"))
    with pytest.raises(PluginError, match=r"no option 'lowercase'\. Its options: max_field_chars \(int, default 1000000"):
        create("beir", BEIR, lowercase=True)


# --- the Python docstring stripper ------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        # the shape of the example row in CodeSearchNet's README: a method, body indented 8
        (
            'def get_id(url):\n        """Pull the id out of a URL.\n        """\n'
            '        return match(url, r"id=(\\w+)") or \\\n            match(url, r"/v/(\\w+)")',
            'def get_id(url):\n        return match(url, r"id=(\\w+)") or \\\n            match(url, r"/v/(\\w+)")',
        ),
        # comments and blank lines before the docstring stay; a ':' in a default is no header end
        (
            "def f(a, sep=':', key=lambda x: x) -> Dict[str, int]:  # noqa\n\n    # lead\n    'doc'  # c\n    return a",
            "def f(a, sep=':', key=lambda x: x) -> Dict[str, int]:  # noqa\n\n    # lead\n    return a",
        ),
        ('def f(x):\n    r"""Raw \\""" doc."""\n    print "py2"\n', 'def f(x):\n    print "py2"\n'),
        ("def f(x):\n    u'''doc\n    more'''\n    rb = 1", "def f(x):\n    rb = 1"),
        # a string that starts an expression is no docstring
        ('def f(x):\n    "-".join(x)\n    return x', 'def f(x):\n    "-".join(x)\n    return x'),
        ("def f(x): return x", "def f(x): return x"),
        ('def f(:\n  """unterminated', 'def f(:\n  """unterminated'),
    ],
)
def test_strip_python_docstring(code, expected):
    from structret_datasets._docstring import strip_python_docstring

    assert strip_python_docstring(code) == expected


def test_esci_queries_train_on_their_exact_products(esci_dir):
    from structret.linearization import TextFormat
    from structret.training import examples_from_dataset

    ds = esci.read(str(esci_dir))
    examples = examples_from_dataset(ds, TextFormat("product"))
    # query 101 judged E, S, C and I: only the Exact product is a positive (SANTA's fine-tuning)
    assert [(e.queries, len(e.positives)) for e in examples] == [(["aa batteries 100 pack"], 1),
                                                                  (["wireless earbuds for iphone"], 1)]
    exact = ds.corpus["B00MNV8E0C"]
    assert examples[0].positives == [f"title : {exact.title} text : {exact.content}"]
    assert examples[0].record is exact


def test_esci_valid_share_holds_out_train_queries_as_attempt_does(tmp_path):
    """valid_share: a stable share of the train split's queries is split=valid, and train leaves
    them out; without it there is no valid split and train is all of it (SANTA's use)."""
    rows = [(i, f"query number {i}", 200 + i, "B00MNV8E0C", "us", "E", 1, 1, "train") for i in range(40)]
    write_parquet(tmp_path / esci.EXAMPLES, EXAMPLE_NAMES, rows)
    write_parquet(tmp_path / esci.PRODUCTS, PRODUCT_NAMES, PRODUCTS)
    whole = esci.read(str(tmp_path), split="train")
    train = esci.read(str(tmp_path), split="train", valid_share=0.3)
    valid = esci.read(str(tmp_path), split="valid", valid_share=0.3)
    assert len(whole.queries) == 40
    assert set(train.queries) | set(valid.queries) == set(whole.queries)
    assert not set(train.queries) & set(valid.queries)
    assert 4 <= len(valid.queries) <= 20  # about 12 of 40
    assert set(valid.queries) == {str(200 + i) for i in range(40) if esci.held_out(str(200 + i), 0.3)}
    assert train.stats.skipped["valid-split query"] == len(valid.queries)
    assert train.stats.read == valid.stats.read == whole.stats.read
    assert esci.read(str(tmp_path), split="valid", valid_share=0.3).qrels == valid.qrels  # stable
    with pytest.raises(DataError, match="no validation split of its own; set the option valid_share"):
        esci.read(str(tmp_path), split="valid")
