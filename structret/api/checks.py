"""A check of every plugin name and option a pipeline is given, before any data is read: a typo
costs a second, not a corpus' encoding. Every command runs it first."""

from __future__ import annotations

from typing import Any, Sequence

from structret import defaults
from structret.datasets import parse_data_spec
from structret.search.build import choose_index
from structret.models import trained_model
from structret.registry import get_registry
from structret.search.system import resolve_system


def check_names(*, data: Sequence[str] = (), data_options: dict[str, Any] | None = None, backbone: str | None = None,
                model: str | None = None, backbone_options: dict[str, Any] | None = None, index: str | None = None,
                index_options: dict[str, Any] | None = None, systems: Sequence[str] = (),
                retriever: str | None = None, miner: str | None = None, chunker: str | None = None,
                chunker_options: dict[str, Any] | None = None) -> None:
    """PluginError (or ArtifactError for a damaged run) unless every plugin named exists and takes
    the options given: names first (no plugin module is imported for them), options after (their
    factories' signatures or options models). ``data``: FORMAT:PATH specs; ``model``: a run
    decides the backbone; ``systems``: what ``structret bench --system`` takes."""
    registry = get_registry()
    formats = [parse_data_spec(spec)[0] for spec in data if spec]
    for fmt in formats:
        registry.check("dataset", fmt)
    if model:
        trained = trained_model(model)
        if trained is not None:  # a run: it decides the backbone
            backbone = trained.backbone
    if index == defaults.AUTO:  # not a plugin: the index is chosen by size (index_build.choose_index)
        choose_index(index, 0, index_options)
        index = None
    for kind, name in (("backbone", backbone), ("index", index), ("retriever", retriever), ("miner", miner),
                       ("chunker", chunker)):
        if name:
            registry.check(kind, name)
    for system in systems:
        resolve_system(system)
    if index and index_options:
        registry.check("index", index, index_options)
    if chunker and chunker_options:
        registry.check("chunker", chunker, chunker_options)
    if backbone and backbone_options:
        registry.check("backbone", backbone, backbone_options)
    for fmt in formats if data_options else ():
        registry.check("dataset", fmt, data_options)
