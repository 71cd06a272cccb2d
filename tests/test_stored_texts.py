"""The texts beside an index: read by id from their lookup, without reading the rest (issue 40, item 4)."""

from __future__ import annotations

import gzip
import json
from types import SimpleNamespace

import numpy as np
import pytest

from structret.search import texts as stored_texts
from structret.artifacts import write_checksums
from structret.search.texts import TEXTS_FILE, TextStore, concatenate_texts, open_index_texts, write_texts


@pytest.fixture(autouse=True)
def small_members(monkeypatch):
    monkeypatch.setattr(stored_texts, "BLOCK", 32)  # several members from a few texts


def _texts(n: int, prefix: str = "d") -> dict[str, str]:
    # unicode, newlines and quotes: what JSON rows and line splitting could get wrong
    return {f"{prefix}{i}": f"def f{i}():\n    return \"é{i}\"\n" * (1 + i % 3) for i in range(n)}


def test_every_text_is_found_by_id_and_iterates_in_order(tmp_path):
    texts = _texts(100)  # three whole members and a part one
    write_texts(tmp_path, list(texts), list(texts.values()))
    with gzip.open(tmp_path / TEXTS_FILE, "rt", encoding="utf-8") as rows:  # still one gzip file of JSON rows
        assert [json.loads(row)["id"] for row in rows] == list(texts)
    store = TextStore(tmp_path, [TEXTS_FILE])
    assert len(store) == 100 and list(store) == list(texts) and dict(store.items()) == texts
    assert list(store.values()) == list(texts.values())
    assert all(store[i] == t for i, t in texts.items())
    assert "d100" not in store and store.get("d100") is None and "d99" in store
    with pytest.raises(KeyError):
        store["nope"]


def test_ids_whose_hashes_collide_still_find_their_own_text(tmp_path, monkeypatch):
    monkeypatch.setattr(stored_texts, "_key", lambda doc_id: 7)  # every id one hash
    texts = _texts(40)
    write_texts(tmp_path, list(texts), list(texts.values()))
    store = TextStore(tmp_path, [TEXTS_FILE])
    assert all(store[i] == t for i, t in texts.items()) and "x" not in store


def test_a_search_reads_only_the_members_of_its_hits(tmp_path):
    texts = _texts(320)  # ten members
    write_texts(tmp_path, list(texts), list(texts.values()))
    store = TextStore(tmp_path, [TEXTS_FILE])
    segment = store._segments[0]
    assert segment.member.cache_info().misses == 0  # nothing read at open
    assert store["d5"] == texts["d5"] and store["d6"] == texts["d6"] and store["d300"] == texts["d300"]
    assert segment.member.cache_info().misses == 2  # d5 and d6 share a member


def test_concatenated_parts_keep_a_lookup_that_finds_every_text(tmp_path):
    parts, whole = [], {}
    for n, size in enumerate((33, 0, 5, 64)):  # a part member, an empty part, whole members
        folder = tmp_path / f"part{n}"
        folder.mkdir()
        texts = _texts(size, prefix=f"p{n}-")
        write_texts(folder, list(texts), list(texts.values()))
        parts.append(SimpleNamespace(path=folder))
        whole.update(texts)
    out = tmp_path / "out"
    out.mkdir()
    assert concatenate_texts(parts, out)
    store = TextStore(out, [TEXTS_FILE])
    assert len(store) == len(whole) and list(store) == list(whole)
    assert all(store[i] == t for i, t in whole.items())


def test_texts_without_a_lookup_are_read_whole_as_before(tmp_path):
    # texts.jsonl.gz as the previous structret wrote it: one gzip stream, no lookup
    texts = _texts(10)
    with gzip.open(tmp_path / TEXTS_FILE, "wt", encoding="utf-8") as f:
        for i, t in texts.items():
            f.write(json.dumps({"id": i, "text": t}) + "\n")
    write_checksums(tmp_path)
    opened, note = open_index_texts(tmp_path)
    assert isinstance(opened, dict) and opened == texts and note is None


def test_a_loaded_index_reads_its_texts_on_demand_and_an_old_one_is_converted_by_an_update(tmp_path):
    from structret.api import SearchIndex, load_index, update_index
    from structret.registry import get_registry

    rng = np.random.default_rng(0)
    index = get_registry().create("index", "flat", 8)
    texts = _texts(50)
    index.add(list(texts), rng.standard_normal((50, 8), dtype=np.float32))
    idx = tmp_path / "idx"
    SearchIndex(index, meta={"model": "random"}, texts=texts).save(idx)
    loaded = load_index(idx)
    assert isinstance(loaded.texts, TextStore)
    hits = loaded.search_vectors(rng.standard_normal((1, 8), dtype=np.float32), 3)[0]
    assert [h.text for h in hits] == [texts[h.id] for h in hits]

    # an index whose texts have no lookup (an earlier structret): loaded whole; removing one converts it
    (idx / "texts.lookup").unlink()
    write_checksums(idx)
    old = load_index(idx)
    assert isinstance(old.texts, dict) and old.texts == texts
    update_index(idx, remove=["d0"], show_progress=False)
    converted = load_index(idx)
    assert isinstance(converted.texts, TextStore) and (idx / "texts.lookup").is_file()
    assert dict(converted.texts.items()) == {i: t for i, t in texts.items() if i != "d0"}


def test_a_store_keeps_reading_what_was_loaded_after_an_update_swaps_the_folder(tmp_path):
    from structret.api import SearchIndex, load_index, update_index
    from structret.registry import get_registry

    index = get_registry().create("index", "flat", 4)
    texts = _texts(40)
    index.add(list(texts), np.random.default_rng(0).standard_normal((40, 4), dtype=np.float32))
    idx = tmp_path / "idx"
    SearchIndex(index, meta={"model": "random"}, texts=texts).save(idx)
    loaded = load_index(idx)
    update_index(idx, remove=[f"d{i}" for i in range(30)], show_progress=False)  # texts written anew
    assert loaded.texts["d3"] == texts["d3"] and list(loaded.texts) == list(texts)
    assert dict(load_index(idx).texts.items()) == {f"d{i}": texts[f"d{i}"] for i in range(30, 40)}


def test_a_damaged_member_costs_its_texts_with_one_warning(tmp_path, capsys):
    texts = _texts(64)
    write_texts(tmp_path, list(texts), list(texts.values()))
    data = bytearray((tmp_path / TEXTS_FILE).read_bytes())
    data[40:60] = b"\0" * 20  # inside the first member
    (tmp_path / TEXTS_FILE).write_bytes(bytes(data))
    store = TextStore(tmp_path, [TEXTS_FILE])
    assert store.get("d1") is None and store.get("d2") is None and store["d40"] == texts["d40"]
    err = capsys.readouterr().err
    assert err.count("is damaged") == 1 and str(tmp_path / TEXTS_FILE) in err and "Rebuild" in err


def test_a_cut_short_lookup_is_a_clear_error(tmp_path):
    texts = _texts(10)
    write_texts(tmp_path, list(texts), list(texts.values()))
    lookup = tmp_path / "texts.lookup"
    lookup.write_bytes(lookup.read_bytes()[:-8])
    from structret.errors import ArtifactError

    with pytest.raises(ArtifactError, match="texts.lookup is damaged"):
        TextStore(tmp_path, [TEXTS_FILE])
