"""Hybrid retrieval: fusion by hand on a tiny corpus, both fusion paths agreeing, tuning on
validation data, and bm25+DENSE wherever a system is named."""

import json
import math
import re
from types import SimpleNamespace

import numpy as np
import pytest

from _tiny_models import tiny_bert_dir  # noqa: F401  (fixture)
from structret.search.fusion import Fusion, FusionError, fuse_lists, fuse_scores, parse, tune

# one query, four documents
LEXICAL = np.array([[3.0, 0.0, 1.0, 0.0]])
DENSE = np.array([[0.2, 0.9, 0.5, 0.1]])


def test_zscore_fusion_matches_a_hand_computation():
    # dense: mean 0.425, population std 0.31125; lexical: mean 1.0, std 1.22474
    dense_z = [(0.2 - 0.425) / 0.311247, (0.9 - 0.425) / 0.311247, (0.5 - 0.425) / 0.311247, (0.1 - 0.425) / 0.311247]
    lexical_z = [2 / 1.224745, -1 / 1.224745, 0.0, -1 / 1.224745]
    expected = [0.7 * d + 0.3 * lx for d, lx in zip(dense_z, lexical_z)]
    fused = fuse_scores(LEXICAL, DENSE, Fusion("zscore", 0.3))[0]
    assert fused == pytest.approx(expected, abs=1e-5)
    assert fused == pytest.approx([-0.01613, 0.82333, 0.16868, -0.97588], abs=1e-4)


def test_minmax_fusion_matches_a_hand_computation():
    # dense onto [0, 1]: 0.125, 1, 0.5, 0; lexical: 1, 0, 1/3, 0
    fused = fuse_scores(LEXICAL, DENSE, Fusion("minmax", 0.3))[0]
    assert fused == pytest.approx([0.3875, 0.7, 0.45, 0.0])


def test_rrf_matches_a_hand_computation_with_shared_ranks():
    # dense ranks 3, 1, 2, 4; lexical 1, 3, 2, 3 (the two zeros share rank 3)
    fused = fuse_scores(LEXICAL, DENSE, Fusion("rrf", 0.3))[0]
    expected = [0.7 / 63 + 0.3 / 61, 0.7 / 61 + 0.3 / 63, 0.7 / 62 + 0.3 / 62, 0.7 / 64 + 0.3 / 63]
    assert fused == pytest.approx(expected)
    assert list(np.argsort(-fused)) == [1, 2, 0, 3]


def test_depth_cuts_each_side_and_fills_what_one_side_missed():
    # top 2 of each: dense {1: 1, 2: 0}, lexical {0: 1, 2: 0} after min-max; a side's missing
    # document takes that side's lowest value (0); document 3 is on neither list
    fused = fuse_scores(LEXICAL, DENSE, Fusion("minmax", 0.3, depth=2))[0]
    assert fused[:3] == pytest.approx([0.3, 0.7, 0.0])
    assert fused[3] == -math.inf


def test_weights_zero_and_one_are_each_side_alone():
    dense_only = fuse_scores(LEXICAL, DENSE, Fusion("zscore", 0.0))[0]
    assert list(np.argsort(-dense_only)) == list(np.argsort(-DENSE[0]))
    lexical_only = fuse_scores(LEXICAL, DENSE, Fusion("zscore", 1.0))[0]
    assert lexical_only.argmax() == 0


@pytest.mark.parametrize("method", ["zscore", "minmax", "rrf"])
def test_index_path_fuses_candidate_lists_as_the_bench_fuses_rows(method):
    rng = np.random.default_rng(0)
    lexical = np.round(rng.gamma(1.0, 2.0, size=(5, 60)), 1)  # ties included
    dense = rng.normal(size=(5, 60))
    fusion = Fusion(method, 0.3, depth=12)
    rows = fuse_scores(lexical, dense, fusion)
    for q in range(5):
        lists = []
        for side in (lexical[q], dense[q]):
            top = np.lexsort((np.arange(60), -side))[:12]
            lists.append((list(top), side[top]))
        hits = fuse_lists(lists[0], lists[1], fusion, k=10)
        assert [h.score for h in hits] == pytest.approx(sorted(rows[q][np.isfinite(rows[q])], reverse=True)[:10])
        for h in hits:
            assert rows[q][h.doc] == pytest.approx(h.score)
            assert set(h.sources) <= {"dense", "lexical"} and h.sources


def test_fuse_lists_says_which_side_found_each_hit():
    hits = fuse_lists((["a", "b"], [2.0, 1.0]), (["b", "c"], [0.9, 0.1]), Fusion("minmax", 0.5), k=3)
    found = {h.doc: h.sources for h in hits}
    assert found == {"a": ("lexical",), "b": ("dense", "lexical"), "c": ("dense",)}
    assert hits[0].doc == "b"  # 0.5 * 1 + 0.5 * 0 vs a's 0.5 * 0 (dense missing) + 0.5 * 1: tie, dense order


