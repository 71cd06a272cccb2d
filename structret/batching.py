"""How texts are cut into batches for encoding, shared by the torch and onnxruntime encoders.

Padding is most of the waste on CPU: texts are taken longest first, and a batch holds up to
a budget of padded tokens rather than a fixed count of texts, so short texts (queries) go many
to a forward and the matrix products stay big enough to reach the CPU's rate (on a CPU, not so
big that their activations leave the cache).
"""

from __future__ import annotations

from typing import Iterator, Sequence

WINDOW = 4096  # texts tokenized at once, then re-sorted by token count: memory stays bounded
PAD_TO = 8  # padding to a multiple of 8 suits GPU kernels and costs a CPU almost nothing
# A CPU forward is fastest at 1-4k tokens: MiniLM on 2 Zen 3 cores ran 5,400-5,900 tokens/s at 1-2k
# and 3,800-5,300 at 8k (benchmarks/bench_batch_tokens.py); bigger activations leave the cache.
CPU_TOKENS = 2048


def budget(batch_size: int, max_length: int, device_type: str) -> int:
    """Padded tokens a batch may hold: ``batch_size`` texts of ``max_length``, capped on CPU."""
    tokens = batch_size * max_length
    return min(tokens, CPU_TOKENS) if device_type == "cpu" else tokens


def token_batches(lengths: Sequence[int], budget: int, max_rows: int | None = None) -> Iterator[tuple[int, int]]:
    """``(first, last)`` slices of ``lengths`` (sorted longest first) holding at most ``budget``
    tokens each once padded to their first (longest) text, at most ``max_rows`` texts, and at
    least one text."""
    first = 0
    while first < len(lengths):
        padded = -(-max(lengths[first], 1) // PAD_TO) * PAD_TO
        rows = budget // padded if max_rows is None else min(max_rows, budget // padded)
        last = min(len(lengths), first + max(1, rows))
        yield first, last
        first = last
