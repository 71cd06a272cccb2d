"""structret: structure-aware dense retrieval, assembled from named plugins.

The Python API (docs/api.md) is imported on first use, so ``import structret`` stays
fast and loads neither torch nor numpy.
"""

from structret.hookspecs import hookimpl

_API = ("EncodeResult", "Hit", "Model", "Run", "SearchIndex", "build_index", "encode_dataset", "evaluate",
        "index_embeddings", "load_dataset", "load_index", "load_model", "new_model", "open_model", "train",
        "tune_fusion", "UpdateResult", "update_index")

__all__ = ["hookimpl", *_API]
__version__ = "0.1.0"


def __getattr__(name: str):
    if name in _API:
        from structret import api

        return getattr(api, name)
    raise AttributeError(f"module 'structret' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