@pytest.mark.parametrize("spec, expected", [
    ("zscore:0.2", Fusion("zscore", 0.2)),
    ("rrf", Fusion("rrf", 0.5)),
    ("minmax:0.3,depth=200", Fusion("minmax", 0.3, depth=200)),
    ("rrf:0.4,k=10", Fusion("rrf", 0.4, k=10)),
    (None, Fusion()),
])
def test_fusion_specs_round_trip(spec, expected):
    fusion = parse(spec)
    assert fusion == expected
    assert parse(fusion.spec) == fusion


@pytest.mark.parametrize("spec, words", [
    ("cosine:0.2", "unknown fusion method"),
    ("zscore:1.5", "[0, 1]"),
    ("zscore:high", "METHOD:WEIGHT"),
    ("zscore:0.2,size=3", "depth=N or k=N"),
    ("zscore:0.2,depth=0", "positive"),
])
def test_bad_fusion_specs_say_how_to_write_one(spec, words):
    with pytest.raises(FusionError, match=None) as err:
        parse(spec)
    assert words in str(err.value)


def test_tune_keeps_the_best_and_every_score():
    best, scores = tune(lambda f: -abs(f.weight - 0.25) - (f.method != "minmax"))
    assert best == Fusion("minmax", 0.25)
    assert len(scores) == 24 and scores["minmax:0.25"] == 0


def test_tune_breaks_ties_of_a_saturated_measure_with_the_next():
    # a recall at 100 for every candidate: the second measure decides, the first is what is reported
    best, scores = tune(lambda f: (1.0, -abs(f.weight - 0.4) - (f.method != "zscore")))
    assert best == Fusion("zscore", 0.4) and set(scores.values()) == {1.0}
    best, _ = tune(lambda f: (math.nan if f.method == "zscore" else f.weight))
    assert best == Fusion("minmax", 0.5)  # NaN ranks last


# --- as a system ----------------------------------------------------------------------------


def _code_rows(path, n=40, seed=0):
    """CodeSearchNet rows: a docstring that shares one word with its function's name."""
    import gzip

    words = ["alpha", "bravo", "delta", "gamma", "kilo", "lima", "oscar", "papa", "romeo", "sierra"]
    rng = np.random.default_rng(seed)
    with gzip.open(path, "wt") as f:
        for i in range(n):
            a, b = rng.choice(words, 2, replace=False)
            code = f"def {a}_{b}_{i}(value):\n    return value + {i}"
            row = {"repo": "r", "path": f"m{i}.py", "func_name": f"{a}_{b}_{i}", "original_string": code,
                   "language": "python", "code": code, "code_tokens": code.split(),
                   "docstring": f"{a} then {b} number {i}", "docstring_tokens": [a, "then", b, "number", str(i)],
                   "url": f"u{i}", "partition": ("train", "valid", "test")[i % 3]}
            f.write(json.dumps(row) + "\n")
    return path


def test_hybrid_names_resolve_and_bad_ones_explain(fresh_registry):
    from structret.errors import PluginError
    from structret.search.system import resolve_system

    from structret.search.fusion import Fusion

    hybrid = resolve_system("bm25+minilm")
    assert (hybrid.kind, hybrid.lexical, hybrid.dense.kind, hybrid.dense.name) == ("hybrid", "bm25", "backbone", "minilm")
    assert hybrid.fusion == Fusion() and resolve_system("bm25+minilm", "rrf:0.5").fusion == Fusion("rrf", 0.5)
    assert hybrid.with_fusion("minmax:0.2").fusion == Fusion("minmax", 0.2) and hybrid.fusion == Fusion()
    assert resolve_system("bm25").kind == "retriever" and resolve_system("minilm").fusion is None
    with pytest.raises(PluginError, match="for a hybrid system"):
        resolve_system("minilm", "zscore:0.3")
    with pytest.raises(PluginError, match="not a dense system"):
        resolve_system("bm25+bm25")
    with pytest.raises(PluginError, match="LEXICAL\\+DENSE"):
        resolve_system("bm26+minilm")


