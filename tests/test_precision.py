"""dtype=auto: the fastest precision measured on the model, a busy moment never pinning a slow one.

The machines are given as timings (what a probe would measure on each); every process is a
fresh ``choose`` (the per-process memo cleared), sharing one cache file, as real runs do.
"""

from __future__ import annotations

import json
import logging

import pytest
import torch

from structret import precision

# what the issue quoted from an AMX Xeon's precision.json, taken during a pip install and a test run
BUSY_PROBE_V1 = {"bf16": False, "matmul_fp32": 0.0159, "matmul_bf16": 0.0319, "forward_fp32": None,
                 "forward_bf16": None, "steady": True}

# seconds per probe: matmul (fp32, bf16) and forward (fp32, bf16 autocast, bf16 weights)
AMX_QUIET = {"matmul": {"fp32": 0.0016, "bf16": 0.0005}, "forward": {"fp32": 0.166, "bf16": 0.085, "bf16-weights": 0.055}}
AMX_BUSY = {"matmul": {"fp32": 0.0159, "bf16": 0.0319}, "forward": {"fp32": 0.40, "bf16": 0.80, "bf16-weights": 0.75}}
ZEN3 = {"matmul": {"fp32": 0.0030, "bf16": 0.054}, "forward": {"fp32": 0.30, "bf16": 5.4, "bf16-weights": 5.0}}
ZEN4 = {"matmul": {"fp32": 0.0020, "bf16": 0.0016}, "forward": {"fp32": 0.20, "bf16": 0.15, "bf16-weights": 0.13}}


class Machine:
    """A CPU as the probe sees it: given timings, and vectors per candidate whose cosine to fp32's is given."""

    def __init__(self, monkeypatch, tmp_path, timings, cos=None):
        self.timings, self.cos = timings, cos or {"bf16": 0.99998, "bf16-weights": 0.9999}
        self.matmuls: list[tuple[str, ...]] = []
        self.forwards: list[tuple[list[str], int]] = []
        self.path = tmp_path / "precision.json"
        monkeypatch.delenv(precision.CPU_BF16_ENV, raising=False)
        monkeypatch.setattr(precision, "time_matmul", self._matmul)
        monkeypatch.setattr(precision, "time_forward", self._forward)
        monkeypatch.setattr(precision, "_chosen", {})

    def _matmul(self, kinds, rounds=3):
        self.matmuls.append(tuple(kinds))
        return {k: self.timings["matmul"][k] for k in kinds}

    def _forward(self, run, kinds, rounds=3):
        self.forwards.append((list(kinds), rounds))
        # rows at exactly the given cosine to fp32's: c * e0 + sqrt(1 - c^2) * e1
        outputs = {}
        for kind in kinds:
            c = self.cos.get(kind, 1.0)
            outputs[kind] = torch.zeros(8, 16)
            outputs[kind][:, 0], outputs[kind][:, 1] = c, (1 - c * c) ** 0.5
        times = {k: self.timings["forward"][k] for k in kinds} if rounds else {}
        return times, outputs

    def process(self, *, source="model-a", candidates=precision.CANDIDATES, shape="bert 384x6") -> str:
        """One new process asking what dtype=auto means."""
        precision._chosen.clear()
        return precision.choose(lambda kind: pytest.fail("the given timings replace running"), shape=shape,
                                source=source, candidates=candidates, path=self.path)

    def now(self, timings):
        self.timings = timings

    def timed(self) -> int:
        return sum(1 for _, rounds in self.forwards if rounds)


@pytest.mark.parametrize("timings, expected", [
    (AMX_QUIET, "bf16-weights"),  # bf16 3x faster: the copy of the weights, faster still than autocast
    (ZEN3, "fp32"),               # bf16 emulated, 18x slower
    (ZEN4, "bf16-weights"),       # bf16 somewhat faster
    ({"matmul": ZEN4["matmul"], "forward": {"fp32": 0.20, "bf16": 0.195, "bf16-weights": 0.192}}, "fp32"),  # a tie
    ({"matmul": ZEN4["matmul"], "forward": {"fp32": 0.20, "bf16": 0.16, "bf16-weights": 0.21}}, "bf16"),
])
def test_each_cpu_kind_gets_its_fastest_precision(monkeypatch, tmp_path, timings, expected):
    machine = Machine(monkeypatch, tmp_path, timings)
    assert machine.process() == expected


