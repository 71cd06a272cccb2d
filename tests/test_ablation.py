"""The ablation suites (issue 16): every row also scored on the validation split, a row's variants
chosen there, only the chosen one scored on test; one command end to end at toy size."""

from __future__ import annotations

import gzip
import json
import random
import statistics
from pathlib import Path

import pytest
from _tiny_models import tiny_bert_dir, one_torch_thread  # noqa: F401  (fixtures)
from click.testing import CliRunner
from test_bench_suites import _function, _tiny, cache, train_calls  # noqa: F401  (fixtures)

from structret.cli import cli
from structret.suites import BenchTable, Runner, load_suite
from structret.suites.files import SuiteError


@pytest.fixture(scope="module")
def csn3(tmp_path_factory) -> str:
    """24 train, 10 valid and 10 test functions in one CodeSearchNet-format file."""
    path = tmp_path_factory.mktemp("csn3") / "tiny.jsonl.gz"
    rng = random.Random(1)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for i in range(44):
            f.write(json.dumps(_function(rng, i, "train" if i < 24 else "valid" if i < 34 else "test")) + "\n")
    return f"codesearchnet:{path}"


def test_santa_ablation_end_to_end(tmp_path, cache, train_calls, tiny_bert_dir, csn3, fresh_registry, monkeypatch):
    evaluated: list[tuple[str, str]] = []
    real = Runner.evaluate

    def recording(self, system, options, data, split=None):
        evaluated.append((system, split or data.test_split))
        return real(self, system, options, data, split)

    monkeypatch.setattr(Runner, "evaluate", recording)
    out = tmp_path / "out"
    args = ["bench", "--suite", "santa-ablation", "--data", f"code={csn3}", "--backbone", "hf-encoder",
            *_tiny(tiny_bert_dir), "--set", "lr=1e-3", "--seeds", "2", "--out", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output

    suite = load_suite("santa-ablation")
    variants = next(r for r in suite.rows if r.variants).variants
    fixed = [r for r in suite.rows if (r.recipe or r.finetune) and not r.variants]
    # every trained row and every variant trained once per seed; nothing else
    assert len(train_calls) == 2 * (len(fixed) + len(variants))
    assert sorted({r.seed for r in train_calls}) == [42, 43]
    objectives = sorted({r.objective for r in train_calls})
    assert objectives == sorted({"sda", "mep", "sda+mep", "sda+span-mask", "sda+0.1*mep", "sda+0.3*mep"})
    assert any(r.loss_balance == "initial" for r in train_calls)
    assert any(r.plugins.get("mep", {}).get("contrastive_input") == "unmasked" for r in train_calls)

    table = BenchTable.read_json(out / "results.json")
    assert [c["kind"] for c in table.columns] == ["paper", "measured", "valid"]
    last = table.rows[-1]
    pick = last["chosen"]["code"]
    # the choice is the best validation mean, and the row reports that variant's test scores
    means = {v["label"]: statistics.fmean(v["values"]) for v in pick["variants"]}
    assert len(means) == len(variants) and pick["label"] == max(means, key=means.get)
    assert last["label"] == f"SDA+MEP, best variant: {pick['label']}"
    assert last["values"]["code|MRR|valid"] == pytest.approx(means[pick["label"]])
    # test is scored for the chosen variant only: 2 seeds; every variant on valid: 2 seeds each
    tests = [s for s, split in evaluated if split == "test"]
    valids = [s for s, split in evaluated if split == "valid"]
    assert len(tests) == 1 + 2 * len(fixed) + 2  # the untrained row once, every trained row per seed
    assert len(valids) == 1 + 2 * len(fixed) + 2 * len(variants)
    for row in table.rows:
        assert row["values"]["code|MRR"] is not None and row["values"]["code|MRR|valid"] is not None
    md = (out / "results.md").read_text()
    assert "valid split (selection)" in md and "→ chosen: " + pick["label"] in md
    assert (out / "results.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # again: everything cached, the same table
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0, again.output
    assert len(train_calls) == 2 * (len(fixed) + len(variants))
    assert BenchTable.read_json(out / "results.json") == table


def test_variants_need_a_validation_split(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\ntitle = "t"\npaper = "p"\nsource = "s"\n'
                   '[[datasets]]\nkey = "code"\nlabel = "Code"\nmetrics = [{ label = "MRR", measured = "MRR@100" }]\n'
                   '[[rows]]\nlabel = "x"\nrecipe = "minilm-code"\nvariants = [{ label = "a", set = { lr = 1e-4 } }]\n')
    with pytest.raises(SuiteError, match="variants are chosen on a validation split"):
        load_suite(str(bad))
    bad.write_text(bad.read_text().replace('label = "Code"\n', 'label = "Code"\nvalid_split = "valid"\nselect_on = "R@1"\n'))
    with pytest.raises(SuiteError, match="select_on = 'R@1' is not one of its metrics"):
        load_suite(str(bad))


def test_attempt_ablation_end_to_end(tmp_path, cache, train_calls, tiny_bert_dir, fresh_registry, monkeypatch):
    """Table 1's shape on the Debian fixture: fine-tune only, the pretrained baselines, ATTEMPT and
    its variant chosen on validation; a variant changes the pretraining only."""
    from structret_datasets import debian

    monkeypatch.setattr(debian, "TEST_EVERY", 3)  # the 14-package fixture needs test and valid queries
    deb = Path(__file__).parent / "data" / "debian"
    out = tmp_path / "out"
    args = ["bench", "--suite", "attempt-ablation", "--data", f"ma-amazon=debian-packages:{deb / 'Packages'}",
            "--data-option", f"translations={deb / 'Translation-en'}", "--backbone", "hf-encoder",
            *_tiny(tiny_bert_dir), "--set", "aspects=section,priority", "--out", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    suite = load_suite("attempt-ablation")
    variants = next(r for r in suite.rows if r.variants).variants
    table = BenchTable.read_json(out / "results.json")
    labels = [r["label"] for r in table.rows]
    assert labels[:-1] == [r.label for r in suite.rows][:-1] and labels[0] == "Fine-tune only"
    pick = table.rows[-1]["chosen"]["ma-amazon"]
    assert labels[-1] == f"ATTEMPT, best variant: {pick['label']}"
    assert [v["label"] for v in pick["variants"]] == [v.label for v in variants]
    for row in table.rows:
        assert row["values"]["ma-amazon|ndcg@50"] is not None and row["values"]["ma-amazon|ndcg@50|valid"] is not None
    # the fine-tune-only row trains once (dr); every pretrained row trains twice (pretraining, then dr)
    pretrainings = [r for r in train_calls if r.objective != "dr"]
    finetunings = [r for r in train_calls if r.objective == "dr"]
    assert len(finetunings) == len(pretrainings) + 1
    # every pretraining and fine-tuning kept the row's budget; the variant changed its pretraining only
    assert {r.max_steps for r in pretrainings} == {2} and {r.max_steps for r in finetunings} == {2}
    words = [r for r in pretrainings if r.plugins.get("aspect-mlm", {}).get("indicator_init") == "words"]
    assert len(words) == 1
