"""How texts are cut into batches for encoding, shared by the torch and onnxruntime encoders.

Padding is most of the waste on CPU: texts are taken longest first, and a batch holds up to
a budget of padded tokens rather than a fixed count of texts, so short texts (queries) go many
to a forward and the matrix products stay big enough to reach the CPU's rate.
"""

from __future__ import annotations

from typing import Iterator, Sequence

WINDOW = 4096  # texts tokenized at once, then re-sorted by token count: memory stays bounded
PAD_TO = 8  # padding to a multiple of 8 suits GPU kernels and costs a CPU almost nothing


def token_batches(lengths: Sequence[int], budget: int) -> Iterator[tuple[int, int]]:
    """``(first, last)`` slices of ``lengths`` (sorted longest first) holding at most ``budget``
    tokens each once padded to their first (longest) text, and at least one text."""
    first = 0
    while first < len(lengths):
        padded = -(-max(lengths[first], 1) // PAD_TO) * PAD_TO
        last = min(len(lengths), first + max(1, budget // padded))
        yield first, last
        first = last