def test_an_emulated_bf16_cpu_never_times_a_bf16_forward_and_rechecks_fp32_only(monkeypatch, tmp_path):
    machine = Machine(monkeypatch, tmp_path, ZEN3)
    assert machine.process() == "fp32" and machine.forwards == [(["fp32"], 3)]
    assert machine.process() == "fp32"
    # the next process pays one fp32 matmul: the emulated bf16 one would cost ~50 ms a process
    assert machine.matmuls == [("fp32", "bf16"), ("fp32",)] and machine.timed() == 1


def test_vectors_too_far_from_fp32_rule_a_candidate_out(monkeypatch, tmp_path):
    machine = Machine(monkeypatch, tmp_path, AMX_QUIET, cos={"bf16": 0.99995, "bf16-weights": 0.9985})
    assert machine.process() == "bf16"
    machine = Machine(monkeypatch, tmp_path / "b", AMX_QUIET, cos={"bf16": 0.998, "bf16-weights": 0.997})
    assert machine.process() == "fp32"


def test_busy_then_quiet_the_first_quiet_process_measures_again(monkeypatch, tmp_path, caplog):
    machine = Machine(monkeypatch, tmp_path, AMX_BUSY)
    assert machine.process() == "fp32"  # busy: bf16 matmuls 2x slower, the bf16 forward not even timed
    assert machine.forwards == [(["fp32"], 3)]
    machine.now(AMX_QUIET)
    with caplog.at_level(logging.INFO, logger="structret.precision"):
        assert machine.process() == "bf16-weights"
    assert "matmuls now faster than the cache had seen (fp32, bf16): measured again" in caplog.text
    entry = next(iter(json.loads(machine.path.read_text())["entries"].values()))
    assert entry["forward"] == AMX_QUIET["forward"] and entry["probes"] == 2
    assert machine.process() == "bf16-weights" and machine.timed() == 2  # settled: the third only re-checks


def test_quiet_then_busy_a_busy_process_keeps_the_quiet_choice(monkeypatch, tmp_path):
    machine = Machine(monkeypatch, tmp_path, AMX_QUIET)
    assert machine.process() == "bf16-weights"
    machine.now(AMX_BUSY)
    assert machine.process() == "bf16-weights"
    assert machine.timed() == 1 and len(machine.matmuls) == 2  # the busy one re-checked, found nothing quieter


def test_a_busy_probe_never_replaces_faster_times_already_seen(monkeypatch, tmp_path):
    machine = Machine(monkeypatch, tmp_path, AMX_QUIET)
    assert machine.process() == "bf16-weights"
    # quieter matmuls (a re-probe), but the forward caught a load spike: the fastest times stay
    machine.now({"matmul": {"fp32": 0.0010, "bf16": 0.0003}, "forward": AMX_BUSY["forward"]})
    assert machine.process() == "bf16-weights" and machine.timed() == 2
    entry = next(iter(json.loads(machine.path.read_text())["entries"].values()))
    assert entry["forward"] == AMX_QUIET["forward"] and entry["matmul"] == {"fp32": 0.0010, "bf16": 0.0003}


@pytest.mark.parametrize("cached", ["v1", "v2"])
def test_the_busy_probe_of_the_issue_does_not_pin_fp32(monkeypatch, tmp_path, cached):
    machine = Machine(monkeypatch, tmp_path, AMX_QUIET)
    key = f"{precision.cpu_key()} | bert 384x6"
    if cached == "v1":  # the file as the issue found it: one choice per CPU, no version
        machine.path.write_text(json.dumps({precision.cpu_key(): BUSY_PROBE_V1}))
    else:  # the same probe in today's format
        entry = {"matmul": {"fp32": 0.0159, "bf16": 0.0319}, "forward": {"fp32": 0.40}, "probes": 1, "cosine": {}}
        machine.path.write_text(json.dumps({"version": precision.VERSION, "entries": {key: entry}}))
    assert machine.process() == "bf16-weights"
    assert machine.timed() == 1


def test_a_new_model_of_a_known_shape_measures_only_its_cosines(monkeypatch, tmp_path):
    machine = Machine(monkeypatch, tmp_path, AMX_QUIET)
    assert machine.process(source="model-a") == "bf16-weights"
    machine.cos = {"bf16": 0.9999, "bf16-weights": 0.995}  # a model whose activations bf16 weights cannot hold
    assert machine.process(source="model-b") == "bf16"
    assert machine.forwards[-1] == (["fp32", "bf16", "bf16-weights"], 0)  # one untimed forward each
    assert machine.timed() == 1
    assert machine.process(source="model-a") == "bf16-weights"  # each keeps its own


