"""Catalogs with aspects: ESCI products (brand, color, categories; SANTA's pretraining
pairs; the two gain maps) and Debian's package index (section, priority, debtags)."""

from __future__ import annotations

import gzip
import json
import lzma
import math
import shutil
import subprocess
from pathlib import Path

import pytest
from _esci_files import EXAMPLE_NAMES, PRODUCT_NAMES, write_parquet

from structret.errors import DataError, PluginError
from structret.records import ItemRecord
from structret.registry import get_registry
from structret_datasets import debian, esci

DATA = Path(__file__).parent / "data"
DEB = DATA / "debian"
BROKEN = DATA / "bad" / "Packages-broken"


def counts(ds) -> tuple[int, dict[str, int]]:
    stats = ds.stats
    assert stats.read == stats.used + sum(stats.skipped.values())
    return stats.used, dict(stats.skipped)


# --- ESCI fixture, in the published column layout ------------------------------------------

EXAMPLES = [
    # example_id, query, query_id, product_id, product_locale, esci_label, small, large, split
    (0, "usb c charger", 201, "B0CHARGE01", "us", "E", 1, 1, "test"),
    (1, "usb c charger", 201, "B0CHARGE02", "us", "S", 1, 1, "test"),
    (2, "usb c charger", 201, "B0CABLE003", "us", "C", 1, 1, "test"),
    (3, "usb c charger", 201, "B0SOCKS004", "us", "I", 1, 1, "test"),
    (4, "phone stand", 202, "B0STAND005", "us", "E", 1, 1, "test"),
    (5, "phone stand", 202, "B0SOCKS004", "us", "I", 1, 1, "test"),
    # training rows of the large version, for SANTA's pretraining pairs
    (6, "desk lamp", 301, "B0LAMP0006", "us", "E", 0, 1, "train"),
    (7, "desk lamp led", 302, "B0LAMP0006", "us", "E", 0, 1, "train"),      # same product again
    (8, "desk lamp", 301, "B0LAMP0007", "us", "E", 0, 1, "train"),          # no bullet points
    (9, "desk lamp", 301, "B0LAMP0008", "us", "E", 0, 1, "train"),          # no description
    (10, "desk lamp", 301, "B0LAMP0009", "us", "S", 0, 1, "train"),         # not Exact
    (11, "lampara", 303, "B0LAMP0006", "es", "E", 0, 1, "train"),           # not us
    (12, "desk lamp", 301, "B0GONE0010", "us", "E", 0, 1, "train"),         # no product row
    (13, "desk lamp", 301, "B0LAMP0011", "us", "E", 0, 0, "train"),         # neither version (not large)
]
PRODUCTS = [
    # product_id, title, description, bullet_point, brand, color, locale
    ("B0CHARGE01", "65W USB C Charger", "GaN wall charger.", "65W output\nFoldable plug", "Anker", "White", "us"),
    ("B0CHARGE02", "45W USB C Charger", "Compact charger.", None, "Ugreen", None, "us"),
    ("B0CABLE003", "USB C Cable 2 Pack", None, "  6 ft\n\n braided ", None, "Black", "us"),
    ("B0SOCKS004", "Wool Socks", "Warm socks.", "", "", "", "us"),
    ("B0STAND005", "Adjustable Phone Stand", "Aluminium stand.", "Fits all phones", "Lamicall", "Silver", "us"),
    ("B0LAMP0006", "LED Desk Lamp", "Dimmable LED lamp with USB port.",
     "5 color modes\nTouch control\nUSB charging port", "TaoTronics", "Black", "us"),
    ("B0LAMP0006", "Lámpara LED", "Lámpara regulable.", "5 modos", "TaoTronics", "Negro", "es"),
    ("B0LAMP0007", "Clamp Lamp", "Clamp-on lamp.", None, "Simple Deluxe", "Black", "us"),
    ("B0LAMP0008", "Swing Arm Lamp", "", "Metal arm\nE26 socket", "Globe", "Bronze", "us"),
    ("B0LAMP0009", "Floor Lamp", "Tall lamp.", "Floor standing", "Brightech", "Black", "us"),
    ("B0LAMP0011", "Tiny Lamp", "Small lamp.", "Tiny", "Acme", "Red", "us"),
]