def test_bench_prints_and_writes_a_fused_row_tuned_on_valid(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from structret.cli import cli

    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path / "cache"))
    data = _code_rows(tmp_path / "rows.jsonl.gz", n=60)
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(cli, ["bench", "--data", f"codesearchnet:{data}", "--system", "minilm",
                                      "--system", "bm25+minilm", "--tune", "valid", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "| minilm |" in result.output and "| bm25+minilm |" in result.output
    rows = json.loads(out.read_text())["rows"]
    assert set(rows) == {"minilm", "bm25+minilm"}
    tuning = rows["bm25+minilm"]["fusion_tuning"]
    assert len(tuning["scores"]) == 24 and tuning["fusion"] == rows["bm25+minilm"]["fusion"]
    assert tuning["scores"][tuning["fusion"]] == max(tuning["scores"].values())
    assert tuning["split"].endswith("[valid]")  # the validation split of the same data


def test_bench_refuses_tuning_on_the_scored_split(tmp_path):
    from click.testing import CliRunner

    from structret.cli import cli

    data = _code_rows(tmp_path / "rows.jsonl.gz")
    result = CliRunner().invoke(cli, ["bench", "--data", f"codesearchnet:{data}", "--system", "bm25+minilm",
                                      "--tune", "test"])
    assert result.exit_code == 2 and "would choose the fusion on the split that is scored" in result.output
    result = CliRunner().invoke(cli, ["bench", "--data", f"codesearchnet:{data}", "--system", "bm25+minilm",
                                      "--fusion", "cosine:0.2"])
    assert result.exit_code == 2 and "unknown fusion method" in result.output


def test_a_trained_run_fuses_by_its_recipe_in_bench_and_suites_unless_told(tmp_path, tiny_bert_dir, monkeypatch):
    import structret
    from structret.bench import run_bench
    from structret.search.system import make_retriever
    from structret.suites.runner import Runner

    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path / "cache"))
    data = _code_rows(tmp_path / "rows.jsonl.gz", n=12)
    run = structret.train(data=f"codesearchnet:{data}", out=str(tmp_path / "run"), backbone="hf-encoder",
                          model=str(tiny_bert_dir), max_steps=1, batch_size=4, checkpoint_every=0,
                          settings={"passage_max_len": 32, "fusion": "minmax:0.15"})
    system = f"bm25+{run.path}"
    assert make_retriever(system, show_progress=False).fusion == Fusion("minmax", 0.15)  # as 'structret index'
    assert make_retriever(system, fusion="rrf:0.4", show_progress=False).fusion == Fusion("rrf", 0.4)
    assert make_retriever("bm25+hf-encoder", model=str(tiny_bert_dir), show_progress=False).fusion == parse(None)
    rows = run_bench(structret.load_dataset(f"codesearchnet:{data}", split="test"), [system], show_progress=False).rows
    assert rows[system]["fusion"] == "minmax:0.15"
    # a suite row's cache key names the fusion it is scored with, so a recipe's fusion is not read from another's
    assert Runner(show_progress=False).system_identity(system, {"fusion": None})["fusion"] == "minmax:0.15"


# --- in an index --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hybrid_index(tmp_path_factory):
    """A flat index of 60 functions with a BM25 side, saved; and the bench's retriever on the same texts."""
    import structret

    tmp = tmp_path_factory.mktemp("hybrid")
    data = _code_rows(tmp / "rows.jsonl.gz", n=60)
    model = structret.load_model("minilm")
    built = structret.build_index(model, f"codesearchnet:{data}", lexical="bm25", fusion="zscore:0.3",
                                  show_progress=False)
    built.save(tmp / "idx")
    return SimpleNamespace(tmp=tmp, data=data, model=model, built=built, path=tmp / "idx")


def test_bench_rows_and_index_lists_fuse_through_one_path(hybrid_index, monkeypatch):
    """A system scoring a dataset (full rows: bench, tuning, suites) and a saved index searched (top lists:
    search, serve, mcp, the whole-project benchmark) fuse in the one kernel, with the same result."""
    from structret.search import fusion as fusion_module
    from structret.search.system import resolve_system

    import structret

    calls = []
    kernel = fusion_module._fuse

    def spy(dense, lexical, fusion, width):
        calls.append(fusion)
        return kernel(dense, lexical, fusion, width)

    monkeypatch.setattr(fusion_module, "_fuse", spy)
    loaded = structret.load_index(hybrid_index.path)
    assert loaded.fusion == Fusion("zscore", 0.3) and loaded.meta["lexical"]["retriever"] == "bm25"
    texts = list(loaded.texts.values())
    ids = list(loaded.texts)
    system = resolve_system("bm25+minilm", "zscore:0.3")
    retriever = system.retriever(show_progress=False)
    retriever.fit(texts)
    queries = ["alpha then bravo number 3", "kilo lima", "return the value plus forty"]
    rows = retriever.score(queries)
    assert calls == [system.fusion]
    searched = loaded.search(queries, k=5)
    assert calls == [system.fusion] * (1 + len(queries))  # one call per query's lists
    for row, hits in zip(rows, searched):
        assert [h.id for h in hits] == [ids[j] for j in np.lexsort((np.arange(len(row)), -row))[:5]]
        assert [h.score for h in hits] == pytest.approx(sorted(row, reverse=True)[:5], abs=1e-4)
        assert all(h.sources for h in hits)


