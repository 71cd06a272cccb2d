"""Which precision ``dtype=auto`` means on this machine: measured once, not read off a CPU flag.

A CPU flag says bf16 instructions exist, not that bf16 is faster: on a 2-core Xeon that
reports AVX512-BF16, fp32 matmuls ran at 328 GFLOP/s and bf16 at 168 (docs/performance.md),
and without the flag bf16 is emulated, ~130x slower. So the first ``auto`` on a CPU times a
matmul and a small BERT-shaped encoder forward in fp32 and under bf16 autocast (a few tenths
of a second), picks bf16 only when it is clearly faster, and caches the choice per CPU
model, thread count and torch version in ``STRUCTRET_CACHE/precision.json``. ``dtype=fp32``
or ``bf16`` skip all this; ``STRUCTRET_CPU_BF16=0|1`` overrides the measurement (the tests
pin it, so they never depend on the CPU they run on).
"""

from __future__ import annotations

import json
import logging
import os
import platform
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

log = logging.getLogger("structret.precision")

CPU_BF16_ENV = "STRUCTRET_CPU_BF16"
CACHE_FILE = "precision.json"
# bf16 must beat fp32 by this much: a tie is not worth bf16's coarser vectors
MARGIN = 0.95


@dataclass(frozen=True)
class Probe:
    """Seconds of the same work in fp32 and under bf16 autocast (the fastest of a few rounds)."""

    matmul_fp32: float
    matmul_bf16: float
    forward_fp32: float | None  # None: not run, bf16 matmuls were already far slower
    forward_bf16: float | None
    steady: bool = True  # False: rounds varied widely (a busy machine); not worth caching

    @property
    def bf16(self) -> bool:
        """Whether bf16 is the faster choice: the encoder forward decides, as it is the real work."""
        if self.forward_fp32 is None or self.forward_bf16 is None:
            return False
        return self.forward_bf16 < MARGIN * self.forward_fp32

    def summary(self) -> str:
        parts = [f"matmul fp32 {self.matmul_fp32 * 1e3:.1f} ms, bf16 {self.matmul_bf16 * 1e3:.1f} ms"]
        if self.forward_fp32 is not None:
            parts.append(f"encoder forward fp32 {self.forward_fp32 * 1e3:.1f} ms, bf16 {self.forward_bf16 * 1e3:.1f} ms")
        else:
            parts.append("encoder forward not timed (bf16 matmuls over 1.5x slower)")
        if not self.steady:
            parts.append("rounds varied widely, as on a busy machine")
        return "; ".join(parts)


def cpu_key() -> str:
    """What the measurement depends on: the CPU model, the threads torch uses and torch's version."""
    import torch

    return f"{cpu_model()} | {torch.get_num_threads()} threads | torch {torch.__version__}"