@pytest.fixture(scope="module")
def esci_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("esci")
    assert set(esci.EXAMPLE_COLUMNS) <= set(EXAMPLE_NAMES)  # the published layout (plus example_id)
    assert set(PRODUCT_NAMES) == set(esci.PRODUCT_COLUMNS)
    write_parquet(folder / esci.EXAMPLES, EXAMPLE_NAMES, EXAMPLES)
    write_parquet(folder / esci.PRODUCTS, PRODUCT_NAMES, PRODUCTS)
    return folder


def test_esci_products_have_every_aspect_key_and_bullets_as_a_list(esci_dir):
    ds = esci.read(str(esci_dir))
    assert counts(ds) == (6, {"split is not 'test'": 8})
    charger = ds.corpus["B0CHARGE01"]
    assert isinstance(charger, ItemRecord)
    assert charger.aspects == {"brand": ["Anker"], "color": ["White"]}
    assert charger.bullets == ["65W output", "Foldable plug"]
    # content is the description alone; the bullets stay out of the document text
    assert charger.content == "GaN wall charger."
    assert charger.text() == "65W USB C Charger GaN wall charger."
    assert ds.corpus["B0CHARGE02"].aspects == {"brand": ["Ugreen"], "color": []}        # None
    assert ds.corpus["B0CABLE003"].aspects == {"brand": [], "color": ["Black"]}          # None
    assert ds.corpus["B0CABLE003"].bullets == ["6 ft", "braided"]
    socks = ds.corpus["B0SOCKS004"]
    assert (socks.aspects, socks.bullets) == ({"brand": [], "color": []}, [])            # blank strings
    assert all(set(item.aspects) == {"brand", "color"} for item in ds.corpus.values())


def write_categories(path: Path, lines: list) -> None:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))


CATEGORY_LINES = [
    {"product_id": "B0CHARGE01", "product_locale": "us", "categories": ["Electronics", "Chargers"]},   # 1
    {"product_id": "B0CHARGE02", "categories": ["Electronics", "Accessories", "Chargers", "USB-C"]},   # 2 locale us
    {"product_id": "B0LAMP0006", "categories": ["Home", "Lamps"]},                 # 3 not in the test split
    {"product_id": "B0NOWHERE1", "categories": ["Toys"]},                          # 4 no such product
    '{"product_id": "B0CABLE003", "categories": ["Electronics"',                  # 5 bad JSON
    {"product_id": "B0CABLE003", "categories": ["a", "b", "c", "d", "e"]},         # 6 five levels
    {"product_id": "B0SOCKS004", "categories": "Clothing"},                        # 7 not a list
    {"product_id": "B0CHARGE01", "categories": ["Electronics"]},                   # 8 a second row
    {"categories": ["Electronics"]},                                               # 9 no id
    {"product_id": "B0STAND005", "categories": ["Electronics", " "]},              # 10 empty level
    {"product_id": "B0STAND005", "product_locale": "de", "categories": ["X"]},     # 11 unknown locale
    {"product_id": "B0STAND005", "categories": []},                                # 12 no levels
    {"product_id": "B0LAMP0006", "product_locale": "es", "categories": ["Hogar"]},  # 13 es: not selected
]


def test_esci_categories_join_as_one_aspect_per_level(esci_dir, tmp_path):
    path = tmp_path / "categories.jsonl"
    write_categories(path, CATEGORY_LINES)
    ds = esci.read(str(esci_dir), categories=str(path))
    used, skipped = counts(ds)
    assert used == 6
    assert skipped == {
        "split is not 'test'": 8,
        "category row: product not selected": 2,
        "category row: product not in products file": 1,
        "bad JSON": 1,
        "category file: not 1-4 category levels": 2,
        "category file: 'categories' is not a list of strings": 1,
        "category file: second category row for one product": 1,
        "category file: missing field 'product_id'": 1,
        "category file: empty category level": 1,
        "category file: product_locale is not us, es or jp": 1,
    }
    assert ds.stats.examples[:3] == [
        f"{path}:5: bad JSON",
        f"{path}:6: category file: not 1-4 category levels",
        f"{path}:7: category file: 'categories' is not a list of strings",
    ]
    assert ds.corpus["B0CHARGE01"].aspects == {
        "brand": ["Anker"], "color": ["White"],
        "category_1": ["Electronics"], "category_2": ["Chargers"], "category_3": [], "category_4": [],
    }
    assert [ds.corpus["B0CHARGE02"].aspects[f"category_{k}"] for k in (1, 2, 3, 4)] == [
        ["Electronics"], ["Accessories"], ["Chargers"], ["USB-C"]
    ]
    # no (usable) row: four empty levels, the same keys as every other product
    assert {k: v for k, v in ds.corpus["B0STAND005"].aspects.items() if k.startswith("category")} == {
        "category_1": [], "category_2": [], "category_3": [], "category_4": []
    }
    assert all(len(item.aspects) == 6 for item in ds.corpus.values())