def test_a_hybrid_index_finds_what_dense_alone_misses(hybrid_index):
    import structret

    dense_only = structret.build_index(hybrid_index.model, f"codesearchnet:{hybrid_index.data}", show_progress=False)
    loaded = structret.load_index(hybrid_index.path)
    # an identifier spelled only in one function's name: BM25 knows it, the vectors barely
    query = "sierra_alpha"
    wanted = {i for i, t in loaded.texts.items() if "sierra_alpha" in t or "alpha_sierra" in t}
    assert wanted
    hybrid_top = {h.id for h in loaded.search(query, k=len(wanted))}
    lexical_hits = [h for h in loaded.search(query, k=10) if "lexical" in h.sources]
    assert lexical_hits and hybrid_top & wanted
    assert len(hybrid_top & wanted) >= len({h.id for h in dense_only.search(hybrid_index.model, query,
                                                                          k=len(wanted))} & wanted)


def test_search_and_the_page_say_which_side_found_each_hit(hybrid_index):
    from click.testing import CliRunner
    from starlette.testclient import TestClient

    from structret.cli import cli
    from structret.serving import create_app

    result = CliRunner().invoke(cli, ["search", str(hybrid_index.path), "kilo then lima", "-k", "3", "--lines", "0"])
    assert result.exit_code == 0, result.output
    assert re.search(r"\[(dense|lexical)( \+ (dense|lexical))?\]", result.output)
    client = TestClient(create_app(hybrid_index.path))
    page = client.get("/", params={"q": "kilo then lima", "k": 3}).text
    assert "fused with bm25 (zscore:0.3)" in page
    assert 'class="side side-' in page
    hits = client.get("/api/search", params={"q": "kilo then lima", "k": 3}).json()["hits"]
    assert all(set(h["found_by"]) <= {"dense", "lexical"} and h["found_by"] for h in hits)


def test_cli_index_tunes_the_fusion_on_valid_and_records_it(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from structret.cli import cli

    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path / "cache"))
    data = _code_rows(tmp_path / "rows.jsonl.gz", n=60)
    out = tmp_path / "idx"
    result = CliRunner().invoke(cli, ["index", "--data", f"codesearchnet:{data}", "--split", "test", "--lexical",
                                      "bm25", "--tune", "valid", "--out", str(out)])
    assert result.exit_code == 0, result.output
    meta = json.loads((out / "structret.json").read_text())
    tuning = meta["lexical"]["tuning"]
    assert parse(tuning["fusion"]) == parse(meta["lexical"]["fusion"])
    assert tuning["scores"][tuning["fusion"]] == max(tuning["scores"].values())
    assert "hybrid with bm25, fusion " + tuning["fusion"] in result.output
    for bad, words in ((["--fusion", "rrf"], "add --lexical bm25"), (["--lexical", "bm25", "--tune", "test"],
                                                                      "documents being indexed")):
        refused = CliRunner().invoke(cli, ["index", "--data", f"codesearchnet:{data}", "--split", "test", *bad,
                                           "--out", str(tmp_path / "other")])
        assert refused.exit_code == 2 and words in refused.output


def test_updating_a_hybrid_index_refits_its_lexical_side(hybrid_index, tmp_path):
    import shutil

    import structret
    from structret.api import update_index

    path = tmp_path / "idx"
    shutil.copytree(hybrid_index.path, path)
    extra = tmp_path / "extra.jsonl.gz"
    import gzip

    code = "def zulu_quebec(value):\n    return value"
    with gzip.open(extra, "wt") as f:
        f.write(json.dumps({"repo": "r", "path": "z.py", "func_name": "zulu_quebec", "code": code,
                            "language": "python", "docstring": "zulu quebec helper", "url": "new-1",
                            "docstring_tokens": ["zulu", "quebec", "helper"],
                            "partition": "test"}) + "\n")
    done = update_index(path, add=f"codesearchnet:{extra}", remove=["u0"], show_progress=False)
    assert (done.added, done.removed, done.count) == (1, 1, 60)
    loaded = structret.load_index(path)
    assert len(loaded.lexical) == 60 and "u0" not in loaded.lexical_ids
    top = loaded.search("zulu quebec", k=1)[0]
    assert top.id == "new-1" and "lexical" in top.sources
    assert loaded.fusion == Fusion("zscore", 0.3)


def test_a_damaged_lexical_side_is_refused(hybrid_index, tmp_path):
    import shutil

    import structret
    from structret.errors import ArtifactError

    path = tmp_path / "idx"
    shutil.copytree(hybrid_index.path, path)
    (path / "lexical" / "vocab.index.json").write_text("{}")
    with pytest.raises(ArtifactError, match="lexical/vocab.index.json"):
        structret.load_index(path)
