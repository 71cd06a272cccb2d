"""What every part of export raises, in a module of its own so that none of them imports another for it."""

from __future__ import annotations

from structret.errors import StructretError


class ExportError(StructretError):
    """A run that cannot be exported faithfully, or an export that does not match it."""


def require(*modules: str) -> None:
    """ExportError naming the install command when an optional dependency of export is missing."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise ExportError(f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed; "
                          f"pip install 'structret[export]' adds what structret export needs.")