def test_esci_category_file_errors(esci_dir, tmp_path):
    with pytest.raises(DataError, match=r"category file .*nowhere\.jsonl does not exist"):
        esci.read(str(esci_dir), categories=str(tmp_path / "nowhere.jsonl"))
    with pytest.raises(PluginError, match=r"'esci' has no option 'category'\. Did you mean 'categories'"):
        get_registry().create("dataset", "esci", str(esci_dir), category="x.jsonl")


def test_esci_categories_in_a_gzip_file_for_all_locales(esci_dir, tmp_path):
    path = tmp_path / "categories.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        fh.write(json.dumps({"product_id": "B0LAMP0006", "product_locale": "es", "categories": ["Hogar"]}) + "\n")
    ds = esci.read(str(esci_dir), version="large", locale="all", split="train", categories=str(path))
    assert ds.corpus["es/B0LAMP0006"].aspects["category_1"] == ["Hogar"]
    assert ds.corpus["us/B0LAMP0006"].aspects["category_1"] == []


# --- SANTA's product pretraining pairs -----------------------------------------------------


def test_santa_pretraining_pairs_from_large_us_exact_rows(esci_dir):
    ds = esci.read_santa_pretrain(str(esci_dir))
    assert counts(ds) == (
        1,
        {
            "split is not 'train'": 6,
            "not in the large version": 1,
            "locale is not 'us'": 1,
            "label is not 'E'": 1,
            "product not in products file": 1,
            "product already paired (judged E for another query)": 1,
            "product without bullet points": 1,
            "product without a description": 1,
        },
    )
    assert list(ds.corpus) == ["B0LAMP0006"]
    assert (ds.queries, ds.qrels, ds.pairs) == ({}, {}, None)
    lamp = ds.corpus["B0LAMP0006"]
    assert lamp.bullets == ["5 color modes", "Touch control", "USB charging port"]
    assert lamp.content == "Dimmable LED lamp with USB port." and lamp.locale == "us"

    # the existing trainer turns it into: one random bullet point per epoch -> the product
    from structret.training import examples_from_dataset

    (example,) = examples_from_dataset(ds)
    assert example.queries == lamp.bullets
    assert example.positives == ["LED Desk Lamp Dimmable LED lamp with USB port."]
    assert example.record is lamp


def test_santa_pretraining_split_all_and_registry(esci_dir):

    ds = get_registry().create("dataset", "esci-santa-pretrain", str(esci_dir), split="all")
    # test-split Exact rows of the large version join: B0CHARGE01 and B0STAND005 have bullets
    assert sorted(ds.corpus) == ["B0CHARGE01", "B0LAMP0006", "B0STAND005"]
    with pytest.raises(PluginError, match=r"dataset 'esci-santa-pretrain' has no option 'locale'"):
        get_registry().create("dataset", "esci-santa-pretrain", str(esci_dir), locale="es")
    with pytest.raises(DataError, match=r"split 'valid' is not one of: train, test, all"):
        esci.read_santa_pretrain(str(esci_dir), split="valid")


# --- both gain maps on a hand-computed ranking ---------------------------------------------


