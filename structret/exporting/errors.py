"""What every part of export checks first, in a module of its own so that none of them imports another for it."""

from __future__ import annotations

import importlib.util

from structret.errors import ExportError

__all__ = ["ExportError", "require"]


def require(*modules: str) -> None:
    """ExportError naming the install command when an optional dependency of export is missing."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise ExportError(f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed; "
                          f"pip install 'structret[export]' adds what structret export needs.")
