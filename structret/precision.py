"""Which precision ``dtype=auto`` means on this machine: measured on the model, not read off a CPU flag.

A CPU flag says bf16 instructions exist, not that bf16 is faster: on one 2-core Xeon with
AVX512-BF16 fp32 matmuls ran at 328 GFLOP/s and bf16 at 168, on an AMX Xeon bf16 runs ~4x
fp32, and without the flags bf16 is emulated, ~18x slower (docs/performance.md). So ``auto``
times the candidates on the model itself, a forward of a few probe texts:

- ``fp32``;
- ``bf16``: autocast, the weights stay fp32 and each matmul casts them;
- ``bf16-weights``: an inference copy of the weights cast to bfloat16 (no per-call casts;
  pooling and normalization still in fp32),

keeps only those whose vectors stay within cosine ``COSINE`` of fp32's on the probe texts,
and picks the fastest, a bf16 one only when it beats fp32 by the ``MARGIN``.

A timing depends on the load of the moment: on a busy AMX machine bf16 can lose to fp32
(8 KB of tile state per thread), and one probe cached while a pip install ran once pinned a
path 2.7x slower than the machine gives. Two rules keep a busy moment from deciding:

1. The cache keeps, per candidate, the *fastest time ever seen*: load only adds time, so the
   fastest is the best estimate of the quiet machine, and a probe taken under load cannot
   replace a quiet one.
2. Every process re-checks cheaply before trusting the cache: two small matmuls (fp32, bf16),
   ~20 ms on a 2-core AMX Xeon. If either is clearly faster now (``RECHECK``) than the fastest the
   cache has seen, the cached probe ran under more load than there is now, and the forward is
   timed again; the new times fold into rule 1. A probe taken busy is thus replaced by the
   first quiet process, and a busy process never overrides a quiet probe.

Where bf16 matmuls were measured ``EMULATED`` times slower than fp32 (no bf16 hardware) the
re-check times fp32 only, so such machines never pay for emulated bf16 again. Timings are cached per CPU
(model, family/model/stepping and its bf16 flags), torch threads, torch version and model
shape in ``STRUCTRET_CACHE/precision.json``; the cosines per model. ``dtype=fp32|bf16|
bf16-weights`` skip all this; ``STRUCTRET_CPU_BF16=0|1`` (or a candidate's name) overrides
it (the tests pin 0, so they never depend on the CPU they run on).
"""

from __future__ import annotations

import json
import logging
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from structret.artifacts import cache_dir

log = logging.getLogger("structret.precision")

CPU_BF16_ENV = "STRUCTRET_CPU_BF16"
CACHE_FILE = "precision.json"
VERSION = 2  # version 1 kept one choice per CPU, the flaw above; its entries are ignored
CANDIDATES = ("fp32", "bf16", "bf16-weights")
# a bf16 candidate must beat fp32 by this much: a tie is not worth bf16's coarser vectors
MARGIN = 0.95
# and keep the vectors this close to fp32's (minimum cosine over the probe texts)
COSINE = 0.999
# a matmul this much faster now than the fastest the cache has seen: the cache was measured busy
RECHECK = 0.67
# bf16 matmuls this much slower than fp32: emulated, no forward in bf16 is worth timing
EMULATED = 4.0
# bf16 matmuls this much slower right now: the forward is not timed in bf16 this time
HOPELESS = 1.5
ROUNDS = 3
# bf16 matmuls at most this fraction of fp32's time: worth scoring search candidates in bf16
BF16_SCORING = 0.5
SOURCES_KEPT = 64  # cosines are per model: keep the file small

# what the cosine guard is measured on: code, docstrings, queries and a product record, as encoded
PROBE_TEXTS = (
    "def read_config(path, defaults=None):\n    \"\"\"Load a TOML file and merge it over the defaults.\"\"\"\n"
    "    with open(path, 'rb') as f:\n        data = tomllib.load(f)\n    return {**(defaults or {}), **data}",
    "public static int binarySearch(int[] values, int key) {\n    int low = 0, high = values.length - 1;\n"
    "    while (low <= high) { int mid = (low + high) >>> 1; if (values[mid] < key) low = mid + 1;\n"
    "    else if (values[mid] > key) high = mid - 1; else return mid; }\n    return -(low + 1);\n}",
    "func (s *Server) handle(w http.ResponseWriter, r *http.Request) {\n\tif r.Method != http.MethodPost {\n"
    "\t\thttp.Error(w, \"method not allowed\", 405)\n\t\treturn\n\t}\n\ts.queue <- r.URL.Query().Get(\"job\")\n}",
    "function debounce(fn, wait) { let timer; return (...args) => { clearTimeout(timer);"
    " timer = setTimeout(() => fn.apply(this, args), wait); }; }",
    "Return the number of seconds since the epoch as a float, rounded to microseconds.",
    "how to merge two sorted lists in python without extra memory",
    "[title] stainless steel chef knife 8 inch [brand] Victorinox [color] black [category] kitchen > cutlery",
    "SELECT name, COUNT(*) AS n FROM orders o JOIN customers c ON c.id = o.customer_id GROUP BY name HAVING n > 5",
)