def test_esci_ndcg_with_both_gain_maps_matches_hand_computation(esci_dir):
    from structret.evaluation import evaluate_run, gain_levels, rerank_run

    ds = esci.read(str(esci_dir))
    assert ds.qrels == {
        "201": {"B0CHARGE01": 3, "B0CHARGE02": 2, "B0CABLE003": 1, "B0SOCKS004": 0},
        "202": {"B0STAND005": 3, "B0SOCKS004": 0},
    }
    # query 201 ranks I, C, E, S; query 202 ranks I, E
    scores = {
        "201": {"B0SOCKS004": 4.0, "B0CABLE003": 3.0, "B0CHARGE01": 2.0, "B0CHARGE02": 1.0},
        "202": {"B0SOCKS004": 2.0, "B0STAND005": 1.0},
    }
    run = rerank_run(lambda qid, docids: [scores[qid][d] for d in docids], ds.qrels)

    def ndcg(gains_in_rank_order: list[float]) -> float:
        dcg = sum(g / math.log2(rank + 1) for rank, g in enumerate(gains_in_rank_order, start=1))
        ideal = sorted(gains_in_rank_order, reverse=True)
        return dcg / sum(g / math.log2(rank + 1) for rank, g in enumerate(ideal, start=1))

    E, S, C, I = "E", "S", "C", "I"
    order = {"201": [I, C, E, S], "202": [I, E]}
    maps = {
        "binary": {E: 1.0, S: 0.0, C: 0.0, I: 0.0},
        "esci-paper": {E: 1.0, S: 0.1, C: 0.01, I: 0.0},
        "esci-official": {E: 1.0, S: 0.01, C: 0.1, I: 0.0},
    }
    # the same numbers written out: 202 is 1/log2(3) under every map
    q202 = 1 / math.log2(3)
    written_out = {
        "binary": ((1 / 2) / 1 + q202) / 2,
        "esci-paper": ((0.01 / math.log2(3) + 1 / 2 + 0.1 / math.log2(5)) / (1 + 0.1 / math.log2(3) + 0.01 / 2) + q202) / 2,
        "esci-official": ((0.1 / math.log2(3) + 1 / 2 + 0.01 / math.log2(5)) / (1 + 0.1 / math.log2(3) + 0.01 / 2) + q202) / 2,
    }
    for name, gains in maps.items():
        expected = sum(ndcg([gains[label] for label in order[q]]) for q in order) / len(order)
        assert expected == pytest.approx(written_out[name], abs=1e-12)
        levels = gain_levels(ds.labels, name, {lv for docs in ds.qrels.values() for lv in docs.values()})
        got = evaluate_run(run, ds.qrels, ["nDCG@100"], gains=levels)["nDCG@100"]
        assert got == pytest.approx(expected, abs=1e-4), name
    # the two four-class maps disagree here (S and C swap), and both differ from two-class
    assert written_out["esci-paper"] == pytest.approx(0.572641, abs=1e-6)
    assert written_out["esci-official"] == pytest.approx(0.581078, abs=1e-6)
    assert written_out["binary"] == pytest.approx(0.565465, abs=1e-6)


# --- Debian package index -------------------------------------------------------------------


def read_fixture(**options):
    """The fixture as core reads it (options checked by the reader's options model); the whole
    catalog unless a test asks for a half, since these tests are about reading it."""
    return get_registry().create("dataset", "debian-packages", str(DEB / "Packages"),
                                 translations=str(DEB / "Translation-en"), **{"half": "both", **options})


FIXTURE_ORDER = ["0ad", "jq", "python3-requests", "ripgrep", "tree", "python3-numpy", "curl", "git",
                 "cowsay", "sl", "htop", "zstd"]


