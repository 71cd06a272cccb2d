"""benchmarks/learning_curves.py's bookkeeping (issue 38), on made-up records: which runs the plan
still wants, and which fusion a recipe ships with when its seeds chose differently. The training and
scoring themselves are structret.train and run_bench, tested elsewhere."""

from __future__ import annotations

import gzip
import json
from types import SimpleNamespace

import pytest
from _scripts import load_script


@pytest.fixture(scope="module")
def curves():
    return load_script("learning_curves.py")


def record(system, steps, seed, fused_valid, fusion="zscore:0.3", grid=None):
    fused = {"fusion": fusion, "valid": fused_valid, "test": 0.5}
    if grid is not None:
        fused["valid_grid"] = grid
    return {"system": system, "steps": steps, "seed": seed, "dense": {"valid": 0.6, "test": 0.6}, "fused": fused}


def test_the_shipped_fusion_is_best_on_the_seeds_mean_not_one_seeds_choice(curves):
    runs = [record("sda", 960, 42, 0.70, "minmax:0.25", {"minmax:0.25": 0.70, "zscore:0.25": 0.69, "rrf:0.5": 0.5}),
            record("sda", 960, 43, 0.68, "zscore:0.25", {"minmax:0.25": 0.65, "zscore:0.25": 0.68, "rrf:0.5": 0.5}),
            record("sda", 960, 44, 0.68, "zscore:0.25", {"minmax:0.25": 0.66, "zscore:0.25": 0.68})]
    best, means = curves.shipped_fusion(runs)
    assert best == "zscore:0.25"
    assert means["zscore:0.25"] == pytest.approx((0.69 + 0.68 + 0.68) / 3)
    assert "rrf:0.5" not in means  # seed 44 never scored it


def test_a_record_without_its_grid_and_without_weights_is_refused_with_where_to_look(curves, tmp_path):
    out = tmp_path / "records"
    path = curves.save(out, record("sda", 960, 42, 0.68))
    args = SimpleNamespace(runs=str(tmp_path / "runs"), data_dir=None)
    with pytest.raises(SystemExit, match=r"no valid_grid, and no weights at .*sda-960-s42/final"):
        curves.add_valid_grid(args, out, json.loads(path.read_text()))
    assert "valid_grid" not in json.loads(path.read_text())["fused"]


def test_the_plan_gives_seeds_to_sda_and_the_two_best_fused_at_240(curves):
    done = [record(s, n, seed, 0.6) for s in ("sda-before", "sda") for seed in curves.SEEDS for n in (60,)]
    fused = {"sda": 0.669, "sda+mep": 0.646, "sda+mep-unmasked": 0.6695, "sda-structure": 0.661,
             "sda-filtered": 0.655, "sda-cornstack": 0.651, "sda-bm25neg": 0.672}
    done += [record(s, n, 42, fused[s]) for s in curves.CURVES for n in (60, 240)]
    wanted = curves.plan(done)
    assert wanted[:3] == [("sda", 960, 42), ("sda-bm25neg", 960, 42), ("sda+mep-unmasked", 960, 42)]
    seeded = {s for s, n, seed in wanted if n == 960 and seed == 43}
    assert seeded == {"sda", "sda-bm25neg", "sda+mep-unmasked"}  # the 960 ranking is not in yet
    assert ("sda-small", 960, 42) in wanted
    at_960 = [record(s, n, seed, 0.70 if s == "sda-structure" else 0.68) for s, n, seed in wanted]
    assert curves.plan(done + at_960) == [("sda-structure", 960, 43), ("sda-structure", 960, 44)]  # best at 960


def test_every_committed_record_scores_its_own_fusion_on_its_grid(curves):
    for path in sorted(curves.OUT.glob("*.json")):
        fused = json.loads(path.read_text())["fused"]
        if "valid_grid" in fused:
            assert fused["valid_grid"][fused["fusion"]] == pytest.approx(fused["valid"], abs=1e-9), path.name
            assert max(fused["valid_grid"].values()) == pytest.approx(fused["valid"], abs=1e-9), path.name


def test_prepare_for_named_systems_runs_only_their_commands_and_joins_the_parts(curves, tmp_path, monkeypatch):
    ran = []

    def fake_run(command, check):  # each structret call writes a one-member gzip to its --out
        ran.append(command[3])
        out = command[command.index("--out") + 1]
        with gzip.open(out, "wt") as f:
            f.write(command[command.index("--data") + 1] + "\n")

    monkeypatch.setattr(curves.subprocess, "run", fake_run)
    args = SimpleNamespace(data_dir=str(tmp_path), systems=["sda-bm25neg"])
    curves.prepare(args)
    assert ran == ["negatives"] * len(curves.LANGUAGES)  # no filter-pairs, no small draw
    joined = gzip.open(tmp_path / "derived" / "bm25neg.jsonl.gz", "rt").read().split()
    assert [line.rsplit("/", 1)[1] for line in joined] == [f"{lang}.jsonl.gz" for lang in curves.LANGUAGES]
    assert sorted(p.name for p in (tmp_path / "derived").iterdir()) == ["bm25neg.jsonl.gz"]  # parts removed
    ran.clear()
    curves.prepare(SimpleNamespace(data_dir=str(tmp_path), systems=["sda-filtered"]))
    assert ran == ["filter-pairs"]  # into the file the system trains on
    assert curves.has_train_data(args, curves.SYSTEMS["sda-filtered"].train)
