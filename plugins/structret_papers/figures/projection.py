"""Embeddings projected to two dimensions for SANTA's Figure 4: t-SNE (scikit-learn) or UMAP
(umap-learn), both imported only when used (the ``plots`` extra installs them)."""

from __future__ import annotations

import warnings

from structret.errors import StructretError

PROJECTIONS = ("tsne", "umap")


def project(vectors, method: str = "tsne", *, seed: int = 0):
    """2-D coordinates of ``vectors`` with t-SNE (scikit-learn) or UMAP (umap-learn), on cosine
    distance (how the models score), with a fixed random state."""
    import numpy as np

    vectors = np.asarray(vectors, dtype=np.float32)
    n = len(vectors)
    if method == "tsne":
        try:
            from sklearn.manifold import TSNE  # scikit-learn: the plots extra, loaded for t-SNE only
        except ImportError:
            raise StructretError(_install("scikit-learn", "t-SNE")) from None
        # perplexity must stay below the number of points; 30 is scikit-learn's default
        perplexity = float(min(30.0, max(2.0, (n - 1) / 3)))
        return TSNE(n_components=2, perplexity=min(perplexity, n - 1.0), metric="cosine", init="pca",
                    random_state=seed).fit_transform(vectors)
    if method == "umap":
        try:
            import umap  # umap-learn: the plots extra, loaded for UMAP only
        except ImportError:
            raise StructretError(_install("umap-learn", "UMAP")) from None
        reducer = umap.UMAP(n_components=2, n_neighbors=min(15, n - 1), metric="cosine", random_state=seed)
        with warnings.catch_warnings():
            # a fixed random_state makes UMAP run on one thread, and it warns about that each time
            warnings.filterwarnings("ignore", message="n_jobs value", category=UserWarning)
            return reducer.fit_transform(vectors)
    raise StructretError(f"projection {method!r}: use one of {', '.join(PROJECTIONS)}.")


def _install(package: str, what: str) -> str:
    return f"{what} needs {package}: pip install 'structret[plots]' (or pip install {package})."
