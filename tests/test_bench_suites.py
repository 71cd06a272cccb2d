"""structret bench --recipe / --suite: tables of trained recipes, the papers' numbers, caching."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest
from _tiny_models import _WORDS, tiny_bert_dir, one_torch_thread  # noqa: F401  (fixtures)
from click.testing import CliRunner

from structret import training
from structret.cli import cli
from structret.recipes import check_plugins, list_recipes, resolve_recipe
from structret.suites import BenchTable, Runner, list_suites, load_suite, recipes_table, suite_entry, suite_table, DataSpec

PAPERS = Path("/work/shared/papers")


def _function(rng: random.Random, i: int, partition: str) -> dict:
    name, a, b = (rng.choice(_WORDS) for _ in range(3))
    doc = [rng.choice(_WORDS) for _ in range(rng.randint(3, 8))] + [f"{name}{i}"]
    return {"repo": "tiny/repo", "path": f"m{i}.py", "func_name": f"{name}_{i}", "language": "python",
            "code": f"def {name}{i}({a}_{i}, {b}_{i}):\n    return {a}_{i} + {b}_{i}\n",
            "docstring_tokens": doc, "docstring": " ".join(doc), "partition": partition, "url": f"https://x/{i}"}


@pytest.fixture(scope="module")
def csn(tmp_path_factory) -> str:
    """24 train and 12 test functions in one CodeSearchNet-format file (split by 'partition')."""
    path = tmp_path_factory.mktemp("csn") / "tiny.jsonl.gz"
    rng = random.Random(0)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for i in range(36):
            f.write(json.dumps(_function(rng, i, "train" if i < 24 else "test")) + "\n")
    return f"codesearchnet:{path}"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def train_calls(monkeypatch) -> list:
    calls = []
    real = training.train

    def counting(recipe, **kwargs):
        calls.append(recipe)
        return real(recipe, **kwargs)

    monkeypatch.setattr(training, "train", counting)
    return calls


def _tiny(model: Path) -> list[str]:
    return [f"--set={kv}" for kv in ("backbone=hf-encoder", f"model={model}", "max_steps=2", "batch_size=4",
                                     "query_max_len=16", "passage_max_len=32", "log_every=1")]


# --- recipes mode --------------------------------------------------------------------


def test_two_recipe_table_end_to_end_and_cached(tmp_path, cache, train_calls, tiny_bert_dir, csn, fresh_registry):
    mine = tmp_path / "my-sda.toml"
    mine.write_text('objective = "sda"\nsimilarity = "cos"\ntemperature = 0.05\nlr = 1e-3\n')
    out = tmp_path / "out"
    args = ["bench", "--recipe", "minilm-code", "--recipe", str(mine), "--data", csn, "--zero-shot",
            *_tiny(tiny_bert_dir), "--out", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert len(train_calls) == 2
    assert all(r.max_steps == 2 and r.backbone == "hf-encoder" and r.split == "train" for r in train_calls)
    # one table: rows = systems, columns = dataset x metric
    md = (out / "results.md").read_text()
    assert "| hf-encoder (untrained) |" in md and "| minilm-code |" in md and "| my-sda |" in md
    assert f"{csn}: MRR@100 (full pool)" in md
    table = BenchTable.read_json(out / "results.json")
    assert [r["label"] for r in table.rows][0] == "hf-encoder (untrained)"
    assert all(0 <= r["values"][f"{csn}|MRR@100 (full pool)"] <= 1 for r in table.rows)
    png = out / "results.png"
    assert png.stat().st_size > 1000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # the same command again: nothing trained, nothing evaluated, the same numbers
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0, again.output
    assert len(train_calls) == 2
    assert "trained 0, reused 2 runs; evaluated 0, reused 3" in again.output
    assert BenchTable.read_json(out / "results.json") == table

    # one recipe field changed: only that row trains and is evaluated again
    mine.write_text('objective = "sda"\nsimilarity = "cos"\ntemperature = 0.05\nlr = 2e-3\n')
    third = CliRunner().invoke(cli, args)
    assert third.exit_code == 0, third.output
    assert len(train_calls) == 3 and train_calls[-1].lr == 2e-3
    assert "trained 1, reused 1 runs; evaluated 1, reused 2" in third.output


def test_finetune_continues_the_pretraining_run_with_its_text_format(cache, train_calls, tiny_bert_dir, csn,
                                                                     fresh_registry):
    settings = {"backbone": "hf-encoder", "model": str(tiny_bert_dir), "max_steps": "2", "batch_size": "4",
                "query_max_len": "16", "passage_max_len": "32"}
    runner = Runner(show_progress=False)
    table = recipes_table(["minilm-code"], [DataSpec(csn, "tiny", csn)], finetune="santa-code-finetune",
                          zero_shot=True, settings=settings, runner=runner)
    assert [r["label"] for r in table.rows] == ["hf-encoder (untrained)", "minilm-code (no fine-tuning)",
                                                 "minilm-code + santa-code-finetune"]
    pre, ft = train_calls
    assert ft.model == pre.output and ft.objective == "dr" and ft.lr == 1e-5
    assert (ft.text_format, ft.backbone) == (pre.text_format, pre.backbone)
    assert ft.plugins.get(ft.text_format) == pre.plugins.get(pre.text_format)  # a text format's options go along
    assert ft.plugins[ft.backbone] == pre.plugins[pre.backbone]  # and the backbone's
    # the pretraining run is shared by the zero-shot row and the fine-tuned one
    assert len(runner.trained) == 2 and len(runner.reused_runs) == 1


def test_existing_system_bench_is_unchanged(fresh_registry, csn):
    result = CliRunner().invoke(cli, ["bench", "--data", csn, "--system", "bm25"])
    assert result.exit_code == 0, result.output
    assert "| bm25 |" in result.output and "seconds" in result.output
    bad = CliRunner().invoke(cli, ["bench", "--data", csn, "--system", "bm25", "--set", "max_steps=2"])
    assert bad.exit_code != 0 and "--set goes with --recipe or --suite" in bad.output


# --- suites --------------------------------------------------------------------------


def test_suites_parse_and_every_row_recipe_exists():
    assert {"santa", "khan-jang", "attempt"} <= set(list_suites())
    shipped = set(list_recipes())
    for name in list_suites():
        if not suite_entry(name).is_file:  # coir: built from folders of data (tests/test_coir.py)
            continue
        suite = load_suite(name)
        assert suite.rows and suite.datasets and suite.source
        for row in suite.rows:
            names = list(row.recipe.values()) + list(row.finetune.values())
            assert row.paper_only or names or row.block, f"{name}: {row.label} runs nothing"
            for recipe in names:
                assert recipe in shipped, f"{name}: {row.label} names unknown recipe {recipe}"
                resolve_recipe(recipe, {k: v for d in row.set.values() for k, v in d.items()})
            for variant in row.variants:  # real fields and options of the training they change
                changed = (list(row.recipe.values()) or list(row.finetune.values()))[0]
                check_plugins(resolve_recipe(changed, {**{k: v for d in row.set.values() for k, v in d.items()},
                                                       **variant.set}))
            for key, numbers in row.paper.items():
                for text in numbers.values():
                    float(text)


def _paper(suite: str, label: str, dataset: str, column: str, block: str = "") -> str:
    rows = [r for r in load_suite(suite).rows if r.label == label and (not block or r.block == block)]
    assert len(rows) == 1, (suite, label, block)
    return rows[0].paper[dataset][column]


def test_paper_numbers_are_the_papers():
    # SANTA Table 3
    assert _paper("santa", "SANTA (Entity Mask)", "code", "MRR", "Zero-Shot") == "46.08"
    assert _paper("santa", "T5 (w/ SDA)", "code", "MRR", "Zero-Shot") == "45.01"
    assert _paper("santa", "SANTA (Span Mask)", "product", "NDCG Four-C", "Fine-Tuning") == "80.99"
    assert _paper("santa", "T5 (Baseline)", "code", "MRR", "Fine-Tuning") == "39.30"
    assert _paper("santa", "T5 (w/ MEP)", "product", "NDCG Two-C", "Zero-Shot") == "70.56"
    # SANTA Table 2
    assert _paper("santa", "SANTA (Hard Negative)", "product", "NDCG Two-C") == "82.59"
    assert _paper("santa", "CodeRetriever (AR2)", "code", "MRR") == "46.9"
    # Khan & Jang Table 6
    assert _paper("khan-jang", "DFS Sequence + Informed", "code", "MRR") == "0.7209"
    assert _paper("khan-jang", "Baseline (CodeSearchNet Challenge)", "code", "MRR") == "0.6922"
    assert _paper("khan-jang", "DFS Sequence", "code", "MRR") == "0.5766"
    # ATTEMPT Table 1
    assert _paper("attempt", "ATTEMPT", "ma-amazon", "r@500") == "0.7924"
    assert _paper("attempt", "BIBERT", "alipay", "ndcg@50") == "0.2033"
    assert _paper("attempt", "BIBERT-C(A)", "alipay", "r@100") == "0.4611"
    assert _paper("attempt", "MTBERT-C", "ma-amazon", "ndcg@50") == "0.3997"
    assert _paper("attempt", "Condenser", "alipay", "r@500") == "0.6423"


@pytest.mark.skipif(not PAPERS.is_dir(), reason="the papers' text is not on this machine")
def test_every_paper_number_occurs_in_the_paper_text():
    files = {"santa": "santa-sda-mep.md", "khan-jang": "khan-jang-informed-attention.md",
             "attempt": "attempt-aspect-mlm.md"}
    for name, file in files.items():
        text = (PAPERS / file).read_text()
        for row in load_suite(name).rows:
            for numbers in row.paper.values():
                for value in numbers.values():
                    assert value in text, f"{name}: {row.label} {value} is not in {file}"


def test_a_suite_table_with_paper_and_measured_columns(tmp_path, cache, train_calls, tiny_bert_dir, csn,
                                                       fresh_registry):
    suite = tmp_path / "mini.toml"
    suite.write_text(f'''
name = "mini"
title = "Mini table"
paper = "nobody, 2024"
source = "Table 9"
[[datasets]]
key = "code"
label = "Code"
formats = ["codesearchnet"]
backbone = "hf-encoder"
standin_data = "{csn}"
standin_label = "tiny CSN stand-in"
metrics = [{{ label = "MRR", measured = "MRR 999 distractors (query ranks codes)", fallback = "MRR@100 (full pool)" }}]
[[datasets]]
key = "shop"
label = "Shop"
formats = ["esci"]
unavailable = "no shop data here"
metrics = [{{ label = "NDCG", measured = "NDCG@100 two-class" }}]
[[rows]]
label = "untrained"
paper = {{ code = {{ MRR = "1.00" }} }}
[[rows]]
label = "sda"
recipe = "minilm-code"
paper = {{ code = {{ MRR = "40.0" }}, shop = {{ NDCG = "70.1" }} }}
[[rows]]
label = "sda + dr"
recipe = "minilm-code"
finetune = "santa-code-finetune"
paper = {{ code = {{ MRR = "45.5" }} }}
[[rows]]
label = "theirs"
paper_only = "another paper's model"
paper = {{ code = {{ MRR = "50.0" }} }}
''')
    out = tmp_path / "out"
    args = ["bench", "--suite", str(suite), "--set", f"model={tiny_bert_dir}", "--backbone", "hf-encoder",
            *[a for a in _tiny(tiny_bert_dir) if "backbone=" not in a and "model=" not in a], "--out", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert len(train_calls) == 2  # minilm-code once (shared by two rows), the fine-tuning once
    table = BenchTable.read_json(out / "results.json")
    headers = [c["header"] for c in table.columns]
    assert headers[0] == "Code MRR — paper"
    assert headers[1].startswith("Code MRR — measured here (tiny CSN stand-in; backbone hf-encoder; budget max_steps=2")
    assert headers[2] == "Shop NDCG — paper"
    assert headers[3] == "Shop NDCG — measured here (cannot run, see below)"
    assert "Shop: cannot run: no shop data here" in table.caption
    rows = {r["label"]: r for r in table.rows}
    assert rows["sda"]["paper"] == {"code|MRR|paper": "40.0", "shop|NDCG|paper": "70.1"}
    # 12 test pairs: the 999-distractor MRR is n/a, so the fallback column is used and marked
    assert rows["sda"]["marks"] == ["code|MRR"] and 0 <= rows["sda"]["values"]["code|MRR"] <= 1
    assert rows["theirs"]["values"]["code|MRR"] is None and rows["sda"]["values"]["shop|NDCG"] is None
    md = (out / "results.md").read_text()
    assert "| theirs | 50.0 | — | — | — |" in md
    assert "| sda | 40.0 | " in md and "* |" in md and "| 70.1 | n/a |" in md
    assert "Offline stand-ins used (Code → tiny CSN stand-in)" in md and "Paper: nobody, 2024, Table 9" in md
    assert (out / "results.png").stat().st_size > 1000


def test_data_is_matched_to_suite_datasets():
    from structret.suites import SuiteError, assign_data

    santa = load_suite("santa")
    assert assign_data(santa, ["adv:dataset", "product=esci:shop"]) == {"code": "adv:dataset", "product": "esci:shop"}
    assert assign_data(santa, ["esci:shop"]) == {"product": "esci:shop"}
    with pytest.raises(SuiteError, match="cannot tell which"):
        assign_data(santa, ["beir:x"])
    with pytest.raises(SuiteError, match="no dataset 'docs'"):
        assign_data(santa, ["docs=beir:x"])


def test_suite_rows_for_one_shipped_suite_on_tiny_data(tmp_path, cache, train_calls, tiny_bert_dir, csn,
                                                      fresh_registry):
    settings = {"model": str(tiny_bert_dir), "max_steps": "2", "batch_size": "4", "query_max_len": "16",
                "passage_max_len": "32"}
    table = suite_table(load_suite("santa"), [f"code={csn}"], settings=settings, backbone="hf-encoder",
                        runner=Runner(show_progress=False), rows=["T5 (Baseline)", "T5 (w/ SDA)"])
    # both blocks of both rows: zero-shot baseline (untrained), fine-tuned baseline, SDA, SDA + fine-tuning
    assert [(r["label"], r["block"]) for r in table.rows] == [
        ("T5 (Baseline)", "Zero-Shot"), ("T5 (w/ SDA)", "Zero-Shot"),
        ("T5 (Baseline)", "Fine-Tuning"), ("T5 (w/ SDA)", "Fine-Tuning")]
    assert [r.objective for r in train_calls] == ["sda", "dr", "dr"]
    assert all(r["values"]["code|MRR"] is not None for r in table.rows)
    assert all(r["values"]["product|NDCG Two-C"] is None for r in table.rows)
    assert "cannot run: needs ESCI" in table.caption
    assert "Offline stand-ins" not in table.caption  # the code data was given
    md = table.markdown()
    assert "| *Zero-Shot* |" in md and "| *Fine-Tuning* |" in md


# --- seeds ---------------------------------------------------------------------------


def test_seeds_train_each_trained_row_per_seed_and_report_mean_and_std(tmp_path, cache, train_calls, tiny_bert_dir,
                                                                       csn, fresh_registry, monkeypatch):
    import statistics
    import tomllib

    out = tmp_path / "out"
    args = ["bench", "--recipe", "minilm-code", "--data", csn, "--zero-shot", "--system", "bm25",
            *_tiny(tiny_bert_dir), "--set", "lr=1e-3", "--seeds", "2", "--out", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    # two runs for the one trained row, seeds 42 and 43, each recorded in its run's recipe.toml
    assert [r.seed for r in train_calls] == [42, 43]
    recorded = sorted(tomllib.loads((Path(r.output) / "recipe.toml").read_text())["seed"] for r in train_calls)
    assert recorded == [42, 43]
    # bm25 and the untrained backbone evaluated once each, the trained row once per seed
    assert "trained 2, reused 0 runs; evaluated 4, reused 0" in result.output

    key = f"{csn}|MRR@100 (full pool)"
    table = BenchTable.read_json(out / "results.json")
    rows = {r["label"]: r for r in table.rows}
    trained = rows["minilm-code"]
    assert trained["seeds"] == [42, 43]
    each = trained["per_seed"][key]
    assert len(each) == 2 and all(0 <= v <= 1 for v in each)
    assert trained["values"][key] == pytest.approx(statistics.fmean(each))
    assert "per_seed" not in rows["bm25"] and "per_seed" not in rows["hf-encoder (untrained)"]
    md = (out / "results.md").read_text()
    std = statistics.stdev(v * 100 for v in each)
    assert f"| minilm-code | {statistics.fmean(each) * 100:.2f} ± {std:.2f} |" in md
    assert "| bm25 | " in md and " ± " not in md.split("| bm25 |")[1].splitlines()[0]
    assert "over 2 seeds (42, 43)" in table.caption
    assert any("Untrained rows" in n and "evaluated once" in n for n in table.notes)
    png = out / "results.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.axes

    bars = []
    monkeypatch.setattr(matplotlib.axes.Axes, "errorbar", lambda self, x, y, xerr, **kw: bars.append((x, y, xerr)))
    table.plot(tmp_path / "bars.png")
    assert bars == [([statistics.fmean(each) * 100], [2], [pytest.approx(std)])]  # only the trained row, 3rd
    # results.json round-trips (the per-seed values included)
    again_path = tmp_path / "again.json"
    table.write_json(again_path)
    assert BenchTable.read_json(again_path) == table
    assert BenchTable.read_json(again_path).markdown() == md

    # the same command again: every run and evaluation cached
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0, again.output
    assert len(train_calls) == 2
    assert "trained 0, reused 2 runs; evaluated 0, reused 4" in again.output
    assert BenchTable.read_json(out / "results.json") == table
    # one seed: the seed-42 run is reused and the table has no seed fields
    one = CliRunner().invoke(cli, [a for a in args if a not in ("--seeds", "2")])
    assert one.exit_code == 0, one.output
    assert len(train_calls) == 2 and " ± " not in (out / "results.md").read_text()
    single = BenchTable.read_json(out / "results.json")
    assert all("per_seed" not in r and "seeds" not in r for r in single.rows)
    assert {r["label"]: r["values"][key] for r in single.rows}["minilm-code"] == each[0]


def test_seeds_in_a_suite_table_and_an_old_results_json(tmp_path, cache, train_calls, tiny_bert_dir, csn,
                                                       fresh_registry):
    settings = {"model": str(tiny_bert_dir), "max_steps": "2", "batch_size": "4", "query_max_len": "16",
                "passage_max_len": "32", "seed": "7"}
    runner = Runner(show_progress=False)
    table = suite_table(load_suite("santa"), [f"code={csn}"], settings=settings, backbone="hf-encoder",
                        runner=runner, rows=["T5 (Baseline)", "T5 (w/ SDA)"], seeds=2)
    # --set seed=7 moves the base: SDA pretraining and both fine-tunings with seeds 7 and 8
    assert sorted((r.objective, r.seed) for r in train_calls) == [
        ("dr", 7), ("dr", 7), ("dr", 8), ("dr", 8), ("sda", 7), ("sda", 8)]
    rows = {(r["label"], r["block"]): r for r in table.rows}
    assert "seeds" not in rows[("T5 (Baseline)", "Zero-Shot")]  # untrained: evaluated once
    sda_ft = rows[("T5 (w/ SDA)", "Fine-Tuning")]
    assert sda_ft["seeds"] == [7, 8] and len(sda_ft["per_seed"]["code|MRR"]) == 2
    assert "over 2 seeds (7, 8)" in table.caption and " ± " in table.markdown()
    # a results.json written before seeds existed still reads and prints as it did
    path = tmp_path / "old.json"
    old = table.to_dict()
    for row in old["rows"]:
        row.pop("seeds", None), row.pop("per_seed", None)
    path.write_text(json.dumps(old))
    cells = [line for line in BenchTable.read_json(path).markdown().splitlines() if line.startswith("| T5")]
    assert len(cells) == 4 and not any(" ± " in line for line in cells)


def test_seeds_go_with_recipe_or_suite(fresh_registry, csn):
    bad = CliRunner().invoke(cli, ["bench", "--data", csn, "--system", "bm25", "--seeds", "2"])
    assert bad.exit_code != 0 and "--seeds goes with --recipe or --suite" in bad.output
    zero = CliRunner().invoke(cli, ["bench", "--recipe", "minilm-code", "--data", csn, "--seeds", "0"])
    assert zero.exit_code != 0 and "--seeds" in zero.output



def test_seeds_with_only_untrained_rows_evaluate_once(cache, train_calls, tiny_bert_dir, csn, fresh_registry):
    runner = Runner(show_progress=False)
    table = recipes_table([], [DataSpec(csn, "tiny", csn)], zero_shot=True, systems=["bm25"], runner=runner,
                          settings={"backbone": "hf-encoder", "model": str(tiny_bert_dir)}, seeds=3)
    assert train_calls == [] and len(runner.evaluated) == 2
    assert all("per_seed" not in r for r in table.rows)
    assert "over 3 seeds (no row here trains)" in table.caption


def _three_splits(tmp_path, seed: int) -> str:
    """48 functions: 24 train, 12 valid, 12 test, as a codesearchnet: spec."""
    path = tmp_path / "three-splits.jsonl.gz"
    rng = random.Random(seed)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for i in range(48):
            f.write(json.dumps(_function(rng, i, "train" if i < 24 else "valid" if i < 36 else "test")) + "\n")
    return f"codesearchnet:{path}"


def test_a_hybrid_row_fuses_the_rows_model_and_is_cached_by_it(tmp_path, cache, train_calls, tiny_bert_dir,
                                                              fresh_registry):
    csn = _three_splits(tmp_path, seed=1)
    settings = {"model": str(tiny_bert_dir), "max_steps": "2", "batch_size": "4", "query_max_len": "16",
                "passage_max_len": "32"}
    suite = load_suite("code-hybrid")
    assert [r.lexical for r in suite.rows] == ["", "bm25-fields", "", "bm25-fields"]

    def table(runner):
        return suite_table(suite, [f"code={csn}"], settings=settings, backbone="hf-encoder", runner=runner)

    runner = Runner(show_progress=False)
    first = table(runner)
    values = {r["label"]: r["values"]["code|MRR"] for r in first.rows}
    assert all(v is not None for v in values.values())
    assert len(train_calls) == 1  # the two SDA rows share one run: the hybrid only adds a lexical side
    # the hybrid rows evaluated as LEXICAL+MODEL, each cached under its model's identity
    hybrid = [s for s in runner.evaluated if s.startswith("bm25-fields+")]
    assert len(set(hybrid)) == 2 and any(Path(s.partition("+")[2]).exists() for s in hybrid)  # valid and test each
    identity = runner.system_identity(hybrid[-1], {"fusion": "zscore:0.4"})
    assert identity["lexical"] == "bm25-fields" and identity["fusion"] == "zscore:0.4"
    assert "final" in identity["dense"] or "model_dir" in identity["dense"] or "run" in identity["dense"]
    again = Runner(show_progress=False)
    table(again)
    assert len(train_calls) == 1 and not again.evaluated  # all reused


def test_an_unknown_recipe_or_suite_names_the_closest_and_the_file_alternative():
    from structret.errors import RecipeError, SuiteError

    with pytest.raises(RecipeError, match=r"unknown recipe 'santa-cod'\. Did you mean 'santa-code'\?.*"
                                          r"Or pass the path of a \.toml file\."):
        resolve_recipe("santa-cod")
    with pytest.raises(SuiteError, match=r"unknown suite 'sant'\. Did you mean 'santa'\?.*Known suites: .*coir"):
        load_suite("sant")


def test_a_hybrid_row_may_fuse_as_the_validation_split_chooses(tmp_path, cache, train_calls, tiny_bert_dir,
                                                               fresh_registry):
    from structret.errors import SuiteError
    from structret.evaluation import tune_fusion
    from structret.search.system import make_retriever

    csn = _three_splits(tmp_path, seed=2)
    text = (Path(__file__).parents[1] / "plugins/structret_papers/suites/code-hybrid.toml").read_text()
    tuned = tmp_path / "tuned.toml"
    tuned.write_text(text.replace('fusion = "zscore:0.4"', 'fusion = "valid"'))
    runner = Runner(show_progress=False)
    settings = {"model": str(tiny_bert_dir), "max_steps": "2", "batch_size": "4"}
    suite_table(load_suite(str(tuned)), [f"code={csn}"], settings=settings, backbone="hf-encoder", runner=runner)
    hybrid = next(s for s in runner.evaluated if s == "bm25-fields+hf-encoder")
    key = [p for p in (cache / "evals").glob("*.json") if json.loads(p.read_text())["row"].get("fusion")]
    assert key, "a tuned row records the fusion it was scored with"
    from structret.datasets import load_dataset

    expected = tune_fusion(make_retriever(hybrid, model=str(tiny_bert_dir), show_progress=False),
                           load_dataset(csn, "valid"))[1]["fusion"]
    assert {json.loads(p.read_text())["row"]["fusion"] for p in key} == {expected}
    no_valid = tmp_path / "no-valid.toml"
    no_valid.write_text(tuned.read_text().replace('valid_split = "valid"\n', ""))
    with pytest.raises(SuiteError, match="has none"):
        suite_table(load_suite(str(no_valid)), [f"code={csn}"], settings=settings, backbone="hf-encoder",
                    runner=Runner(show_progress=False))
