"""structret index --add/--remove (structret.api.update_index): an index updated in place, atomically."""

import json
import os

import pytest
from click.testing import CliRunner

from _tiny_models import tiny_bert_dir  # noqa: F401  (fixture)
from structret import artifacts
from structret.api import load_index, update_index
from structret.cli import cli

FIRST = {
    "config.py": 'def read_config(path):\n    """Read the configuration file and return its settings."""\n'
                 '    settings = {}\n    for line in open(path):\n        key, _, value = line.partition("=")\n'
                 '        settings[key.strip()] = value.strip()\n    return settings\n',
    "dates.py": 'def parse_date(text):\n    """Parse an ISO formatted date string into integers."""\n'
                '    year, month, day = text.split("-")\n    year, month = int(year), int(month)\n'
                '    return year, month, int(day)\n',
}
LATER = {
    "mail.py": 'def send_message(server, message):\n    """Send an email message through an SMTP server."""\n'
               '    server.connect()\n    server.sendmail(message)\n    server.quit()\n',
    "sort.py": 'def sort_numbers(items):\n    """Sort a list of numbers in ascending order."""\n'
               '    numbers = list(items)\n    numbers.sort()\n    return numbers\n',
}


def run(*args, code=0):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == code, result.output
    return result.output


def mine(tmp_path, name, files):
    src = tmp_path / f"src-{name}"
    src.mkdir()
    for file, code in files.items():
        (src / file).write_text(code)
    out = tmp_path / f"{name}.jsonl.gz"
    run("mine", src, "--language", "python", "--out", out)
    return f"codesearchnet:{out}"


@pytest.fixture
def corpora(tmp_path, fresh_registry):
    return mine(tmp_path, "first", FIRST), mine(tmp_path, "later", LATER)


def build(tmp_path, data, model, kind):
    idx = tmp_path / "idx"
    run("index", "--data", data, "--backbone", "hf-encoder", "--model", model, "--index", kind, "--out", idx)
    return idx


def ids_of(idx):
    import structret

    return list(structret.load_index(idx, texts=False).index.ids)  # flat keeps an update's ids in a segment


def found_ids(output):
    return [line.split()[-1] for line in output.splitlines() if line.strip()[:3] in ("1. ", "2. ", "3. ", "4. ")]


@pytest.mark.parametrize("kind", ["usearch", "flat"])
def test_add_a_dataset_then_remove_an_id_and_search_sees_both(tmp_path, corpora, tiny_bert_dir, kind):
    first, later = corpora
    idx = build(tmp_path, first, tiny_bert_dir, kind)
    before = ids_of(idx)
    assert len(before) == 2

    output = run("index", "--out", idx, "--add", later)
    assert "added 2, removed 0; it holds 4 vectors" in output
    added = [i for i in ids_of(idx) if i not in before]
    assert len(added) == 2
    output = run("search", idx, "send an email", "-k", "10", "--lines", "1")
    assert sorted(found_ids(output)) == sorted(before + added)
    assert "def send_message" in output  # the added documents' texts are kept with the index

    gone = before[0]
    output = run("index", "--out", idx, "--remove", gone)
    assert "added 0, removed 1; it holds 3 vectors" in output
    output = run("search", idx, "read the configuration file", "-k", "10")
    assert sorted(found_ids(output)) == sorted(before[1:] + added)
    loaded = load_index(idx)  # verified against its checksums.json
    assert len(loaded) == 3 and gone not in loaded.texts
    meta = json.loads((idx / "structret.json").read_text(encoding="utf-8"))
    assert [u["added"] for u in meta["updates"]] == [2, 0] and meta["count"] == 3
    assert sorted(os.listdir(tmp_path)) == sorted(["idx", ".idx.lock", "src-first", "src-later", "first.jsonl.gz",
                                                   "later.jsonl.gz"])  # no staging folder left behind


THIRD = {
    "hashes.py": 'def file_digest(path):\n    """Return the SHA-256 hex digest of a file."""\n'
                 '    import hashlib\n    return hashlib.sha256(open(path, "rb").read()).hexdigest()\n',
    "words.py": 'def count_words(text):\n    """Count how often each word occurs in a text."""\n'
                '    counts = {}\n    for word in text.split():\n        counts[word] = counts.get(word, 0) + 1\n'
                '    return counts\n',
}