Forward = Callable[[str], Any]  # a candidate's name -> the probe texts' vectors [n, dim] (a torch tensor)


def cpu_key() -> str:
    """What a timing depends on besides the model: the CPU model, torch's threads and version."""
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


def forced() -> str | None:
    """The candidate ``STRUCTRET_CPU_BF16`` names (0 = fp32, 1 = bf16 autocast), or None."""
    value = os.environ.get(CPU_BF16_ENV, "").strip()
    named = {"0": "fp32", "1": "bf16", **{c: c for c in CANDIDATES}}
    return named.get(value)


def pick(forward: dict[str, float], cosine: dict[str, float]) -> str:
    """The fastest candidate whose vectors stay close to fp32's; a bf16 one must beat fp32 by MARGIN."""
    best = "fp32"
    if "fp32" not in forward:
        return best
    for name in CANDIDATES[1:]:
        if name not in forward or cosine.get(name, 0.0) < COSINE:
            continue
        if forward[name] < MARGIN * forward["fp32"] and forward[name] < forward[best]:
            best = name
    return best


# --- timing (tests replace these two with given timings) ---------------------------------------


def time_matmul(kinds: Sequence[str], rounds: int = ROUNDS) -> dict[str, float]:
    """Fastest seconds of a feed-forward-shaped matmul (256 x 384 @ 384 x 1536) per kind, alternated."""
    import torch

    generator = torch.Generator().manual_seed(0)
    a = torch.randn(256, 384, generator=generator)
    b = torch.randn(384, 1536, generator=generator)
    operands = {"fp32": (a, b), "bf16": (a.bfloat16(), b.bfloat16())}
    times: dict[str, list[float]] = {k: [] for k in kinds}
    with torch.inference_mode():
        for i in range(rounds + 1):
            for kind in kinds:
                x, y = operands[kind]
                start = time.perf_counter()
                x @ y
                if i:  # round 0 warms up: kernel selection, allocation
                    times[kind].append(time.perf_counter() - start)
    return {k: min(v) for k, v in times.items()}


def time_forward(run: Forward, kinds: Sequence[str], rounds: int = ROUNDS) -> tuple[dict[str, float], dict[str, Any]]:
    """Fastest seconds of ``run(kind)`` per kind, rounds alternating so load falls on all alike,
    and each kind's vectors. A kind that fails is left out (logged): it cannot be chosen."""
    times: dict[str, list[float]] = {}
    outputs: dict[str, Any] = {}
    live = list(kinds)
    for i in range(rounds + 1):
        for kind in list(live):
            start = time.perf_counter()
            try:
                outputs[kind] = run(kind)
            except Exception as exc:  # noqa: BLE001 - a model this precision cannot run is simply not chosen
                log.info("dtype=auto: %s does not run on this model (%s: %s); left out", kind, type(exc).__name__, exc)
                live.remove(kind)
                outputs.pop(kind, None)
                continue
            if i:
                times.setdefault(kind, []).append(time.perf_counter() - start)
    return {k: min(v) for k, v in times.items() if k in live}, outputs


def cosines(outputs: dict[str, Any]) -> dict[str, float]:
    """Each candidate's worst cosine to fp32's vectors on the probe texts."""
    import torch.nn.functional as F

    reference = F.normalize(outputs["fp32"].float(), dim=-1)
    return {kind: float((F.normalize(vectors.float(), dim=-1) * reference).sum(-1).min())
            for kind, vectors in outputs.items() if kind != "fp32"}


# --- the choice -------------------------------------------------------------------------------

_chosen: dict[tuple[str, str], str] = {}  # once per process and model: the re-check is per process


def choose(run: Forward, *, shape: str, source: str, candidates: Sequence[str] = CANDIDATES,
           path: Path | None = None) -> str:
    """The candidate ``dtype=auto`` means for a model of ``shape`` (its config's sizes) loaded from
    ``source`` on this CPU: the override, else the cache re-checked as the module docstring says."""
    named = forced()
    if named is not None:
        return named if named in candidates else "fp32"
    path = path or cache_path()
    key = f"{cpu_key()} | {shape}"
    if (key, source) in _chosen:
        return _chosen[(key, source)]
    known = _read(path)
    entry = known.get(key) or {}
    matmul, now, emulated = _recheck(entry.get("matmul") or {})
    quieter = [k for k, s in now.items() if k not in matmul or s < RECHECK * matmul[k]]
    forward = dict(entry.get("forward") or {})
    seen = dict((entry.get("cosine") or {}).get(source) or {})
    wanted = [c for c in candidates if c != "fp32"]
    why, timed = "", False
    if not entry or quieter:
        hopeless = "bf16" in now and now["bf16"] > HOPELESS * now["fp32"]
        kinds = ["fp32"] if emulated or hopeless else ["fp32", *wanted]
        times, outputs = time_forward(run, kinds)
        forward = _fastest(forward, times)
        seen.update(cosines(outputs) if len(outputs) > 1 else {})
        matmul = _fastest(matmul, now)
        timed = True
        why = ("first measurement" if not entry else
               f"matmuls now faster than the cache had seen ({', '.join(quieter)}): measured again")
    elif any(c not in seen for c in wanted if c in forward):
        # a new model of a known shape: its timings are known, its vectors' closeness is not
        _, outputs = time_forward(run, ["fp32", *[c for c in wanted if c in forward]], rounds=0)
        seen.update(cosines(outputs) if len(outputs) > 1 else {})
        why = "new model: cosines measured"
    chosen = pick({k: v for k, v in forward.items() if k in candidates}, seen)
    if why:
        entry = {"matmul": matmul, "forward": forward, "probes": int(entry.get("probes", 0)) + timed,
                 "cosine": _keep_last({**(entry.get("cosine") or {}), source: seen})}
        known[key] = entry
        log.info("dtype=auto on %s: %s (%s; %s); cached in %s", key, chosen, why, summary(entry, source), path)
        _write(path, known)
    _chosen[(key, source)] = chosen
    return chosen


