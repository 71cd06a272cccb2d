"""Flat and HNSW indexes: exactness, recall, saving, loading and damaged artifacts."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from structret.errors import ArtifactError
from structret.search.saved import load_index
from structret.contracts import Index
from structret_indexes.flat import FlatIndex
from structret_indexes.hnsw import HNSWIndex


def clustered(n: int, dim: int, *, clusters: int = 50, seed: int = 0) -> np.ndarray:
    """Points around random centers: neighbours are meaningful, unlike uniform noise."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(clusters, dim))
    points = centers[rng.integers(clusters, size=n)] + 0.5 * rng.normal(size=(n, dim))
    return points.astype(np.float32)


def brute_force(stored: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    scores = queries.astype(np.float64) @ stored.astype(np.float64).T
    rows = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(scores, rows, axis=1), rows


def ids_for(n: int, start: int = 0) -> list[str]:
    return [f"doc{i}" for i in range(start, start + n)]


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    vectors = clustered(5000, 64)
    queries = clustered(200, 64, seed=1)
    return vectors, queries


@pytest.mark.parametrize("scoring", ["fp32", "bf16"])
@pytest.mark.parametrize("k", [1, 10, 250, 10_000])
def test_flat_is_exact_across_chunks_and_adds(k, scoring):
    # small integers: every score is exact in float32, so the reference is exact too, and
    # the many ties check that they go to the earlier vector whatever the chunking
    rng = np.random.default_rng(2)
    vectors = rng.integers(-3, 4, size=(1000, 16)).astype(np.float32)
    vectors[500:520] = vectors[10]  # exact duplicates in other chunks
    queries = rng.integers(-3, 4, size=(30, 16)).astype(np.float32)
    index = FlatIndex(16, chunk_size=97, scoring=scoring)  # many chunks, the last one partial
    for start in (0, 300, 301, 800):  # uneven adds, one of a single vector
        stop = {0: 300, 300: 301, 301: 800, 800: 1000}[start]
        index.add(ids_for(stop - start, start), vectors[start:stop])
    scores, ids = index.search(queries, k)
    want_scores, want_rows = brute_force(vectors, queries, k)
    assert scores.shape == (30, min(k, 1000)) and scores.dtype == np.float32
    assert ids == [[f"doc{r}" for r in row] for row in want_rows]
    np.testing.assert_array_equal(scores, want_scores)
    assert isinstance(index, Index) and len(index) == 1000


@pytest.mark.parametrize("scoring", ["fp32", "bf16"])
def test_wide_chunks_take_the_grouped_top_k_and_stay_exact_with_ties(scoring):
    import structret_indexes.flat as flat
    import torch

    rng = np.random.default_rng(3)
    vectors = rng.integers(-2, 3, size=(9000, 8)).astype(np.float32)  # few distinct scores: ties everywhere
    queries = rng.integers(-2, 3, size=(40, 8)).astype(np.float32)
    index = FlatIndex(8, chunk_size=4096, scoring=scoring)  # 4096-wide chunks: grouped; the last 808: plain
    index.add(ids_for(9000), vectors)
    for k in (1, 10, 30):
        scores, ids = index.search(queries, k)
        want_scores, want_rows = brute_force(vectors, queries, k)
        assert ids == [[f"doc{r}" for r in row] for row in want_rows]
        np.testing.assert_array_equal(scores, want_scores)
    wide = torch.from_numpy(rng.normal(size=(50, 4096)).astype(np.float32))
    wide[:, 100:140] = wide[:, 100:101] + 5  # the best of each row in one group and its neighbour
    for n in (1, 11, 16):
        values, picked = flat._topk(wide, n)
        assert torch.equal(values, torch.topk(wide, n, dim=1).values)
        assert torch.equal(torch.gather(wide, 1, picked), values)


def test_bf16_scoring_finds_what_fp32_finds_and_certifies_most_queries(monkeypatch):
    import structret_indexes.flat as flat

    vectors, queries = clustered(6000, 64, seed=7), clustered(300, 64, seed=8)
    vectors[4000:4010] = vectors[17]  # duplicates: ties go to the earlier vector either way
    exact = FlatIndex(64, chunk_size=1000, scoring="fp32")
    low = FlatIndex(64, chunk_size=1000, scoring="bf16")
    for index in (exact, low):
        index.add(ids_for(6000), vectors)
    again = []
    search = FlatIndex._search
    monkeypatch.setattr(FlatIndex, "_search", lambda self, q, *a: again.append(len(q)) or search(self, q, *a))
    for k in (1, 10, 100):
        want, got = exact.search(queries, k), low.search(queries, k)
        assert got[1] == want[1]
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
        ref_scores, ref_rows = brute_force(vectors, queries, k)
        np.testing.assert_allclose(got[0], ref_scores, rtol=1e-5)
    fallbacks = again[3:]  # the first three are the fp32 index's own searches
    assert sum(fallbacks) < 0.1 * 3 * len(queries)  # the bound certifies most queries outright
    # the bound holds: bf16's scores never move further than bf16_error says
    q, v = queries.astype(np.float32), vectors.astype(np.float32)
    import torch

    approx = (torch.from_numpy(q).bfloat16() @ torch.from_numpy(v).bfloat16().T).float().numpy()
    true = q.astype(np.float64) @ v.astype(np.float64).T
    norms = np.linalg.norm(q, axis=1, keepdims=True)
    bound = flat.bf16_error(norms, float(np.linalg.norm(v, axis=1).max()), np.abs(approx).max(axis=1, keepdims=True))
    assert (np.abs(approx - true) <= bound).all()


def test_without_torch_loaded_the_search_is_numpy_s_and_ranks_alike(monkeypatch):
    import structret_indexes.flat as flat

    vectors, queries = clustered(3000, 32, seed=11), clustered(40, 32, seed=12)
    vectors[2000:2005] = vectors[3]  # ties
    index = FlatIndex(32, chunk_size=700)
    index.add(ids_for(3000), vectors)
    with_torch = index.search(queries, 20)
    monkeypatch.delitem(sys.modules, "torch")
    monkeypatch.setattr(flat, "bf16_scoring_pays", lambda: pytest.fail("no bf16 without torch"))
    without = index.search(queries, 20)
    assert without[1] == with_torch[1]
    np.testing.assert_allclose(without[0], with_torch[0], rtol=1e-6)


def test_bf16_scoring_is_auto_where_bf16_matmuls_are_twice_as_fast(monkeypatch):
    import torch  # noqa: F401  a search this small takes the torch path only once torch is imported
    import structret_indexes.flat as flat

    vectors = clustered(200, 8, seed=9)
    for pays, expected in ((True, "bf16"), (False, "fp32")):
        monkeypatch.setattr(flat, "bf16_scoring_pays", lambda: pays)
        index = FlatIndex(8)
        index.add(ids_for(200), vectors)
        index.search(vectors[:3], 5)
        assert index._scores_in_bf16 is (expected == "bf16") and index.scoring == "auto"
    with pytest.raises(Exception, match="scoring='fp16' is not one of auto, fp32, bf16"):
        FlatIndex(8, scoring="fp16")


def test_flat_cosine_normalizes_both_sides():
    vectors, queries = clustered(300, 8, seed=4), clustered(5, 8, seed=5)
    index = FlatIndex(8, metric="cosine", chunk_size=64)
    index.add(ids_for(300), vectors * 7.0)  # scale must not matter
    scores, ids = index.search(queries * 0.1, 5)
    unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    want_scores, want_rows = brute_force(unit(vectors), unit(queries), 5)
    assert ids == [[f"doc{r}" for r in row] for row in want_rows]
    np.testing.assert_allclose(scores, want_scores, atol=1e-5)


def test_many_queries_are_blocked_without_changing_results(monkeypatch):
    import structret_indexes.flat as flat

    # integer scores: exact whatever way BLAS splits the product
    rng = np.random.default_rng(6)
    vectors, queries = (rng.integers(-3, 4, size=(n, 8)).astype(np.float32) for n in (500, 300))
    index = FlatIndex(8, chunk_size=100)
    index.add(ids_for(500), vectors)
    whole = index.search(queries, 10)
    monkeypatch.setattr(flat, "_SCORE_BUDGET", 100 * 7)  # 7 queries per block
    blocked = index.search(queries, 10)
    np.testing.assert_array_equal(whole[0], blocked[0])
    assert whole[1] == blocked[1]


@pytest.mark.parametrize("cls", [FlatIndex, HNSWIndex])
def test_bad_input_is_rejected(cls):
    index = cls(4)
    with pytest.raises(ValueError, match="dimension 3"):
        index.add(["a"], np.zeros((1, 3)))
    with pytest.raises(ValueError, match="NaN"):
        index.add(["a", "b"], np.array([[0, 0, 0, 1], [np.nan, 0, 0, 0]]))
    with pytest.raises(ValueError, match="2 ids for 1 vectors"):
        index.add(["a", "b"], np.ones((1, 4)))
    index.add(["a"], np.ones((1, 4)))
    with pytest.raises(ValueError, match="'a' is added twice"):
        index.add(["a"], np.ones((1, 4)))
    with pytest.raises(ValueError, match="queries have dimension 5"):
        index.search(np.ones((1, 5)), 1)
    with pytest.raises(ValueError, match="metric"):
        cls(4, metric="l2")
    assert len(index) == 1


@pytest.mark.parametrize("cls", [FlatIndex, HNSWIndex])
def test_empty_index_and_k_larger_than_len(cls):
    index = cls(4)
    scores, ids = index.search(np.ones((2, 4)), 5)
    assert scores.shape == (2, 0) and ids == [[], []]
    index.add(["a", "b"], np.array([[1, 0, 0, 0], [0.5, 0, 0, 0]]))
    scores, ids = index.search(np.array([[1.0, 0, 0, 0]]), 5)
    assert ids == [["a", "b"]]
    np.testing.assert_allclose(scores, [[1.0, 0.5]], atol=1e-6)


@pytest.mark.parametrize("metric", ["ip", "cosine"])
def test_hnsw_recall_against_flat(data, metric):
    vectors, queries = data
    if metric == "ip":
        # as normalizing encoders (MiniLM) produce; raw inner product over vectors of
        # varying length is maximum-inner-product search, where HNSW needs a larger ef
        vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    flat, hnsw = FlatIndex(64, metric=metric), HNSWIndex(64, metric=metric, max_elements=1000)  # must grow
    for index in (flat, hnsw):
        index.add(ids_for(3000), vectors[:3000])
        index.add(ids_for(2000, 3000), vectors[3000:])
    exact_scores, exact = flat.search(queries, 10)
    approx_scores, approx = hnsw.search(queries, 10)
    recall = np.mean([len(set(a) & set(e)) / 10 for a, e in zip(approx, exact)])
    assert recall >= 0.95
    # same scale of scores: where both found the same neighbour, the scores agree
    assert np.abs(approx_scores[:, 0] - exact_scores[:, 0])[[a[0] == e[0] for a, e in zip(approx, exact)]].max() < 1e-3


def test_hnsw_ef_is_raised_to_k(data):
    vectors, queries = data
    index = HNSWIndex(64, ef=5)
    index.add(ids_for(500), vectors[:500])
    scores, ids = index.search(queries[:3], 50)
    assert scores.shape == (3, 50) and all(len(set(row)) == 50 for row in ids)
    assert (np.diff(scores, axis=1) <= 1e-6).all()  # best first


@pytest.mark.parametrize("cls,name", [(FlatIndex, "flat"), (HNSWIndex, "hnsw")])
def test_save_load_round_trip(tmp_path, data, cls, name):
    vectors, queries = data
    index = cls(64, metric="cosine")
    index.add(ids_for(1000), vectors[:1000])
    before = index.search(queries, 10)
    index.save(tmp_path / "idx", meta={"model": "tiny/model", "corpus": "unit-test"})

    meta = json.loads((tmp_path / "idx" / "structret.json").read_text())
    assert meta["index"] == name and meta["dim"] == 64 and meta["count"] == 1000
    assert meta["metric"] == "cosine" and meta["model"] == "tiny/model" and meta["corpus"] == "unit-test"

    loaded = cls.load(tmp_path / "idx")
    after = loaded.search(queries, 10)
    np.testing.assert_array_equal(before[0], after[0])
    assert before[1] == after[1]
    assert len(loaded) == 1000 and loaded.metric == "cosine"

    loaded.add(["extra"], vectors[1000:1001])  # a loaded index keeps growing
    assert loaded.search(vectors[1000:1001], 1)[1] == [["extra"]]

    generic = load_index(tmp_path / "idx", expect_model="tiny/model")
    assert type(generic) is cls
    with pytest.raises(ArtifactError, match="other/model"):
        load_index(tmp_path / "idx", expect_model="other/model")


@pytest.mark.parametrize("cls", [FlatIndex, HNSWIndex])
@pytest.mark.parametrize("field,value", [("count", 999), ("dim", 32), ("index", "other")])
def test_edited_metadata_is_caught(tmp_path, data, cls, field, value):
    index = cls(64)
    index.add(ids_for(1000), data[0][:1000])
    index.save(tmp_path / "idx")
    meta_file = tmp_path / "idx" / "structret.json"
    meta = json.loads(meta_file.read_text())
    meta[field] = value
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(ArtifactError, match="structret.json has"):  # checksums.json covers structret.json
        cls.load(tmp_path / "idx")
    # the fields are checked too: for indexes whose checksums do not cover structret.json (older structret)
    from structret.artifacts import write_checksums

    write_checksums(tmp_path / "idx")
    with pytest.raises(ArtifactError, match=str(value)):
        cls.load(tmp_path / "idx")


def test_missing_files_are_caught(tmp_path, data):
    for cls, file in ((FlatIndex, "vectors.npy"), (HNSWIndex, "index.bin"), (FlatIndex, "ids.json")):
        index = cls(64)
        index.add(ids_for(10), data[0][:10])
        index.save(tmp_path / "idx")
        (tmp_path / "idx" / file).unlink()
        with pytest.raises(ArtifactError, match=f"{file} is missing"):
            cls.load(tmp_path / "idx")
    with pytest.raises(ArtifactError, match="not a structret artifact"):
        load_index(tmp_path / "nothing-here")


@pytest.mark.parametrize("cls", [FlatIndex, HNSWIndex])
def test_interrupted_save_keeps_previous_index(tmp_path, data, cls, monkeypatch):
    vectors, queries = data
    old = cls(64)
    old.add(ids_for(100), vectors[:100])
    old.save(tmp_path / "idx")
    expected = old.search(queries[:5], 3)

    new = cls(64)
    new.add(ids_for(200, 100), vectors[100:300])

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # the user presses ctrl-c half way through the save

    monkeypatch.setattr(sys.modules[cls.__module__], "write_ids", crash)
    with pytest.raises(KeyboardInterrupt):
        new.save(tmp_path / "idx")
    monkeypatch.undo()

    survivor = load_index(tmp_path / "idx")
    assert len(survivor) == 100
    got = survivor.search(queries[:5], 3)
    np.testing.assert_array_equal(got[0], expected[0])
    assert got[1] == expected[1]
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]  # no half-written directory left behind