def test_debian_packages_with_translations():
    ds = read_fixture()
    assert counts(ds) == (12, {"no long description": 1, "duplicate package (the first one read is kept)": 1})
    # freeglut3-dev: its Translation-en entry is the synopsis alone ("Tranisitonal package")
    assert ds.stats.examples == [f"{DEB / 'Packages'}:97: no long description"]
    assert "freeglut3-dev" not in ds.corpus
    assert ds.pairs == [(p, p) for p in FIXTURE_ORDER]
    assert ds.qrels["jq"] == {"jq": 1} and len(ds.qrels) == 12
    assert ds.queries["jq"].text == "lightweight and flexible command-line JSON processor"
    assert ds.queries["0ad"].text == "Real-time strategy game of ancient warfare"

    ad = ds.corpus["0ad"]
    assert (ad.id, ad.title) == ("0ad", "0ad")
    # Tag: wraps over three lines
    assert ad.aspects == {
        "section": ["games"], "component": ["main"], "priority": ["optional"],
        "game": ["strategy"], "interface": ["graphical", "x11"], "role": ["program"],
        "uitoolkit": ["sdl", "wxwidgets"], "use": ["gameplaying"], "x11": ["application"],
    }
    assert ad.content.startswith('0 A.D. (pronounced "zero ey-dee") is a free, open-source, cross-platform\nreal-time')
    assert ad.content.endswith("custom-built\ngame engine.")
    # a one-line Tag; a package without Tag has only the three fixed keys
    assert ds.corpus["jq"].aspects == {
        "section": ["utils"], "component": ["main"], "priority": ["optional"],
        "implemented-in": ["c"], "role": ["program"], "works-with-format": ["json"],
    }
    assert ds.corpus["python3-requests"].aspects == {"section": ["python"], "component": ["main"], "priority": ["optional"]}
    assert ds.corpus["ripgrep"].aspects == {"section": ["utils"], "component": ["main"], "priority": ["optional"]}
    numpy = ds.corpus["python3-numpy"].aspects
    assert numpy["devel"] == ["lang:python", "library"] and numpy["field"] == ["mathematics"]
    assert len(ds.corpus["curl"].aspects["protocol"]) == 14  # over five wrapped lines

    # " ." is a paragraph break; a verbatim (double-space) line keeps one space of indent
    requests = ds.corpus["python3-requests"].content
    assert "in the same way. It's powered by httplib and urllib3, but\nit does all" in requests
    assert "crazy hacks for you.\n\nFeatures\n\n  - International Domains and URLs\n  - Keep-Alive" in requests


def test_debian_without_translations_says_where_the_descriptions_are(tmp_path):
    with pytest.raises(DataError, match=r"carry only synopses.*Translation-en.*Acquire::Languages=en"):
        debian.read(str(DEB / "Packages"), half="both")
    with pytest.raises(DataError, match=r"carry only synopses"):
        debian.read(str(DEB / "Packages"), translations="none", half="both")


def test_debian_status_file_has_inline_descriptions():
    ds = debian.read(str(DEB / "status"), half="both")
    assert counts(ds) == (2, {})
    assert ds.queries["ed"].text == "classic UNIX line editor"
    assert ds.corpus["ed"].content == (
        "ed is a line-oriented text editor.  It is used to\ncreate, display, modify and otherwise manipulate text\n"
        "files.\n\nred is a restricted ed: it can only edit files in the\ncurrent directory and cannot execute "
        "shell commands."
    )
    assert ds.corpus["bc"].aspects == {"section": ["math"], "component": ["main"], "priority": ["standard"]}


def test_debian_broken_stanzas_are_skipped_with_file_and_line():
    ds = debian.read(str(BROKEN), half="both")
    assert counts(ds) == (
        2,
        {
            "missing field 'Package'": 1,
            "malformed line (not 'Field: value')": 1,
            "continuation line before any field": 1,
            "undecodable bytes": 1,
            "field 'Description' given twice": 1,
            "empty synopsis": 1,
            "missing field 'Description'": 1,
            "no long description": 1,
        },
    )
    assert ds.stats.examples == [
        f"{BROKEN}:9: missing field 'Package'",
        f"{BROKEN}:14: malformed line (not 'Field: value')",
        f"{BROKEN}:18: continuation line before any field",
        f"{BROKEN}:24: undecodable bytes",
        f"{BROKEN}:30: field 'Description' given twice",
    ]
    assert "read 10 rows = 2 used + 8 skipped" in ds.stats.summary()
    good = ds.corpus["good-contrib"]
    # the archive area leaves the section; a tag without a facet goes under "tag"
    assert good.aspects == {
        "section": ["net"], "component": ["contrib"], "priority": ["optional"],
        "role": ["program"], "tag": ["special-tag-without-facet"], "use": ["downloading"],
    }
    last = ds.corpus["good-last"]
    assert last.aspects == {"section": ["science"], "component": ["non-free"], "priority": []}
    assert last.content == "First paragraph,\nsecond line.\n\n  verbatim line"


