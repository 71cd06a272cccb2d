"""Which entities a served hit shows, and finding them in the hit's text.

The entities worth marking are the ones the model was trained to predict: a run of
``structret train`` with the ``mep`` objective records its extractor (``mep.extractor``
in the run's recipe), and that extractor is used. ``auto`` there is resolved as mep
resolves it (plugins/structret_objectives/lm.py): Python code -> python-tokenize, other
code -> tree-sitter, products -> title-overlap. For a model that is not such a run,
``--extractor NAME`` chooses; left out, python-tokenize is used when the indexed texts
are Python code, and no extractor otherwise (prose marked with every word would say
nothing). Every choice comes with a sentence saying why, shown at start-up and by
``/api/health``.
"""

from __future__ import annotations

import ast
import inspect
import logging
from dataclasses import dataclass
from itertools import islice
from typing import Any, Iterable

from structret.errors import PluginError
from structret.records import Entity
from structret.registry import get_registry

log = logging.getLogger("structret.serve")

NONE = "none"  # --extractor none: mark nothing
TEXT_FORMATS_OF_PRODUCTS = ("product", "aspects")
# readers whose records are items (products, packages): mep's auto picks title-overlap for them
PRODUCT_READERS = ("esci", "esci-santa-pretrain", "debian-packages")
_SAMPLE = 50  # texts read to tell whether an index holds Python code
_MAX_SAMPLE_CHARS = 100_000  # longer texts are skipped by that check: parsing them says little more


@dataclass
class Marker:
    """An extractor and how to call it on hit texts; ``reason`` says why it was chosen."""

    name: str
    extractor: Any
    language: str | None
    reason: str

    @property
    def takes_title(self) -> bool:
        return "title" in inspect.signature(self.extractor.extract).parameters

    def entities(self, text: str, start: int = 0, end: int | None = None, title: str | None = None) -> list[Entity]:
        """Entities of ``text[start:end]`` as spans into ``text``; spans that are not the text
        they point at are dropped (logged): a page must not show a mark in the wrong place."""
        end = len(text) if end is None else end
        piece = text[start:end]
        kwargs: dict[str, Any] = {}
        if self.language:
            kwargs["language"] = self.language
        if title is not None and self.takes_title:
            kwargs["title"] = title
        found = self.extractor.extract(piece, **kwargs)
        kept = [Entity(e.start + start, e.end + start, e.text, e.kind) for e in found
                if 0 <= e.start <= e.end <= len(piece) and piece[e.start:e.end] == e.text]
        if len(kept) < len(found):
            log.warning("extractor %s gave %d spans that are not the text they point at; not shown",
                        self.name, len(found) - len(kept))
        return kept


def objectives(recipe: dict) -> list[str]:
    """The objective names of a recipe's ``objective`` field (``"sda+0.5*mep"`` -> sda, mep)."""
    spec = recipe.get("objective") or ""
    return [term.rpartition("*")[2].strip() for term in str(spec).split("+") if term.strip()]


def looks_like_python(texts: Iterable[str | None]) -> bool:
    """True when most of the first texts parse as Python holding a statement (a def, an
    assignment, an import ...): a single English word parses too, as an expression."""
    sample = list(islice((t for t in texts if t and len(t) <= _MAX_SAMPLE_CHARS), _SAMPLE))
    if not sample:
        return False
    python = 0
    for text in sample:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        python += any(not isinstance(node, ast.Expr) for node in tree.body)
    return python * 2 >= len(sample)


def choose_marker(recipe: dict, texts: Iterable[str | None], *, text_format: str = "", name: str | None = None,
                  options: dict[str, Any] | None = None, language: str | None = None) -> Marker | None:
    """The extractor whose entities hits show (None: no marks), by the rules of this module's
    docstring. ``name``/``options``/``language``: what ``--extractor``, ``--extractor-option``
    and ``--language`` say; ``recipe``: the model's run recipe ({} for a model that is not one)."""
    registry = get_registry()
    options = dict(options or {})
    if name == NONE:
        return None
    if name:
        return Marker(name, registry.create("extractor", name, **options), language,
                      f"--extractor {name}")
    if options:
        raise PluginError("--extractor-option goes with --extractor NAME: say which extractor takes it.")
    if "mep" in objectives(recipe):
        chosen = str(((recipe.get("plugins") or {}).get("mep") or {}).get("extractor") or "auto")
        if chosen != "auto":
            return Marker(chosen, registry.create("extractor", chosen), language,
                          f"the model's run masked {chosen} entities (mep.extractor = {chosen})")
        return _auto(recipe, texts, text_format, language)
    python = language is None and looks_like_python(texts)
    if python or (language or "").lower() in ("python", "py"):
        why = "the indexed texts are Python code" if python else "--language python"
        return Marker("python-tokenize", registry.create("extractor", "python-tokenize"), language,
                      f"the model records no entity extractor (not a run trained with mep) and {why}; "
                      f"--extractor NAME chooses another, --extractor none marks nothing")
    if language:
        return Marker("tree-sitter", registry.create("extractor", "tree-sitter"), language,
                      f"the model records no entity extractor and --language {language} says the texts are code")
    log.info("no entity extractor: the model records none and the texts are not Python code")
    return None


def _auto(recipe: dict, texts: Iterable[str | None], text_format: str, language: str | None) -> Marker | None:
    """mep's ``auto``, from what is known at serving time: the run's text format and data, the
    texts themselves, and ``--language``."""
    registry = get_registry()
    reader = str(recipe.get("data") or "").partition(":")[0]
    if text_format in TEXT_FORMATS_OF_PRODUCTS or reader in PRODUCT_READERS:
        return Marker("title-overlap", registry.create("extractor", "title-overlap"), None,
                      "the model's run masked product entities (mep.extractor = auto: title-overlap for products)")
    if (language or "").lower() in ("python", "py") or (language is None and looks_like_python(texts)):
        return Marker("python-tokenize", registry.create("extractor", "python-tokenize"), language,
                      "the model's run masked code entities (mep.extractor = auto) and the texts are Python: "
                      "python-tokenize")
    if language:
        return Marker("tree-sitter", registry.create("extractor", "tree-sitter"), language,
                      f"the model's run masked code entities (mep.extractor = auto: tree-sitter for {language})")
    log.warning("the model's run masked entities with mep.extractor = auto, but the indexed texts are not "
                "Python and no --language names their language, so no entities are marked; pass --language "
                "go (java, javascript, php, ruby) or --extractor NAME")
    return None
