"""What an export is checked on: sample texts, cosine to the original vectors, and speed."""

from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np

FP32_COSINE = 0.9999
INT8_COSINE = 0.99

SAMPLE_QUERIES = [
    "read a configuration file",
    "parse an ISO date string",
    "send an email through an SMTP server",
    "sort a list of numbers in ascending order",
    "count how often each word occurs",
    "join path parts with the system separator",
    "red running shoes for men",
    "x",
]
SAMPLE_DOCUMENTS = [
    "def read_config(path):\n    with open(path) as f:\n        return dict(line.split('=', 1) for line in f)",
    "def parse_date(text):\n    \"\"\"Parse an ISO date string.\"\"\"\n    return tuple(int(x) for x in text.split('-'))",
    "def send_mail(server, message):\n    server.sendmail(message)\n    server.quit()",
    "def sort_numbers(items):\n    return sorted(items)",
    "Count how often each word occurs in a text. " * 40,  # past max_length: truncation must match
    "import os\nos.path.join(*parts)",
    "Nike Air Zoom Pegasus, running shoe, red, men's size 44",
    "",
]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine; two zero rows count as identical."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    both_zero = (na == 0) & (nb == 0)
    cos = (a * b).sum(axis=1) / np.maximum(na * nb, 1e-30)
    return np.where(both_zero, 1.0, cos)


def texts_per_second(encode: Callable[[Sequence[str]], object], texts: Sequence[str], *,
                     min_seconds: float = 1.0) -> float:
    """Encoding speed after one warm-up call, repeated until ``min_seconds`` have passed."""
    encode(texts)
    done, start = 0, time.perf_counter()
    while True:
        encode(texts)
        done += len(texts)
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return done / elapsed
