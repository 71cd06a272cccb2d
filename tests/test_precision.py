"""dtype=auto: measured once per CPU, cached, overridable; never read off a CPU flag."""

from __future__ import annotations

import json
import logging

import pytest

from structret import precision


@pytest.fixture
def measured(monkeypatch, tmp_path):
    """precision.cpu_bf16 with the override unset, its cache in tmp_path and a counted fake probe."""
    monkeypatch.delenv(precision.CPU_BF16_ENV, raising=False)
    calls = []

    def run(probe):
        def fake():
            calls.append(probe)
            return probe
        return precision.cpu_bf16(run_probe=fake, path=tmp_path / "precision.json")

    return run, calls, tmp_path / "precision.json"


@pytest.mark.parametrize("probe, bf16", [
    (precision.Probe(0.010, 0.004, 0.100, 0.060), True),     # clearly faster: bf16
    (precision.Probe(0.010, 0.004, 0.100, 0.097), False),    # within the margin: not worth it
    (precision.Probe(0.010, 0.008, 0.100, 0.150), False),    # flag or not, slower: fp32
    (precision.Probe(0.010, 0.200, None, None), False),      # emulated: the forward is never timed
])
def test_the_choice_follows_the_encoder_forward_timing(measured, probe, bf16):
    run, calls, _ = measured
    assert run(probe) is bf16 and len(calls) == 1


def test_the_choice_is_measured_once_then_read_from_the_cache(measured, caplog):
    run, calls, path = measured
    with caplog.at_level(logging.INFO, logger="structret.precision"):
        assert run(precision.Probe(0.01, 0.005, 0.1, 0.05)) is True
    assert "bf16, measured (matmul fp32 10.0 ms, bf16 5.0 ms; encoder forward fp32 100.0 ms" in caplog.text
    entry = json.loads(path.read_text())[precision.cpu_key()]
    assert entry["bf16"] is True and entry["forward_bf16"] == 0.05
    # a later process with the same CPU, threads and torch reads it: a probe saying otherwise is not run
    assert run(precision.Probe(0.01, 0.02, 0.1, 0.2)) is True and len(calls) == 1


def test_another_cpu_or_torch_is_measured_again(measured, monkeypatch):
    run, calls, path = measured
    assert run(precision.Probe(0.01, 0.005, 0.1, 0.05)) is True
    monkeypatch.setattr(precision, "cpu_key", lambda: "another CPU | 2 threads | torch 9")
    assert run(precision.Probe(0.01, 0.02, 0.1, 0.2)) is False and len(calls) == 2
    assert len(json.loads(path.read_text())) == 2  # both kept


def test_a_damaged_cache_is_measured_again_and_rewritten(measured, caplog):
    run, calls, path = measured
    path.write_text("{not json")
    with caplog.at_level(logging.WARNING, logger="structret.precision"):
        assert run(precision.Probe(0.01, 0.005, 0.1, 0.05)) is True
    assert "unreadable" in caplog.text and json.loads(path.read_text())[precision.cpu_key()]["bf16"] is True


def test_the_override_is_never_measured(monkeypatch, tmp_path):
    for forced, expected in (("1", True), ("0", False)):
        monkeypatch.setenv(precision.CPU_BF16_ENV, forced)
        assert precision.cpu_bf16(run_probe=lambda: pytest.fail("measured"), path=tmp_path / "p.json") is expected
    assert not (tmp_path / "p.json").exists()


def test_the_real_probe_runs_quickly_and_leaves_the_random_state_alone():
    import time

    import torch

    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    start = time.perf_counter()
    probe = precision.measure(rounds=1)
    took = time.perf_counter() - start
    assert torch.equal(torch.rand(3), expected)
    assert probe.matmul_fp32 > 0 and probe.matmul_bf16 > 0
    assert (probe.forward_fp32 is None) == (probe.forward_bf16 is None)
    assert isinstance(probe.bf16, bool) and took < 60  # generous: an emulated-bf16 CPU under load


@pytest.mark.parametrize("dtype, forced, expected", [("auto", "1", True), ("auto", "0", False),
                                                     ("bf16", "0", True), ("fp32", "1", False)])
def test_a_recipes_dtype_auto_trains_by_the_same_rule(monkeypatch, dtype, forced, expected):
    from structret.recipes import Recipe
    from structret.training.distributed import bf16_training

    monkeypatch.setenv(precision.CPU_BF16_ENV, forced)
    assert Recipe(dtype=dtype).dtype == dtype  # the recipe field accepts it
    assert bf16_training(dtype) is expected


def test_a_choice_measured_on_a_busy_machine_is_used_but_not_cached(measured, caplog):
    run, calls, path = measured
    with caplog.at_level(logging.WARNING, logger="structret.precision"):
        assert run(precision.Probe(0.01, 0.005, 0.1, 0.05, steady=False)) is True
    assert "busy machine" in caplog.text and not path.exists()
    assert run(precision.Probe(0.01, 0.005, 0.1, 0.2)) is False and len(calls) == 2  # measured again
    assert json.loads(path.read_text())[precision.cpu_key()]["bf16"] is False