def summary(entry: dict[str, Any], source: str) -> str:
    """The timings behind a choice, as a log line reads them."""
    ms = lambda d: ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in d.items())  # noqa: E731
    parts = [f"matmul {ms(entry.get('matmul') or {})}", f"forward {ms(entry.get('forward') or {})}"]
    cos = (entry.get("cosine") or {}).get(source) or {}
    if cos:
        parts.append("min cos to fp32 " + ", ".join(f"{k} {v:.5f}" for k, v in cos.items()))
    return "; ".join(parts)


def _recheck(matmul: dict[str, float]) -> tuple[dict[str, float], dict[str, float], bool]:
    """(the cached matmul times, this process's, whether bf16 was seen emulated): the per-process
    re-check, of fp32 alone where bf16 is emulated (timing it there costs ~50 ms)."""
    emulated = _ratio(matmul) >= EMULATED
    return dict(matmul), time_matmul(("fp32",) if emulated else ("fp32", "bf16")), emulated


def _fastest(*timings: dict[str, float]) -> dict[str, float]:
    """Per kind, the fastest of the given timings: load only adds time, so that is the quiet machine's."""
    out: dict[str, float] = {}
    for times in timings:
        for kind, seconds in times.items():
            out[kind] = min(seconds, out.get(kind, seconds))
    return out


def _ratio(matmul: dict[str, float]) -> float:
    return matmul["bf16"] / matmul["fp32"] if "bf16" in matmul and matmul.get("fp32") else 0.0


def _keep_last(cos: dict[str, Any]) -> dict[str, Any]:
    return dict(list(cos.items())[-SOURCES_KEPT:])


def bf16_matmul_faster(*, path: Path | None = None) -> bool:
    """Whether bf16 matmuls run at least twice as fast as fp32 here (exact flat search scores candidates
    in bf16 then: it pays only when the product's saving beats re-scoring the candidates). The same
    rules as ``choose``: the fastest times ever seen, re-checked once per process."""
    named = forced()
    if named is not None:
        return named != "fp32"
    key = f"{cpu_key()} | matmul"
    if (key, "") in _chosen:
        return _chosen[(key, "")] == "bf16"
    path = path or cache_path()
    known = _read(path)
    seen, now, _ = _recheck((known.get(key) or {}).get("matmul") or {})
    matmul = _fastest(seen, now)
    if matmul != seen:
        known[key] = {"matmul": matmul}
        _write(path, known)
    faster = 0 < _ratio(matmul) <= BF16_SCORING
    _chosen[(key, "")] = "bf16" if faster else "fp32"
    return faster


# --- training: autocast or not, with no model at hand ------------------------------------------


def autocast_faster() -> bool:
    """Whether bf16 autocast is the faster way to train on this CPU: ``choose`` on a 2-layer
    encoder shaped like MiniLM's (training keeps fp32 weights, so bf16-weights is no candidate)."""
    import torch

    encoder = tiny_encoder().eval()
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randn(8, 64, 384, generator=generator)
    mask = torch.ones(8, 1, 1, 64, dtype=torch.bool)

    def run(kind: str) -> Any:
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=kind == "bf16"):
            return encoder(tokens, mask)[:, 0].float()

    return choose(run, shape="2-layer 384/1536 probe encoder", source="probe encoder",
                  candidates=("fp32", "bf16")) == "bf16"


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


# --- the cache file ---------------------------------------------------------------------------


def cache_path() -> Path:
    return cache_dir() / CACHE_FILE


def _read(path: Path) -> dict[str, Any]:
    try:
        known = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:  # a damaged cache costs one probe, nothing else
        log.warning("%s is unreadable (%s); measuring again and rewriting it", path, exc)
        return {}
    if not isinstance(known, dict) or known.get("version") != VERSION or not isinstance(known.get("entries"), dict):
        return {}  # an older structret's choices: measured again, not trusted
    return {k: v for k, v in known["entries"].items() if isinstance(v, dict)}


def _write(path: Path, known: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False,
                                         encoding="utf-8") as f:
            json.dump({"version": VERSION, "entries": known}, f, indent=2)
        os.replace(f.name, path)
    except OSError as exc:  # a read-only home: the choice holds for this process, the next measures again
        log.warning("could not cache the precision choice in %s (%s)", path, exc)