def test_two_updates_at_once_take_turns_and_keep_every_vector(tmp_path, corpora, tiny_bert_dir):
    import subprocess
    import sys

    first, later = corpora
    third = mine(tmp_path, "third", THIRD)
    idx = build(tmp_path, first, tiny_bert_dir, "flat")
    command = [sys.executable, "-m", "structret.cli", "index", "--out", str(idx), "--add"]
    # both start before either has written: without the lock each read the 2-vector index, and the
    # last to swap in its 4 vectors won
    runs = [subprocess.Popen([*command, spec], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for spec in (later, third)]
    outputs = [r.communicate(timeout=300)[0] for r in runs]
    assert [r.returncode for r in runs] == [0, 0], outputs
    assert sorted(o.split("it holds ")[1].split()[0] for o in outputs) == ["4", "6"], outputs
    loaded = load_index(idx)
    assert len(loaded) == 6 and len(set(ids_of(idx))) == 6
    assert [u["added"] for u in json.loads((idx / "structret.json").read_text())["updates"]] == [2, 2]


def test_add_an_encode_folder_and_remove_ids_from_a_file_in_one_update(tmp_path, corpora, tiny_bert_dir):
    first, later = corpora
    idx = build(tmp_path, first, tiny_bert_dir, "usearch")
    before = ids_of(idx)
    emb = tmp_path / "emb"
    run("encode", "--data", later, "--backbone", "hf-encoder", "--model", tiny_bert_dir, "--out", emb)
    (tmp_path / "gone.txt").write_text("\n".join(before) + "\n", encoding="utf-8")
    output = run("index", "--out", idx, "--add", emb, "--remove", f"@{tmp_path / 'gone.txt'}")
    assert "added 2, removed 2; it holds 2 vectors" in output
    assert sorted(ids_of(idx)) == sorted(json.loads((emb / "ids.json").read_text(encoding="utf-8")))
    assert "def sort_numbers" in run("search", idx, "sort numbers", "-k", "2", "--lines", "1")


def test_removing_and_adding_the_same_ids_replaces_their_documents(tmp_path, corpora, tiny_bert_dir):
    first, _ = corpora
    idx = build(tmp_path, first, tiny_bert_dir, "usearch")
    ids = ids_of(idx)
    output = run("index", "--out", idx, "--remove", ids[0], "--remove", ids[1], "--add", first)
    assert "added 2, removed 2; it holds 2 vectors" in output
    assert sorted(ids_of(idx)) == sorted(ids)


def unchanged(idx, sums_before):
    """The index at ``idx`` is byte for byte the one saved before, and loads."""
    assert (idx / artifacts.CHECKSUMS_FILE).read_text(encoding="utf-8") == sums_before
    artifacts.verify_checksums(idx)
    load_index(idx)


@pytest.mark.parametrize("args, message", [
    (["--remove", "no-such-id"], "does not hold: 'no-such-id'"),
    (["--add", "{first}"], "is added twice"),  # every id of it is in the index already
    (["--remove", "@{missing}"], "cannot read"),
    (["--add", "{tmp}/nothing-here"], "FORMAT:PATH"),
])
def test_a_bad_update_is_one_clear_error_and_changes_nothing(tmp_path, corpora, tiny_bert_dir, args, message):
    first, _ = corpora
    idx = build(tmp_path, first, tiny_bert_dir, "usearch")
    sums = (idx / artifacts.CHECKSUMS_FILE).read_text(encoding="utf-8")
    args = [a.format(first=first, missing=tmp_path / "missing.txt", tmp=tmp_path) for a in args]
    output = run("index", "--out", idx, *args, code=1)
    assert message in output and "Traceback" not in output
    unchanged(idx, sums)


def test_hnsw_removes_by_marking_and_an_index_that_cannot_remove_says_so(tmp_path, corpora, tiny_bert_dir,
                                                                         monkeypatch):
    from structret.contracts import HasRemove
    from structret_indexes.hnsw import HNSWIndex

    first, later = corpora
    idx = build(tmp_path, first, tiny_bert_dir, "hnsw")
    gone, kept = ids_of(idx)
    assert "added 2, removed 1; it holds 3 vectors" in run("index", "--out", idx, "--add", later, "--remove", gone)
    loaded = load_index(idx)
    assert len(loaded) == 3 and gone not in loaded.index.ids and kept in loaded.index.ids
    assert gone not in found_ids(run("search", idx, "read the configuration file", "-k", "3", "--lines", "0"))
    monkeypatch.delattr(HNSWIndex, "remove")  # an index kind without remove, as milvus
    HasRemove._abc_caches_clear()  # isinstance remembers that HNSWIndex had it (a class loses no method otherwise)
    output = run("index", "--out", idx, "--remove", kept, code=1)
    assert "'hnsw' index, which cannot remove ids" in output


def test_update_needs_an_existing_index_and_no_build_source(tmp_path, corpora):
    first, _ = corpora
    assert "is not a folder" in run("index", "--out", tmp_path / "none", "--remove", "x", code=1)
    assert "--add/--remove update the index" in run("index", "--out", tmp_path / "none", "--add", first,
                                                    "--data", first, code=2)


@pytest.mark.parametrize("where", ["texts", "index"])
def test_an_interrupted_update_leaves_the_previous_index(tmp_path, corpora, tiny_bert_dir, monkeypatch, where):
    first, later = corpora
    idx = build(tmp_path, first, tiny_bert_dir, "usearch")
    sums = (idx / artifacts.CHECKSUMS_FILE).read_text(encoding="utf-8")
    before = load_index(idx).search("read the configuration file", k=2)

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # ctrl-c with the update half written beside the index

    swap = artifacts._exchange

    def crash_at_the_swap(staged, final):
        if os.path.samefile(final, idx):
            raise KeyboardInterrupt  # everything is written beside the index, the swap not yet done
        return swap(staged, final)

    if where == "texts":  # the new index files are written, its texts not yet
        monkeypatch.setattr("structret.search.texts.write_texts", crash)
    else:
        monkeypatch.setattr(artifacts, "_exchange", crash_at_the_swap)
    with pytest.raises(KeyboardInterrupt):
        update_index(idx, add=later, remove=[ids_of(idx)[0]], show_progress=False)
    monkeypatch.undo()

    unchanged(idx, sums)
    assert load_index(idx).search("read the configuration file", k=2) == before
    # the staging folders are gone (the lock file stays: deleting one another process may hold is a race)
    assert [p for p in os.listdir(tmp_path) if p.startswith(".")] == [".idx.lock"]
    assert "added 2, removed 0" in run("index", "--out", idx, "--add", later)  # and the next update works


def test_a_served_index_picks_up_an_update_on_the_next_query(tmp_path, corpora, tiny_bert_dir, caplog):
    import logging

    from structret.serving.searcher import open_searcher

    first, later = corpora
    idx = build(tmp_path, first, tiny_bert_dir, "flat")
    searcher = open_searcher(idx, extractor="none")
    assert len(searcher.search("send an email", 10).hits) == 2
    update_index(idx, add=later, show_progress=False)
    with caplog.at_level(logging.INFO, logger="structret.serve"):
        answer = searcher.search("send an email", 10)
    assert len(answer.hits) == 4 and "now serving 4 documents (before: 2)" in caplog.text
    assert "def send_message" in " ".join(h.text for h in answer.hits)
    # an update the server cannot load (here: a file damaged after the swap) keeps the last good one
    vectors = idx / "vectors.npy"
    vectors.write_bytes(vectors.read_bytes()[:-4])
    (idx / "checksums.json").write_text((idx / "checksums.json").read_text())  # a new version on disk
    with caplog.at_level(logging.WARNING, logger="structret.serve"):
        assert len(searcher.search("send an email", 10).hits) == 4
    assert "cannot be served" in caplog.text


# --- updates that scale: an add writes what it adds, the rest is hard-linked ---------------------


def _saved_flat(path, n=50, dim=16, seed=0):
    import numpy as np

    from structret.api import SearchIndex
    from structret.registry import get_registry

    rng = np.random.default_rng(seed)
    index = get_registry().create("index", "flat", dim)
    index.add([f"d{i}" for i in range(n)], rng.standard_normal((n, dim), dtype=np.float32))
    SearchIndex(index, meta={"model": "random"}, texts={f"d{i}": f"text {i}" for i in range(n)}).save(path)
    return index


def _encoded(path, ids, vectors):
    from structret.embeddings import encode_resumably

    rows = dict(zip(ids, vectors))
    encode_resumably(path, ids, [f"added {i}" for i in ids], lambda texts: __import__("numpy").stack(
        [rows[i] for i in ids[:len(texts)]]), {"backbone": "random", "model": "random", "what": "documents"},
        show_progress=False)
    return path


def test_an_add_writes_only_what_it_adds_and_links_the_rest(tmp_path, monkeypatch, fresh_registry):
    import numpy as np

    from structret.artifacts import verify_tree
    from structret.registry import get_registry

    idx = tmp_path / "idx"
    whole = _saved_flat(idx)
    kept = {name: os.stat(idx / name).st_ino for name in ("vectors.npy", "ids.json", "texts.jsonl.gz", "texts.lookup")}
    rng = np.random.default_rng(1)
    batches = [([f"n{b}-{i}" for i in range(5)], rng.standard_normal((5, 16), dtype=np.float32)) for b in range(2)]

    folders = [_encoded(tmp_path / f"add{b}", ids, vectors) for b, (ids, vectors) in enumerate(batches)]
    hashed = []
    real = artifacts._sha256
    monkeypatch.setattr(artifacts, "_sha256", lambda path: hashed.append(path.name) or real(path))
    for folder, (ids, vectors) in zip(folders, batches):
        update_index(idx, add=folder, show_progress=False)
        whole.add(ids, vectors)
    # the saved files stay where they were (the same inodes), each update wrote one segment of vectors,
    # its ids and its texts, and nothing already checksummed was read again
    assert {name: os.stat(idx / name).st_ino for name in kept} == kept
    assert sorted(os.listdir(idx / "segments")) == ["00001.ids.json", "00001.npy", "00002.ids.json", "00002.npy"]
    assert {"texts.00001.jsonl.gz", "texts.00001.lookup", "texts.00002.jsonl.gz", "texts.00002.lookup"} <= set(
        os.listdir(idx))
    assert not {"vectors.npy", "texts.jsonl.gz", "texts.lookup"} & set(hashed), hashed  # ids.json: the added folders' own

    loaded = load_index(idx)
    assert loaded.index.ids == whole.ids and len(loaded.texts) == 60 and loaded.texts["n1-4"] == "added n1-4"
    queries = rng.standard_normal((4, 16), dtype=np.float32)
    for bf16 in (False, True):  # each segment searched where it lies ranks as one array does, both scorings
        searched = load_index(idx).index
        searched._scores_in_bf16 = whole._scores_in_bf16 = bf16
        got, want = searched.search(queries, 7), whole.search(queries, 7)
        # the same dot products, summed by kernels chosen per shape: equal to float rounding
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
        assert got[1] == want[1] and searched._parts is not None  # not joined into one array
    # 5 saved, 2 x (vectors, ids, texts, their lookup) added
    assert [files for _, files, _ in verify_tree(idx)] == [13]

    # a removal writes the index whole again: one file of vectors, one of texts
    update_index(idx, remove=["d3", "n0-1"], show_progress=False)
    assert not (idx / "segments").exists() and not (idx / "texts.00001.jsonl.gz").exists()
    again = load_index(idx)
    assert len(again) == 58 and "d3" not in again.texts and again.texts["n1-0"] == "added n1-0"
    assert json.loads((idx / "structret.json").read_text())["layout"] == {"base_count": 58, "segments": []}
    verify_tree(idx)


def test_a_flipped_byte_in_a_linked_file_is_still_refused(tmp_path, fresh_registry):
    import numpy as np

    from structret.errors import ArtifactError

    idx = tmp_path / "idx"
    _saved_flat(idx)
    vectors = np.ones((3, 16), dtype=np.float32)
    update_index(idx, add=_encoded(tmp_path / "add", ["a", "b", "c"], vectors), show_progress=False)
    load_index(idx)  # the stamp the update left: no hashing, and it passes
    with open(idx / "vectors.npy", "r+b") as f:  # same size, one byte changed
        f.seek(200)
        byte = f.read(1)
        f.seek(200)
        f.write(bytes([byte[0] ^ 1]))
    with pytest.raises(ArtifactError, match="vectors.npy does not match the checksum"):
        load_index(idx)


def test_segments_are_compacted_past_the_limit_and_not_linked_when_replaced(tmp_path, monkeypatch, fresh_registry):
    import numpy as np

    from structret_indexes import flat

    monkeypatch.setattr(flat, "MAX_SEGMENTS", 2)
    idx = tmp_path / "idx"
    _saved_flat(idx)
    rng = np.random.default_rng(2)
    layouts = []
    for b in range(3):
        update_index(idx, add=_encoded(tmp_path / f"add{b}", [f"x{b}"], rng.standard_normal((1, 16),
                                                                                        dtype=np.float32)),
                     show_progress=False)
        layouts.append(json.loads((idx / "structret.json").read_text())["layout"])
    assert layouts == [{"base_count": 50, "segments": [["00001", 1]]},  # two segments, then one whole write
                       {"base_count": 50, "segments": [["00001", 1], ["00002", 1]]},
                       {"base_count": 53, "segments": []}]
    assert len(load_index(idx)) == 53

    # another writer replaced the files after this index was loaded: nothing of theirs is linked
    loaded = load_index(idx)
    _saved_flat(idx, n=10, seed=5)
    loaded.index.add(["late"], np.zeros((1, 16), dtype=np.float32))
    loaded.save(tmp_path / "copy")
    assert json.loads((tmp_path / "copy" / "structret.json").read_text())["layout"]["segments"] == []
    assert len(load_index(tmp_path / "copy")) == 54


def test_a_usearch_update_writes_its_own_graph_and_links_the_others(tmp_path, fresh_registry):
    import numpy as np

    from structret.api import SearchIndex
    from structret.artifacts import verify_tree
    from structret.registry import get_registry

    rng = np.random.default_rng(3)
    idx = tmp_path / "idx"
    index = get_registry().create("index", "usearch", 16, metric="cosine")
    index.add([f"d{i}" for i in range(40)], rng.standard_normal((40, 16), dtype=np.float32))
    SearchIndex(index, meta={"model": "random"}, texts={f"d{i}": f"text {i}" for i in range(40)}).save(idx)
    base = os.stat(idx / "index.usearch").st_ino
    added = rng.standard_normal((3, 16), dtype=np.float32)
    update_index(idx, add=_encoded(tmp_path / "add", ["a", "b", "c"], added), show_progress=False)
    assert os.stat(idx / "index.usearch").st_ino == base  # linked, not written again
    assert json.loads((idx / "structret.json").read_text())["graphs"] == [["index.usearch", 40],
                                                                          ["segments/00001.usearch", 3]]
    loaded = load_index(idx)
    assert len(loaded) == 43 and loaded.index.search(added, 1)[1] == [["a"], ["b"], ["c"]]
    assert loaded.index.search(added[:1], 43)[1][0][0] == "a" and len(loaded.index.search(added[:1], 43)[1][0]) == 43
    verify_tree(idx)

    # a removal rewrites the graph that held the id; the other stays linked
    segment = os.stat(idx / "segments" / "00001.usearch").st_ino
    update_index(idx, remove=["d5"], show_progress=False)
    assert os.stat(idx / "segments" / "00001.usearch").st_ino == segment
    assert os.stat(idx / "index.usearch").st_ino != base
    again = load_index(idx)
    assert len(again) == 42 and "d5" not in again.index.ids and again.index.search(added, 1)[1][2] == ["c"]
    verify_tree(idx)


def test_many_small_adds_to_a_loaded_flat_index_are_one_part_and_one_segment(tmp_path, fresh_registry):
    import numpy as np

    from structret_indexes.flat import FlatIndex

    whole = _saved_flat(tmp_path / "idx")
    loaded = FlatIndex.load(tmp_path / "idx")
    rng = np.random.default_rng(4)
    for i in range(100):  # one at a time, searching between adds
        vector = rng.standard_normal((1, 16), dtype=np.float32)
        loaded.add([f"one{i}"], vector)
        whole.add([f"one{i}"], vector)
        if i % 25 == 0:
            assert loaded.search(vector, 1)[1] == [[f"one{i}"]]
    assert len(loaded._parts) == 2  # the saved file, and one tail of what was added
    queries = rng.standard_normal((3, 16), dtype=np.float32)
    assert loaded.search(queries, 9)[1] == whole.search(queries, 9)[1]
    loaded.save(tmp_path / "again")
    layout = json.loads((tmp_path / "again" / "structret.json").read_text())["layout"]
    assert layout == {"base_count": 50, "segments": [["00001", 100]]}
    assert FlatIndex.load(tmp_path / "again").ids == whole.ids
