"""usearch's own options: bf16 and i8 storage, and what its load checks (the index contract covers the rest)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from structret.artifacts import write_checksums
from structret.errors import ArtifactError
from structret.search.saved import load_index

pytest.importorskip("usearch", reason="usearch is not installed: pip install 'structret[usearch]'")
from structret_indexes.usearch_index import USearchIndex  # noqa: E402


def unit_clustered(n: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(20, dim))
    points = centers[rng.integers(20, size=n)] + 0.5 * rng.normal(size=(n, dim))
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


def ids_for(n: int) -> list[str]:
    return [f"doc{i}" for i in range(n)]


@pytest.mark.parametrize("dtype, tolerance", [("bf16", 0.02), ("i8", 0.03)])
@pytest.mark.parametrize("metric", ["ip", "cosine"])
def test_compact_vectors_keep_recall_and_near_exact_scores(tmp_path, dtype, tolerance, metric):
    vectors, queries = unit_clustered(2000), unit_clustered(50, seed=1)
    index = USearchIndex(32, metric=metric, dtype=dtype)
    index.add(ids_for(2000), vectors)
    scores, ids = index.search(queries, 10)
    exact = np.argsort(-(queries @ vectors.T), axis=1)[:, :10]
    recall = np.mean([len({f"doc{r}" for r in want} & set(got)) / 10 for want, got in zip(exact, ids)])
    assert recall >= 0.9
    by_id = dict(zip(ids_for(2000), vectors))
    true = np.array([[by_id[i] @ q for i in row] for q, row in zip(queries, ids)])
    assert np.abs(scores - true).max() <= tolerance  # the inner products of the rounded vectors

    index.save(tmp_path / "idx")
    assert json.loads((tmp_path / "idx" / "structret.json").read_text())["options"]["dtype"] == dtype
    loaded = load_index(tmp_path / "idx")
    assert loaded.dtype == dtype and loaded.search(queries, 10)[1] == ids


def test_i8_with_ip_takes_only_unit_vectors_and_says_what_to_do():
    index = USearchIndex(32, metric="ip", dtype="i8")
    vectors = unit_clustered(10)
    with pytest.raises(ValueError, match=r"row 3 has length 2.*metric=cosine"):
        index.add(ids_for(10), np.vstack([vectors[:3], 2 * vectors[3:]]))
    assert len(index) == 0
    index.add(ids_for(10), vectors)
    cosine = USearchIndex(32, metric="cosine", dtype="i8")
    cosine.add(ids_for(10), 5 * vectors)  # any length: cosine normalizes
    assert cosine.search(vectors[:1], 1)[1] == [["doc0"]]


def test_bad_options_are_clear_errors():
    for options, message in (({"dtype": "f16"}, "dtype 'f16'"), ({"connectivity": 0}, "connectivity"),
                             ({"threads": -1}, "threads")):
        with pytest.raises(ValueError, match=message):
            USearchIndex(8, **options)


def test_a_graph_that_disagrees_with_its_metadata_is_refused(tmp_path):
    index = USearchIndex(16)
    index.add(ids_for(50), unit_clustered(50, 16))
    index.save(tmp_path / "idx")
    meta_file = tmp_path / "idx" / "structret.json"
    meta = json.loads(meta_file.read_text())
    meta_file.write_text(json.dumps({**meta, "count": 49, "graphs": [["index.usearch", 49]]}))
    write_checksums(tmp_path / "idx")  # edited, and the manifest made to match: the load's own checks catch it
    with pytest.raises(ArtifactError, match="holds 50 vectors of dimension 16, but structret.json says 49"):
        USearchIndex.load(tmp_path / "idx")
    (tmp_path / "idx" / "keys.npy").unlink()
    meta_file.write_text(json.dumps(meta))
    write_checksums(tmp_path / "idx")
    with pytest.raises(ArtifactError, match="keys.npy is missing"):
        USearchIndex.load(tmp_path / "idx")