def cpu_model() -> str:
    """The model name with family/model/stepping and the bf16-related flags: cloud VMs name very
    different CPUs alike (2 cores of a Zen 3 and of a Zen 4 both read "AMD EPYC")."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor is enough
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    if "model name" not in fields:
        return platform.processor() or platform.machine() or "unknown CPU"
    flags = sorted(set(fields.get("flags", "").split()) & BF16_FLAGS)
    where = "/".join(fields.get(k, "?") for k in ("cpu family", "model", "stepping"))
    return f"{fields['model name']} ({where}; {' '.join(flags) or 'no bf16/avx512 flags'})"


BF16_FLAGS = {"avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "avx512_vnni", "avx_vnni"}

# a round this much slower than the fastest of its kind means something else took the CPU
STEADY = 1.5


def measure(rounds: int = 5) -> Probe:
    """Time a matmul, then (unless bf16 is already far behind) a 2-layer BERT-shaped forward;
    fp32 and bf16 rounds alternate, so load from elsewhere falls on both alike."""
    import torch

    steady = True

    def fastest(run: Callable[[], Any]) -> tuple[float, float]:
        nonlocal steady
        times: dict[bool, list[float]] = {False: [], True: []}
        with torch.inference_mode():
            for i in range(rounds + 1):
                for cast in (False, True):
                    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cast):
                        start = time.perf_counter()
                        run()
                        if i:  # round 0 warms up: kernel selection, allocation
                            times[cast].append(time.perf_counter() - start)
        for samples in times.values():
            steady = steady and sorted(samples)[len(samples) // 2] <= STEADY * min(samples)
        return min(times[False]), min(times[True])

    generator = torch.Generator().manual_seed(0)
    a = torch.randn(256, 384, generator=generator)
    b = torch.randn(384, 1536, generator=generator)
    matmul_fp32, matmul_bf16 = fastest(lambda: a @ b)
    if matmul_bf16 > 1.5 * matmul_fp32:
        return Probe(matmul_fp32, matmul_bf16, None, None, steady)
    encoder = tiny_encoder().eval()
    tokens = torch.randn(8, 64, 384, generator=generator)
    mask = torch.ones(8, 1, 1, 64, dtype=torch.bool)
    forward_fp32, forward_bf16 = fastest(lambda: encoder(tokens, mask))
    return Probe(matmul_fp32, matmul_bf16, forward_fp32, forward_bf16, steady)


def tiny_encoder() -> Any:
    """Two layers shaped like MiniLM's (384 wide, 12 heads, 1536 feed-forward), built from the
    same operations transformers' BERT runs: linear projections, SDPA, GELU, LayerNorm."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.out = nn.Linear(384, 3 * 384), nn.Linear(384, 384)
            self.up, self.down = nn.Linear(384, 1536), nn.Linear(1536, 384)
            self.norm1, self.norm2 = nn.LayerNorm(384), nn.LayerNorm(384)

        def forward(self, x, mask):
            n, t, _ = x.shape
            q, k, v = self.qkv(x).view(n, t, 3, 12, 32).permute(2, 0, 3, 1, 4)
            attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).reshape(n, t, 384)
            x = self.norm1(x + self.out(attended))
            return self.norm2(x + self.down(F.gelu(self.up(x))))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([Layer(), Layer()])

        def forward(self, x, mask):
            for layer in self.layers:
                x = layer(x, mask)
            return x

    with torch.random.fork_rng():  # the caller's random state is not touched
        torch.manual_seed(0)
        return Encoder()


def cache_path() -> Path:
    from structret.artifacts import cache_dir

    return cache_dir() / CACHE_FILE


def cpu_bf16(*, run_probe: Callable[[], Probe] | None = None, path: Path | None = None) -> bool:
    """Whether ``dtype=auto`` encodes (and trains) under bf16 on this CPU: the override, else the
    cached measurement, else a new one (logged, and cached for the next process)."""
    forced = os.environ.get(CPU_BF16_ENV, "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    path = path or cache_path()
    key = cpu_key()
    known = _read(path)
    if key in known and isinstance(known[key].get("bf16"), bool):
        return known[key]["bf16"]
    probe = (run_probe or measure)()
    if not probe.steady:  # a choice made under load is used once, not kept
        log.warning("dtype=auto on %s: %s for this process, measured on a busy machine (%s); not cached, so the "
                    "next run measures again. Force it with dtype=fp32 or dtype=bf16.", key,
                    "bf16" if probe.bf16 else "fp32", probe.summary())
        return probe.bf16
    log.info("dtype=auto on %s: %s, measured (%s); cached in %s", key, "bf16" if probe.bf16 else "fp32",
             probe.summary(), path)
    known[key] = {"bf16": probe.bf16, **asdict(probe)}
    _write(path, known)
    return probe.bf16


def _read(path: Path) -> dict[str, Any]:
    try:
        known = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:  # a damaged cache costs one probe, nothing else
        log.warning("%s is unreadable (%s); measuring again and rewriting it", path, exc)
        return {}
    return known if isinstance(known, dict) else {}


def _write(path: Path, known: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False,
                                         encoding="utf-8") as f:
            json.dump(known, f, indent=2)
        os.replace(f.name, path)
    except OSError as exc:  # a read-only home: the choice holds for this process, the next measures again
        log.warning("could not cache the precision choice in %s (%s)", path, exc)
