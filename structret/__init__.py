"""structret: structure-aware dense retrieval, assembled from named plugins."""

from structret.hookspecs import hookimpl

__all__ = ["hookimpl"]
__version__ = "0.1.0"