def test_debian_apt_lists_folder_with_compressed_files(tmp_path):
    prefix = "deb.debian.org_debian_dists_bookworm_main"
    (tmp_path / f"{prefix}_binary-amd64_Packages.xz").write_bytes(lzma.compress((DEB / "Packages").read_bytes()))
    # the same index uncompressed beside it is read once (one file per stem)
    shutil.copy(DEB / "Packages", tmp_path / f"{prefix}_binary-amd64_Packages")
    with gzip.open(tmp_path / f"{prefix}_i18n_Translation-en.gz", "wb") as fh:
        fh.write((DEB / "Translation-en").read_bytes())
    (tmp_path / "deb.debian.org_debian_dists_bookworm_InRelease").write_text("not an index\n")
    ds = debian.read(str(tmp_path), half="both")
    assert counts(ds) == (12, {"no long description": 1, "duplicate package (the first one read is kept)": 1})
    assert ds.stats.examples == [f"{tmp_path / (prefix + '_binary-amd64_Packages')}:97: no long description"]
    assert ds.corpus["0ad"].content == read_fixture().corpus["0ad"].content


def test_debian_debtags_of_a_later_copy_fill_in_a_tagless_first_copy(tmp_path):
    # as in /var/lib/apt/lists: the security suite sorts first and its Packages has no Tag:
    stanzas = (DEB / "Packages").read_text().rstrip("\n").split("\n\n")
    security_jq = stanzas[-1]
    assert security_jq.startswith("Package: jq\n") and "\nTag:" not in security_jq
    (tmp_path / "deb.debian.org_debian-security_dists_bookworm-security_main_binary-amd64_Packages").write_text(
        security_jq + "\n"
    )
    shutil.copy(DEB / "Packages", tmp_path / "deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages")
    shutil.copy(DEB / "Translation-en", tmp_path / "deb.debian.org_debian_dists_bookworm_main_i18n_Translation-en")
    ds = debian.read(str(tmp_path), half="both")
    assert counts(ds) == (12, {"no long description": 1, "duplicate package (the first one read is kept)": 2})
    assert ds.pairs[0] == ("jq", "jq")  # the security copy is the one kept
    assert ds.corpus["jq"].aspects == {
        "section": ["utils"], "component": ["main"], "priority": ["optional"],
        "implemented-in": ["c"], "role": ["program"], "works-with-format": ["json"],
    }


@pytest.mark.skipif(shutil.which("lz4") is None, reason="the lz4 command is not installed")
def test_debian_lz4_lists_as_apt_writes_them(tmp_path):
    target = tmp_path / "x_Packages.lz4"
    subprocess.run(["lz4", "-q", str(DEB / "Packages"), str(target)], check=True)
    ds = debian.read(str(target), translations=str(DEB / "Translation-en"), half="both")
    assert counts(ds)[0] == 12
    cut = tmp_path / "cut_Packages.lz4"
    data = target.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    used, skipped = counts(debian.read(str(cut), translations=str(DEB / "Translation-en"), half="both"))
    assert skipped == {"truncated or corrupt compressed file": 1} and used < 12  # one lz4 block: nothing before the cut


