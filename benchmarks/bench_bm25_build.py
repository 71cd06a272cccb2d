"""Building a BM25 index: bm25s' own build (the peer) against structret's build from term counts.

structret's BM25 keeps each document's term counts so that an update reads only what changed
(``structret_lexical/term_counts.py``); a fit builds the score matrix from those counts with numpy.
Timed in one process, in turns, on the ``code`` field of the first ``--n`` rows of CodeSearchNet
files: the ``bm25`` retriever's ``fit`` (tokenizing included) against tokenizing the same way and
handing the tokens to ``bm25s.BM25.index`` with the same settings; the two score a query alike
(checked). Tokenizing alone is timed too, so the builds can be read apart from it. ::

    python benchmarks/bench_bm25_build.py --data '/work/data/code/ablation/*.jsonl.gz' --n 5500
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import statistics
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="CodeSearchNet .jsonl.gz files (a glob)")
    parser.add_argument("--n", type=int, default=5500, help="documents")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    import bm25s

    from structret.registry import get_registry

    texts: list[str] = []
    for path in sorted(glob.glob(args.data)):
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            texts += [json.loads(line)["code"] for line, _ in zip(lines, range(args.n - len(texts)))]
    ours = get_registry().create("retriever", "bm25")
    settings = {"k1": ours.k1, "b": ours.b, "method": ours.method}

    def tokenize():
        return [ours.tokenize(text) for text in texts]

    def peer():
        model = bm25s.BM25(**settings)
        model.index(tokenize(), show_progress=False)
        return model

    timed: dict[str, list[float]] = {"tokenizing alone": [], "bm25s' own build (peer)": [],
                                     "structret bm25 fit (counts, numpy)": []}
    models = {}
    for _ in range(args.rounds):
        for name, run in zip(timed, (tokenize, peer, lambda: ours.fit(texts))):
            started = time.perf_counter()
            models[name] = run()
            timed[name].append(time.perf_counter() - started)
    query = " ".join(texts[0].split()[:8])
    want = models["bm25s' own build (peer)"].get_scores(ours.tokenize(query))
    assert np.allclose(ours.score([query])[0], want, rtol=1e-6, atol=0), "the two builds score differently"
    median = {name: statistics.median(seconds) for name, seconds in timed.items()}
    peer_s, tokens_s = median["bm25s' own build (peer)"], median["tokenizing alone"]
    print(f"{len(texts)} documents; medians of {args.rounds}, in turns (seconds; build = total - tokenizing)")
    for name, seconds in median.items():
        extra = "" if name == "tokenizing alone" else (
            f"   build {seconds - tokens_s:6.3f} s, {(peer_s - tokens_s) / (seconds - tokens_s):5.2f}x the peer's")
        print(f"{name:<36} {seconds:7.3f} s{extra}")


if __name__ == "__main__":
    main()
