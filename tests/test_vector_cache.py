"""Encoded vectors kept between runs: reused only for the same model, settings and text."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from _tiny_models import tiny_bert_dir  # noqa: F401  (fixture)

from structret.bench import run_bench
from structret.search.system import DenseRetriever, make_retriever
from test_bench import code_dataset  # noqa: E402  (the synthetic code-search set)
from structret.vector_cache import VectorCache, cache_key

TEXTS = ["def add(a, b): return a + b", "read a file", "x", "def add(a, b): return a + b", ""]


class Counting:
    """An encoder that records what it was asked to encode."""

    def __init__(self):
        self.calls: list[list[str]] = []

    def __call__(self, texts):
        self.calls.append(list(texts))
        return np.array([[len(t), t.count("a"), 1.0] for t in texts], dtype=np.float32).reshape(len(texts), 3)


def test_only_texts_not_seen_before_are_encoded_and_order_is_kept(tmp_path):
    first = Counting()
    vectors = VectorCache(tmp_path, "k").encode(TEXTS, first)
    assert first.calls == [["def add(a, b): return a + b", "read a file", "x", ""]]  # duplicates once
    np.testing.assert_array_equal(vectors, Counting()(TEXTS))
    again = Counting()
    cache = VectorCache(tmp_path, "k")  # a new process: read from disk
    np.testing.assert_array_equal(cache.encode(TEXTS[::-1] + ["new text"], again), Counting()(TEXTS[::-1] + ["new text"]))
    assert again.calls == [["new text"]]
    assert cache.encoded == 1 and cache.reused == len(TEXTS)
    assert VectorCache(tmp_path, "other key").encode(["x"], again).shape == (1, 3) and again.calls[-1] == ["x"]


def test_a_damaged_part_is_dropped_counted_and_encoded_again(tmp_path, caplog):
    VectorCache(tmp_path, "k").encode(TEXTS, Counting())
    (part,) = (tmp_path / "vectors" / "k").glob("part-*.npz")
    data = bytearray(part.read_bytes())
    data[-20] ^= 0xFF
    part.write_bytes(bytes(data))
    encoder = Counting()
    cache = VectorCache(tmp_path, "k")
    with caplog.at_level(logging.WARNING, logger="structret.vector_cache"):
        np.testing.assert_array_equal(cache.encode(TEXTS, encoder), Counting()(TEXTS))
    assert len(encoder.calls) == 1 and cache.damaged == [part.name] and "do not match the checksum" in caplog.text
    assert "1 damaged cache part(s) removed" in cache.summary()


def test_the_key_separates_kinds_and_text_formats():
    keys = {cache_key("m", "query"), cache_key("m", "document"), cache_key("m", "document", "aspects"),
            cache_key("n", "query")}
    assert len(keys) == 4


def test_a_backbones_fingerprint_follows_its_weights_and_settings(tiny_bert_dir):
    from structret.registry import get_registry

    registry = get_registry()
    a = registry.create("backbone", "hf-encoder", model=str(tiny_bert_dir), max_length=32)
    b = registry.create("backbone", "hf-encoder", model=str(tiny_bert_dir), max_length=32)
    assert a.fingerprint() == b.fingerprint()
    assert registry.create("backbone", "hf-encoder", model=str(tiny_bert_dir), max_length=16).fingerprint() != a.fingerprint()
    assert registry.create("backbone", "hf-encoder", model=str(tiny_bert_dir), max_length=32,
                           query_prefix="q: ").fingerprint() != a.fingerprint()
    before = a.fingerprint()
    with torch.no_grad():  # one step of training changes one weight a little
        next(a.model.parameters()).view(-1)[0] += 1e-3
    assert a.fingerprint() != before


def test_a_second_bench_encodes_nothing_and_scores_the_same(tmp_path, tiny_bert_dir, monkeypatch):
    from structret.search.system import System

    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path))
    dataset = code_dataset(40)
    made = []
    build = System.retriever

    def make(system, **kwargs):  # the hf-encoder system, on the tiny model
        made.append(build(system, model=str(tiny_bert_dir), **kwargs))
        return made[-1]

    monkeypatch.setattr(System, "retriever", make)
    first = run_bench(dataset, ["hf-encoder"], show_progress=False).rows["hf-encoder"]
    assert made[-1].caches["document"].encoded == 40 and made[-1].caches["query"].encoded == 40
    second = run_bench(dataset, ["hf-encoder"], show_progress=False).rows["hf-encoder"]
    assert made[-1].caches["document"].encoded == 0 and made[-1].caches["query"].encoded == 0
    assert made[-1].caches["document"].reused == 40
    scores = {k: v for k, v in first.items() if k != "seconds"}
    assert scores and {k: v for k, v in second.items() if k != "seconds"} == scores
    # switched off: nothing read, nothing kept
    third = run_bench(dataset, ["hf-encoder"], show_progress=False, vector_cache=False).rows["hf-encoder"]
    assert made[-1].caches == {} and {k: v for k, v in third.items() if k != "seconds"} == scores


def test_a_backbone_without_a_fingerprint_is_never_cached(tmp_path):
    class Plain:
        name, dim = "plain", 3

        def encode(self, texts, *, kind="document", batch_size=32, show_progress=False):
            return Counting()(texts)

    retriever = DenseRetriever(Plain(), cache=tmp_path)
    retriever.fit(["a", "b"])
    assert retriever.caches == {} and retriever.cache_summary() is None and not (tmp_path / "vectors").exists()