def test_debian_truncated_xz_keeps_the_stanzas_before_the_damage(tmp_path):
    data = lzma.compress((DEB / "Packages").read_bytes())
    cut = tmp_path / "Packages.xz"
    cut.write_bytes(data[: len(data) * 2 // 3])
    ds = debian.read(str(cut), translations=str(DEB / "Translation-en"), half="both")
    used, skipped = counts(ds)
    assert skipped.pop("truncated or corrupt compressed file") == 1
    assert 0 < used < 12
    assert [q for q, _ in ds.pairs] == FIXTURE_ORDER[:used]


def test_debian_broken_translation_stanzas_are_counted(tmp_path):
    translations = tmp_path / "Translation-en"
    translations.write_bytes(b"Package: x\nnot a field\n\n" + (DEB / "Translation-en").read_bytes())
    ds = debian.read(str(DEB / "Packages"), translations=str(translations), half="both")
    used, skipped = counts(ds)
    assert used == 12 and skipped["translation: malformed line (not 'Field: value')"] == 1
    assert ds.stats.examples[0] == f"{translations}:2: translation: malformed line (not 'Field: value')"


def test_debian_options_and_errors(tmp_path):
    ds = read_fixture(limit=3)
    assert counts(ds) == (3, {})
    assert [q for q, _ in ds.pairs] == FIXTURE_ORDER[:3]
    assert counts(read_fixture(split="test"))[0] == 12
    with pytest.raises(PluginError, match=r"limit=0: Input should be greater than or equal to 1"):
        read_fixture(limit=0)
    with pytest.raises(PluginError, match=r"limit=True: .*a whole number is expected"):
        read_fixture(limit=True)
    with pytest.raises(PluginError, match=r"no option 'lang'\. Its options: .*translations"):
        read_fixture(lang="en")
    with pytest.raises(DataError, match=r"nowhere does not exist\. Pass a Packages file"):
        debian.read(str(tmp_path / "nowhere"), half="both")
    with pytest.raises(DataError, match=r"has no Packages files .*apt-get update"):
        debian.read(str(tmp_path), half="both")
    with pytest.raises(DataError, match=r"translations path .*missing does not exist"):
        debian.read(str(DEB / "Packages"), translations=str(tmp_path / "missing"), half="both")


def test_debian_split_is_stable_and_tests_against_the_whole_catalog(monkeypatch):
    import hashlib

    monkeypatch.setattr(debian, "TEST_EVERY", 3)  # 14 packages at 1 in 10 could leave no test query
    everything, train, test = read_fixture(), read_fixture(split="train"), read_fixture(split="test")
    valid = read_fixture(split="valid")
    names = sorted(everything.corpus)
    expected_test = sorted(n for n in names if int(hashlib.sha1(n.encode()).hexdigest()[:16], 16) % 3 == 0)
    expected_valid = sorted(n for n in names if int(hashlib.sha1(n.encode()).hexdigest()[:16], 16) % 3 == 1)
    assert 0 < len(expected_test) < len(names) and 0 < len(expected_valid) < len(names)
    assert sorted(test.queries) == expected_test and sorted(valid.queries) == expected_valid
    assert sorted(test.corpus) == sorted(valid.corpus) == names  # both rank the whole catalog (of the half read)
    assert test.pairs is None and test.metrics == valid.metrics == ["R@100", "R@500", "nDCG@50", "MRR@100"]
    assert set(train.corpus) == set(names) - set(expected_test) - set(expected_valid)
    held = set(expected_test) | set(expected_valid)
    assert [q for q, _ in train.pairs] == [q for q, _ in everything.pairs if q not in held]
    # rows read = used + skipped, in every split
    assert train.stats.read == everything.stats.read == test.stats.read == valid.stats.read
    assert train.stats.skipped["test-split package"] == len(expected_test)
    assert train.stats.skipped["valid-split package"] == len(expected_valid)


def test_debian_keeps_training_tuning_and_selection_off_the_reserved_half(monkeypatch):
    """The packages whose sha1(name) starts 0-7 are kept for evaluation: by default no query,
    positive or training item comes from them; a test split may rank against them."""
    import hashlib

    from structret.errors import DataError

    monkeypatch.setattr(debian, "TEST_EVERY", 3)
    reserved = {n for n in FIXTURE_ORDER if hashlib.sha1(n.encode()).hexdigest()[0] in "01234567"}
    assert 0 < len(reserved) < len(FIXTURE_ORDER)  # the fixture has both halves
    everything = read_fixture(half="open")
    train, test = read_fixture(half="open", split="train"), read_fixture(half="open", split="test")
    for ds in (everything, train):
        assert not reserved & (set(ds.corpus) | set(ds.queries) | {d for _, d in ds.pairs})
    assert everything.stats.skipped["package of the reserved half"] == len(reserved)
    assert not reserved & set(test.queries) and reserved <= set(test.corpus)  # ranked against, never asked
    valid = read_fixture(half="open", split="valid")  # selection: not even ranked against
    assert valid.queries and not reserved & (set(valid.queries) | set(valid.corpus))
    held_out = read_fixture(half="reserved", split="test")
    assert set(held_out.queries) <= reserved and set(held_out.queries).isdisjoint(test.queries)
    with pytest.raises(DataError, match="half=reserved is kept for evaluation"):
        read_fixture(half="reserved", split="train")
    # the default is the open half
    default = get_registry().create("dataset", "debian-packages", str(DEB / "Packages"),
                                    translations=str(DEB / "Translation-en"))
    assert set(default.corpus) == set(everything.corpus)


def test_debian_is_registered():
    from structret.registry import get_registry

    ds = get_registry().create("dataset", "debian-packages", str(DEB / "status"), half="both")
    assert sorted(ds.corpus) == ["bc", "ed"]
    assert get_registry().create("dataset", "debian", str(DEB / "status"), half="both").pairs == [("bc", "bc"),
                                                                                                 ("ed", "ed")]