def test_a_truncated_or_damaged_artifact_is_caught_by_its_checksums(tmp_path):
    import numpy as np

    from structret.artifacts import CHECKSUMS_FILE, verify_checksums
    from structret.errors import ArtifactError
    from structret.search.saved import load_index
    from structret.registry import get_registry

    index = get_registry().create("index", "flat", 8)
    index.add([f"d{i}" for i in range(20)], np.random.default_rng(0).standard_normal((20, 8)).astype("float32"))
    index.save(str(tmp_path / "idx"))
    assert (tmp_path / "idx" / CHECKSUMS_FILE).is_file()
    load_index(str(tmp_path / "idx"))  # intact: loads
    vectors = next(p for p in (tmp_path / "idx").iterdir() if p.suffix == ".npy")
    data = vectors.read_bytes()
    vectors.write_bytes(data[: len(data) // 2])
    with pytest.raises(ArtifactError, match=r"has \d+ bytes but was saved with \d+: it is truncated"):
        load_index(str(tmp_path / "idx"))
    vectors.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # same size, one bit flipped
    with pytest.raises(ArtifactError, match="does not match the checksum"):
        verify_checksums(tmp_path / "idx")


def test_a_loaded_flat_index_checks_its_ids_for_repeats_when_it_first_needs_them_as_a_set(tmp_path):
    from structret.artifacts import write_checksums

    index = FlatIndex(4)
    index.add(["a", "b", "c"], np.eye(3, 4, dtype=np.float32))
    index.save(tmp_path / "idx")
    (tmp_path / "idx" / "ids.json").write_text(json.dumps(["a", "b", "a"]))
    write_checksums(tmp_path / "idx")  # as if written so: the checksums cannot tell
    loaded = load_index(tmp_path / "idx")  # no set made: a search of 1M ids needs none
    assert loaded.search(np.eye(1, 4, k=1, dtype=np.float32), 1)[1] == [["b"]]
    with pytest.raises(ArtifactError, match=r"idx/ids.json repeats ids; the index is damaged"):
        loaded.add(["d"], np.ones((1, 4), dtype=np.float32))


def test_auto_picks_flat_below_the_measured_size_and_the_measured_graph_from_there(tmp_path, data, monkeypatch):
    from structret import defaults
    from structret.api import build_index, check_names
    from structret.errors import StructretError
    from structret.search.index import load_index as load_search_index

    vectors, queries = data
    ids = ids_for(len(vectors))
    small = build_index(None, vectors=vectors, ids=ids)  # the default is auto
    assert isinstance(small.index, FlatIndex) and small.meta["index"] == "flat"
    monkeypatch.setattr(defaults, "ANN_FROM", len(vectors))  # as if 5,000 were many
    large = build_index(None, vectors=vectors, ids=ids, kind="auto")
    assert isinstance(large.index, HNSWIndex) and (large.index.M, large.index.ef) == (16, 300)
    large.save(tmp_path / "idx")  # recorded as the index it is, so it loads as one
    loaded = load_search_index(tmp_path / "idx")
    assert loaded.meta["index"] == "hnsw" and isinstance(loaded.index, HNSWIndex)
    _, rows = brute_force(vectors, queries, 10)
    found = loaded.index.search(queries, 10)[1]
    recall = np.mean([len(set(f) & {ids[r] for r in row}) / 10 for f, row in zip(found, rows)])
    assert recall >= 0.98
    # auto picks the options too: one given to it is refused before any data is read
    with pytest.raises(StructretError, match=r"go with a named index, e.g. --index hnsw"):
        check_names(index="auto", index_options={"ef": 50})
    check_names(index="auto")
