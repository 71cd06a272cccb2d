"""Many vectors shaped like a smaller real sample, for ANN at a scale that cannot be encoded here.

Encoding 1M functions with MiniLM takes hours on 2 cores; an ANN benchmark needs the vectors' shape
(how their variance spreads over directions, how close neighbours are), not their meaning. Each
vector made here is a real one (drawn at random from ``--real``, folders of ``vectors.npy``) plus
Gaussian noise with the real sample's own covariance scaled by ``--spread``, renormalized: the
sample's spectrum kept, and each real vector the centre of a small cloud. ``--spread`` is chosen by
``--calibrate``: the real sample itself and made vectors of the same size, searched by the same
queries in bench_ann.py, should give the same recall at each beam width. ::

    python benchmarks/data/like_real_vectors.py --real /work/data/code/projects-index \\
        --queries /work/cache/vectors/QUERY_KEY --n 1000000 --spread 0.5 --out /work/data/ann/like-real-1m.npz
    python benchmarks/data/like_real_vectors.py ... --n 0 --out real.npz   # the real sample itself
"""

from __future__ import annotations

import argparse
import glob
import io
import os

import numpy as np


def real_vectors(root: str) -> np.ndarray:
    files = sorted(glob.glob(os.path.join(root, "**", "vectors.npy"), recursive=True))
    return np.concatenate([np.load(f) for f in files]).astype(np.float32)


def cached_vectors(folder: str) -> np.ndarray:
    parts = []
    for part in sorted(glob.glob(os.path.join(folder, "part-*.npz"))):
        with np.load(io.BytesIO(open(part, "rb").read())) as stored:
            parts.append(stored["vectors"])
    return np.concatenate(parts).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real", required=True, help="a folder searched for vectors.npy files (index folders)")
    parser.add_argument("--queries", required=True, help="a STRUCTRET_CACHE vectors folder of query vectors")
    parser.add_argument("--n", type=int, default=1_000_000, help="vectors to make; 0: the real sample as it is")
    parser.add_argument("--spread", type=float, default=0.5, help="the noise's scale against the real covariance")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    real = real_vectors(args.real)
    queries = cached_vectors(args.queries)
    if args.n == 0:
        docs, how = real, f"{len(real):,} real MiniLM vectors of functions ({args.real})"
    else:
        rng = np.random.default_rng(args.seed)
        centred = real - real.mean(axis=0)
        # the covariance's square root from the sample's SVD: noise @ (S / sqrt(n)) Vt has its covariance
        _, s, vt = np.linalg.svd(centred, full_matrices=False)
        root = (s[:, None] / np.sqrt(len(real))) * vt
        docs = np.empty((args.n, real.shape[1]), dtype=np.float32)
        for start in range(0, args.n, 100_000):
            rows = min(100_000, args.n - start)
            made = real[rng.integers(len(real), size=rows)] + args.spread * (
                rng.standard_normal((rows, real.shape[1]), dtype=np.float32) @ root)
            docs[start:start + rows] = made / np.linalg.norm(made, axis=1, keepdims=True)
        how = (f"{args.n:,} vectors like {len(real):,} real MiniLM function vectors (a real one + {args.spread} x "
               f"noise of their covariance)")
    np.savez(args.out, docs=docs, queries=queries, model=how)
    print(f"{args.out}: {how}; {len(queries):,} real query vectors")


if __name__ == "__main__":
    main()
