"""Datasets by ``FORMAT:PATH`` spec, remembering the spec so a split of them can be read again
(``structret.api.load_dataset``)."""

from __future__ import annotations

from typing import Any, Sequence

from structret.data import load_dataset as read_dataset, require
from structret.records import Dataset


def load_dataset(spec: str, split: str | None = None, *, need: Sequence[str] = (), **options: Any) -> Dataset:
    """The dataset ``"FORMAT:PATH"`` names (any registered reader: codesearchnet, adv, esci,
    beir, ...), one ``split`` of it (None: what the reader reads by default, for
    codesearchnet every row); ``options`` go to the reader (``locale="us"``). Raises
    DataError for a bad spec or unreadable file, or when a part in ``need`` ("documents",
    "queries", "judgments") is empty; PluginError for an unknown format or option."""
    dataset = read_dataset(spec, split=split, options=options)
    dataset.source = (spec, split, dict(options))
    require(dataset, *need, spec=spec, split=split)
    return dataset


def dataset_split(data: Dataset | str, split: str | None) -> Dataset:
    """``data`` as a Dataset of ``split``: a spec is read; a Dataset from ``load_dataset`` that
    holds another split is read again with ``split``; any other Dataset is used as it is."""
    if isinstance(data, str):
        return load_dataset(data, split)
    if split is not None and data.source is not None and data.source[1] != split:
        spec, _, options = data.source
        return load_dataset(spec, split, **options)
    return data
