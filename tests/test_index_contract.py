"""The contract every registered index plugin passes (structret.contracts.Index, docs/plugins.md).

Parametrized over ``get_registry().names("index")``: an installed third-party index is
tested with its default options, as a user would get it. Run it for one index with
``python -m pytest tests/test_index_contract.py -k NAME``.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest

from structret import artifacts
from structret.errors import ArtifactError, PluginError
from structret.search.saved import load_index
from structret.registry import get_registry

DIM = 24
APPROXIMATE_RECALL = 0.9
# the ids of a real corpus: unicode, spaces, separators, quotes, look-alike numbers, empty
ODD_IDS = ["naïve", "文档/1", "a b", "", "0", "00", "🙂", 'say "hi"', "back\\slash", "x" * 300, "Ω\n2"]
# a Milvus server, stood in for by Milvus Lite's own gRPC server (the fixture starts it)
_SERVER = "<milvus server>"


def _cases() -> list:
    names = get_registry().names("index")
    cases = [pytest.param((name, {}), id=name) for name in names]
    if "milvus" in names:  # its other code paths: an approximate type, and a server
        cases += [pytest.param(("milvus", {"index_type": "HNSW"}), id="milvus-hnsw"),
                  pytest.param(("milvus", {"uri": _SERVER}), id="milvus-server")]
    return cases


@pytest.fixture(params=_cases())
def index_case(request):
    return request.param


@pytest.fixture(scope="module")
def milvus_server():
    pytest.importorskip("milvus_lite", reason="milvus-lite is not installed: pip install 'structret[milvus]'")
    from milvus_lite.adapter.grpc.server import start_server_in_thread

    with tempfile.TemporaryDirectory() as data:
        server, db, port = start_server_in_thread(data_dir=os.path.join(data, "server"), host="127.0.0.1", port=0)
        yield f"http://127.0.0.1:{port}"
        server.stop(grace=0)
        db.close()


@pytest.fixture
def make(index_case, request):
    """``make(dim, **options)``: the case's index; closed after the test if it can be."""
    name, case_options = index_case
    if case_options.get("uri") == _SERVER:
        case_options = {**case_options, "uri": request.getfixturevalue("milvus_server")}
    made = []

    def create(dim=DIM, **options):
        try:
            index = get_registry().create("index", name, dim, **case_options, **options)
        except PluginError as exc:
            if "not installed" in str(exc):
                pytest.skip(str(exc))
            raise
        made.append(index)
        return index

    yield create
    for index in made:
        getattr(index, "close", lambda: None)()


@pytest.fixture
def load(request):
    made = []

    def load_(path):
        index = load_index(path)
        made.append(index)
        return index

    yield load_
    for index in made:
        getattr(index, "close", lambda: None)()


def clustered(n: int, dim: int = DIM, *, seed: int = 0, unit: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(20, dim))
    points = centers[rng.integers(20, size=n)] + 0.5 * rng.normal(size=(n, dim))
    if unit:
        points /= np.linalg.norm(points, axis=1, keepdims=True)
    return points.astype(np.float32)


def ids_for(n: int, start: int = 0) -> list[str]:
    return [f"doc{i}" for i in range(start, start + n)]