def test_once_per_process_and_per_shape(monkeypatch, tmp_path):
    machine = Machine(monkeypatch, tmp_path, AMX_QUIET)
    assert machine.process() == "bf16-weights"
    assert precision.choose(lambda kind: None, shape="bert 384x6", source="model-a", path=machine.path) == "bf16-weights"
    assert len(machine.matmuls) == 1  # the same process does not re-check
    assert machine.process(shape="bert 768x12") == "bf16-weights" and machine.timed() == 2
    assert len(json.loads(machine.path.read_text())["entries"]) == 2


@pytest.mark.parametrize("timings, expected", [(AMX_QUIET, True), (ZEN4, False), (ZEN3, False)])
def test_search_scores_in_bf16_only_where_its_matmuls_are_twice_as_fast(monkeypatch, tmp_path, timings, expected):
    machine = Machine(monkeypatch, tmp_path, timings)
    assert precision.bf16_matmul_faster(path=machine.path) is expected
    precision._chosen.clear()
    machine.now(AMX_BUSY if expected else timings)  # a busy process keeps what a quiet one measured
    assert precision.bf16_matmul_faster(path=machine.path) is expected
    assert machine.forwards == []


def test_training_chooses_between_fp32_and_autocast_only(monkeypatch, tmp_path):
    machine = Machine(monkeypatch, tmp_path, AMX_QUIET)
    assert machine.process(candidates=("fp32", "bf16")) == "bf16"
    assert machine.forwards == [(["fp32", "bf16"], 3)]


def test_a_damaged_cache_is_measured_again_and_rewritten(monkeypatch, tmp_path, caplog):
    machine = Machine(monkeypatch, tmp_path, AMX_QUIET)
    machine.path.write_text("{not json")
    with caplog.at_level(logging.WARNING, logger="structret.precision"):
        assert machine.process() == "bf16-weights"
    assert "unreadable" in caplog.text and json.loads(machine.path.read_text())["version"] == precision.VERSION


@pytest.mark.parametrize("forced, expected", [("0", "fp32"), ("1", "bf16"), ("bf16-weights", "bf16-weights")])
def test_the_override_is_never_measured(monkeypatch, tmp_path, forced, expected):
    machine = Machine(monkeypatch, tmp_path, AMX_QUIET)
    monkeypatch.setenv(precision.CPU_BF16_ENV, forced)
    assert machine.process() == expected
    assert machine.process(candidates=("fp32", "bf16")) == ("fp32" if expected == "bf16-weights" else expected)
    assert machine.matmuls == [] and not machine.path.exists()


def test_the_real_timers_run_quickly_and_leave_the_random_state_alone():
    import time

    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    start = time.perf_counter()
    matmul = precision.time_matmul(("fp32", "bf16"), rounds=1)
    encoder = precision.tiny_encoder().eval()
    x, mask = torch.randn(2, 8, 384, generator=torch.Generator().manual_seed(1)), torch.ones(2, 1, 1, 8, dtype=torch.bool)

    def run(kind):
        if kind == "broken":
            raise RuntimeError("no such kernel")
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=kind == "bf16"):
            return encoder(x, mask)[:, 0].float()

    times, outputs = precision.time_forward(run, ["fp32", "bf16", "broken"], rounds=1)
    took = time.perf_counter() - start
    assert torch.equal(torch.rand(3), expected)
    assert set(matmul) == {"fp32", "bf16"} and all(s > 0 for s in matmul.values())
    assert set(times) == set(outputs) == {"fp32", "bf16"}  # the failing candidate is left out, not raised
    assert precision.cosines(outputs)["bf16"] > 0.99
    assert took < 60  # generous: an emulated-bf16 CPU under load


@pytest.mark.parametrize("dtype, forced, expected", [("auto", "1", True), ("auto", "0", False),
                                                     ("bf16", "0", True), ("fp32", "1", False)])
def test_a_recipes_dtype_auto_trains_by_the_same_rule(monkeypatch, dtype, forced, expected):
    from structret.recipes import Recipe
    from structret.training.distributed import bf16_training

    monkeypatch.setenv(precision.CPU_BF16_ENV, forced)
    assert Recipe(dtype=dtype).dtype == dtype  # the recipe field accepts it
    assert bf16_training(dtype) is expected


def test_one_process_trains_in_fp32_then_in_bf16():
    """accelerate keeps one precision per process; a notebook training twice must not be refused."""
    from structret.recipes import Recipe
    from structret.training.distributed import make_accelerator

    assert make_accelerator(Recipe(dtype="fp32")).mixed_precision == "no"
    assert make_accelerator(Recipe(dtype="bf16")).mixed_precision == "bf16"
    assert make_accelerator(Recipe(dtype="fp32")).mixed_precision == "no"