def exact_top(vectors: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    scores = queries.astype(np.float64) @ vectors.astype(np.float64).T
    return np.argsort(-scores, axis=1, kind="stable")[:, :k]


def check_scores(stored: dict[str, np.ndarray], queries: np.ndarray, scores: np.ndarray, ids: list[list[str]], k: int):
    """Shape, order, and each score is the inner product of its query and the vector added under its id."""
    want_k = min(k, len(stored))
    assert scores.dtype == np.float32 and scores.shape == (len(queries), want_k)
    assert [len(row) for row in ids] == [want_k] * len(queries)
    assert (np.diff(scores, axis=1) <= 1e-5).all(), "scores must be best first"
    for query, row_scores, row_ids in zip(queries, scores, ids):
        assert len(set(row_ids)) == len(row_ids), "an id is returned twice for one query"
        want = np.array([stored[i].astype(np.float64) @ query.astype(np.float64) for i in row_ids])
        np.testing.assert_allclose(row_scores, want, rtol=1e-4, atol=1e-4)


def as_stored(ids: list[str], vectors: np.ndarray) -> dict[str, np.ndarray]:
    return dict(zip(ids, vectors))


def recall(found: list[list[str]], want: np.ndarray, ids: list[str]) -> float:
    return float(np.mean([len(set(f) & {ids[r] for r in w}) / len(w) for f, w in zip(found, want)]))


def test_top_k_is_exact_or_within_the_documented_recall(make):
    index = make()
    exact = getattr(index, "exact", False)
    # an approximate index is held to its recall on unit vectors (what normalizing encoders give);
    # an exact one must also be exact on vectors of varying length
    vectors, queries = clustered(1500, unit=not exact), clustered(40, seed=1, unit=not exact)
    index.add(ids_for(1500), vectors)
    scores, ids = index.search(queries, 10)
    check_scores(as_stored(ids_for(1500), vectors), queries, scores, ids, 10)
    got = recall(ids, exact_top(vectors, queries, 10), ids_for(1500))
    if exact:
        assert got == 1.0
    else:
        assert got >= APPROXIMATE_RECALL


def test_several_adds_equal_one_and_len_counts_them(make):
    vectors, queries = clustered(300), clustered(10, seed=1)
    once, batched = make(), make()
    once.add(ids_for(300), vectors)
    for start, stop in ((0, 100), (100, 101), (101, 101), (101, 300)):  # one of a single vector, one empty
        batched.add(ids_for(stop - start, start), vectors[start:stop])
        assert len(batched) == stop
    assert len(once) == 300
    a, b = once.search(queries, 5), batched.search(queries, 5)
    if getattr(once, "exact", False):
        assert a[1] == b[1]
        np.testing.assert_allclose(a[0], b[0], rtol=1e-5, atol=1e-5)
        return
    # an approximate graph built by several threads is not the same graph twice (usearch missed one
    # of 50 neighbours in one CI run): the same vectors must still be found, with the same scores
    found = [len(set(x) & set(y)) for x, y in zip(a[1], b[1])]
    assert sum(found) >= 0.9 * 5 * len(queries), found
    for ids_a, scores_a, ids_b, scores_b in zip(a[1], a[0], b[1], b[0]):
        both = dict(zip(ids_b, scores_b))
        for doc, score in zip(ids_a, scores_a):
            if doc in both:
                assert abs(score - both[doc]) <= 1e-5, doc


def test_cosine_ranks_by_angle_whatever_the_scale(make):
    vectors, queries = clustered(200), clustered(5, seed=1)
    index = make(metric="cosine")
    assert index.metric == "cosine"
    index.add(ids_for(200), vectors * np.linspace(0.1, 10, 200, dtype=np.float32)[:, None])
    scores, ids = index.search(queries * 3.0, 5)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    unit_queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    check_scores(as_stored(ids_for(200), unit), unit_queries, scores, ids, 5)
    if getattr(index, "exact", False):
        assert ids == [[f"doc{r}" for r in row] for row in exact_top(unit, unit_queries, 5)]


def test_k_larger_than_len_and_the_empty_index(make):
    index = make()
    scores, ids = index.search(clustered(2, seed=1), 5)
    assert scores.shape == (2, 0) and ids == [[], []]
    vectors = clustered(3)
    index.add(["a", "b", "c"], vectors)
    queries = clustered(2, seed=1)
    scores, ids = index.search(queries, 50)
    check_scores(as_stored(["a", "b", "c"], vectors), queries, scores, ids, 50)
    assert all(sorted(row) == ["a", "b", "c"] for row in ids)


def test_no_queries_give_an_empty_result(make):
    index = make()
    index.add(ids_for(5), clustered(5))
    scores, ids = index.search(np.empty((0, DIM), dtype=np.float32), 3)
    assert scores.shape == (0, 3) and ids == []


def test_bad_input_is_a_clear_error_and_changes_nothing(make):
    index = make()
    vectors = clustered(4)
    index.add(["a", "b"], vectors[:2])
    for bad_ids, bad_vectors, message in (
        (["c"], np.ones((1, DIM - 1)), f"dimension {DIM - 1}"),
        (["c", "d"], vectors[2:3], "2 ids for 1 vectors"),
        (["c", "a"], vectors[2:4], "'a' is added twice"),
        (["c", "c"], vectors[2:4], "'c' is added twice"),
        (["c"], np.full((1, DIM), np.nan), "NaN"),
        ("c", vectors[2:3], "not a single string"),
    ):
        with pytest.raises(ValueError, match=message):
            index.add(bad_ids, bad_vectors)
        assert len(index) == 2
    for queries, k, message in (
        (np.ones((1, DIM + 1)), 1, f"dimension {DIM + 1}"),
        (np.ones(DIM), 1, "2-d"),
        (np.ones((1, DIM)), 0, "a whole number of at least 1; got 0"),
        (np.ones((1, DIM)), 2.5, "a whole number of at least 1; got 2.5"),  # refused, not rounded down
    ):
        with pytest.raises(ValueError, match=message):
            index.search(queries, k)
    with pytest.raises(ValueError, match="metric"):
        make(metric="l2")
    assert index.search(vectors[:1], 5)[1][0] == ["a", "b"]


def test_save_then_load_searches_the_same(tmp_path, make, load, index_case):
    vectors, queries = clustered(400), clustered(20, seed=1)
    # far out along their own axes: each of these finds itself first, whatever the index
    vectors[: len(ODD_IDS)] = 100 * np.eye(len(ODD_IDS), DIM)
    index = make()
    index.add(ODD_IDS, vectors[: len(ODD_IDS)])
    index.add(ids_for(400 - len(ODD_IDS)), vectors[len(ODD_IDS) :])
    before = index.search(queries, 10)
    index.save(tmp_path / "idx", meta={"model": "tiny/model", "corpus": "contract"})
    after_save = index.search(queries, 10)  # saving leaves the index usable
    if getattr(index, "exact", False):
        assert after_save[1] == before[1]
    else:
        # an approximate engine may index the vectors only as it saves them (Milvus seals its
        # segments then): from here on the results must stay the same
        before = after_save

    meta = json.loads((tmp_path / "idx" / "structret.json").read_text(encoding="utf-8"))
    assert meta["index"] == index_case[0] and meta["dim"] == DIM and meta["count"] == 400
    assert meta["metric"] == "ip" and meta["model"] == "tiny/model" and meta["corpus"] == "contract"
    assert (tmp_path / "idx" / artifacts.CHECKSUMS_FILE).is_file()

    loaded = load(tmp_path / "idx")
    assert type(loaded) is type(index) and len(loaded) == 400 and loaded.dim == DIM
    after = loaded.search(queries, 10)
    assert after[1] == before[1]
    np.testing.assert_allclose(after[0], before[0], rtol=1e-6, atol=1e-6)
    odd = loaded.search(vectors[: len(ODD_IDS)], 1)[1]
    assert [row[0] for row in odd] == ODD_IDS  # each vector finds itself, under its own id

    # a loaded index keeps growing, and using it does not change what was saved
    loaded.add(["extra"], vectors[:1] * 2)
    assert loaded.search(vectors[:1], 1)[1] == [["extra"]] and len(loaded) == 401
    if "uri" not in index_case[1]:  # a server collection is shared, not a snapshot (see MilvusIndex)
        artifacts.verify_checksums(tmp_path / "idx")
        assert len(load(tmp_path / "idx")) == 400


def test_a_truncated_file_is_caught_on_load(tmp_path, make, index_case):
    index = make()
    index.add(ids_for(300), clustered(300))
    index.save(tmp_path / "idx")
    files = [p for p in (tmp_path / "idx").rglob("*")
             if p.is_file() and p.name not in (artifacts.CHECKSUMS_FILE, artifacts.META_FILE)]
    largest = max(files, key=lambda p: p.stat().st_size)
    data = largest.read_bytes()
    largest.write_bytes(data[: len(data) // 2])
    with pytest.raises(ArtifactError, match="truncated"):
        load_index(tmp_path / "idx")
    with pytest.raises(ArtifactError, match="truncated"):  # the class's own load checks too
        get_registry().get("index", index_case[0]).load().load(tmp_path / "idx")


def test_an_interrupted_save_keeps_the_previous_index(tmp_path, make, load, monkeypatch):
    vectors, queries = clustered(200), clustered(5, seed=1)
    old = make()
    old.add(ids_for(100), vectors[:100])
    old.save(tmp_path / "idx")
    expected = old.search(queries, 3)
    new = make()
    new.add(ids_for(100, 100), vectors[100:])

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # ctrl-c after the files are written, before the swap

    monkeypatch.setattr(artifacts, "write_checksums", crash)
    with pytest.raises(KeyboardInterrupt):
        new.save(tmp_path / "idx")
    monkeypatch.undo()

    survivor = load(tmp_path / "idx")
    assert len(survivor) == 100 and survivor.search(queries, 3)[1] == expected[1]
    assert [p.name for p in Path(tmp_path).iterdir()] == ["idx"]
    assert new.search(queries, 3)[1]  # the interrupted index is still usable


# --- remove (optional: contracts.OPTIONAL["index"]["remove"]), over every index that has it -----------


@pytest.fixture
def removable(make):
    """``make`` for an index that claims ``remove``; the test is skipped for one that does not."""
    def create(**options):
        index = make(**options)
        if not hasattr(index, "remove"):
            pytest.skip(f"{type(index).__name__} has no remove (optional)")
        return index

    return create


def check_found(index, stored: dict[str, np.ndarray], queries: np.ndarray, k: int = 10):
    """A search of ``index`` holding exactly ``stored``: shape, scores, no stranger, and the recall (exact: 1.0)."""
    scores, ids = index.search(queries, k)
    check_scores(stored, queries, scores, ids, k)
    assert all(set(row) <= stored.keys() for row in ids), "a search returned an id that is not in the index"
    names = list(stored)
    got = recall(ids, exact_top(np.stack([stored[i] for i in names]), queries, min(k, len(names))), names)
    assert got == 1.0 if getattr(index, "exact", False) else got >= APPROXIMATE_RECALL
    return ids


def test_removed_ids_are_gone_and_the_rest_is_searched_as_before(removable):
    vectors, queries = clustered(600, unit=True), clustered(30, seed=1, unit=True)
    names = ODD_IDS + ids_for(600 - len(ODD_IDS))
    index = removable()
    index.add(names, vectors)
    gone = names[::3]  # odd ids among them, and the first vector added
    index.remove(gone)
    assert len(index) == 600 - len(gone)
    kept = {i: v for i, v in zip(names, vectors) if i not in set(gone)}
    check_found(index, kept, queries)
    # each removed vector, searched for itself, is not found under its id any more
    own = index.search(vectors[::3], 1)[1]
    assert not {row[0] for row in own} & set(gone)
    index.remove([])  # a no-op
    assert len(index) == 600 - len(gone)


def test_removing_an_unknown_or_repeated_id_is_a_clear_error_and_changes_nothing(removable):
    vectors, queries = clustered(50, unit=True), clustered(5, seed=1, unit=True)
    index = removable()
    index.add(ids_for(50), vectors)
    before = index.search(queries, 5)
    for bad, message in ((["doc1", "nope"], "'nope'"), (["doc1", "doc1"], "'doc1' is listed twice"),
                         ("doc1", "not a single string")):
        with pytest.raises(ValueError, match=message):
            index.remove(bad)
        assert len(index) == 50
        assert index.search(queries, 5)[1] == before[1]
    index.remove(["doc1"])
    with pytest.raises(ValueError, match="'doc1'"):  # removed already
        index.remove(["doc1"])


def test_a_removed_id_can_be_added_again_with_a_new_vector(removable):
    vectors, queries = clustered(200, unit=True), clustered(10, seed=1, unit=True)
    index = removable()
    index.add(ids_for(200), vectors)
    index.remove(["doc7", "doc8"])
    fresh = queries[:1]  # the first query itself: it must be found first, under the old id
    index.add(["doc7"], fresh)
    assert len(index) == 199
    scores, ids = index.search(fresh, 1)
    assert ids == [["doc7"]] and scores[0, 0] == pytest.approx(1.0, abs=1e-4)
    stored = {i: v for i, v in zip(ids_for(200), vectors) if i not in ("doc7", "doc8")} | {"doc7": fresh[0]}
    check_found(index, stored, queries)
    with pytest.raises(ValueError, match="'doc7' is added twice"):
        index.add(["doc7"], fresh)


def test_removing_everything_leaves_an_empty_index_that_grows_again(removable):
    vectors = clustered(20, unit=True)
    index = removable()
    index.add(ids_for(20), vectors)
    index.remove(ids_for(20))
    assert len(index) == 0
    scores, ids = index.search(vectors[:2], 5)
    assert scores.shape == (2, 0) and ids == [[], []]
    index.add(["again"], vectors[:1])
    assert index.search(vectors[:1], 5)[1] == [["again"]]


def test_remove_then_save_and_load_and_remove_again(tmp_path, removable, load):
    vectors, queries = clustered(400, unit=True), clustered(20, seed=1, unit=True)
    names = ODD_IDS + ids_for(400 - len(ODD_IDS))
    stored = dict(zip(names, vectors))
    index = removable()
    index.add(names, vectors)
    for gone in (names[:5], names[100:150]):
        index.remove(gone)
        for i in gone:
            del stored[i]
    before = check_found(index, stored, queries)
    index.save(tmp_path / "idx")
    meta = json.loads((tmp_path / "idx" / "structret.json").read_text(encoding="utf-8"))
    assert meta["count"] == len(stored)

    loaded = load(tmp_path / "idx")
    assert len(loaded) == len(stored)
    assert check_found(loaded, stored, queries) == before
    # the loaded index removes and re-adds as the saved one did: a removed id, and one removed before saving
    loaded.remove([names[5], names[200]])
    loaded.add([names[0], names[5]], vectors[[0, 5]] * 1.0)
    del stored[names[200]]
    stored[names[0]] = vectors[0]
    check_found(loaded, stored, queries)
    with pytest.raises(ValueError, match="does not hold"):
        loaded.remove([names[100]])
    artifacts.verify_checksums(tmp_path / "idx")  # using the loaded index changed nothing on disk
    assert len(load(tmp_path / "idx")) == 400 - 55
