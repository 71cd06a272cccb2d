"""Run one linearizer over one file and show its sequence (``structret linearize``).

The point is to look at what a model would be fed: the tokens a linearizer makes of the
code, comma-separated as in Khan & Jang's Tables 1-3, and for a linearizer that gives
parents (``dfs-parent``, ``bfs``) each token's parent token, ``None`` for the root.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from structret.contracts import HasFailures, HasText
from structret.errors import PluginError
from structret.extraction import LANGUAGE_OF_SUFFIX, visible, read_text
from structret.records import CodeRecord, Query, Sequence
from structret.registry import get_registry


@dataclass
class LinearizationResult:
    path: str
    linearizer: str
    language: str | None
    text: str
    sequence: Sequence | None  # None: the linearizer could not read the file
    # what the linearizer counted while reading this file, e.g. code that did not parse
    failures: Counter = field(default_factory=Counter)

    @property
    def tokens(self) -> list[str]:
        return self.sequence.tokens if self.sequence is not None else []

    @property
    def parent_tokens(self) -> list[str | None] | None:
        return parent_tokens(self.sequence) if self.sequence is not None else None

    def format(self) -> str:
        """The labelled sequence, as the paper's tables label theirs ("DFS sequence", then
        "DFS-Parent sequence" for a linearizer that gives parents); or why there is none."""
        if self.sequence is not None:
            kind = sequence_label(self.linearizer)
            about = ", ".join(x for x in (f"{len(self.tokens)} tokens", self.language, self.path) if x)
            listing = format_sequence(self.sequence).splitlines()
            lines = [f"{kind} sequence ({about}):", listing[0]]
            if len(listing) > 1:
                lines += [f"{kind}-Parent sequence (the parent of each token above; None = a root):", listing[1]]
            return "\n".join(lines)
        reasons = "; ".join(f"{reason} ({n}x)" if n > 1 else reason for reason, n in self.failures.items())
        return f"note: {self.linearizer} could not read {self.path}" + (f": {reasons}" if reasons else "")


def sequence_label(linearizer: str) -> str:
    """``dfs-parent`` -> ``DFS``, ``raw`` -> ``Raw``: the name the paper's tables give the sequence."""
    base = linearizer.removesuffix("-parent")
    return base.capitalize() if set(base) & set("aeiouy") else base.upper()  # no vowel: an acronym (dfs, bfs)


def parent_tokens(sequence: Sequence) -> list[str | None] | None:
    """Each token's parent token (the paper's DFS-Parent sequence), ``None`` for a root;
    ``None`` altogether for a sequence without parents."""
    if sequence.parents is None:
        return None
    return [sequence.tokens[p] if p >= 0 else None for p in sequence.parents]


def format_sequence(sequence: Sequence) -> str:
    """``a, b, c`` as in the paper's tables, then the parents' line ``None, a, a`` if there are parents."""
    if not sequence.tokens:
        return "(no tokens)"
    lines = [", ".join(visible(token) for token in sequence.tokens)]
    parents = parent_tokens(sequence)
    if parents is not None:
        lines.append(", ".join("None" if p is None else visible(p) for p in parents))
    return "\n".join(lines)


def linearize_file(
    path: str | Path,
    linearizer_name: str,
    language: str | None = None,
    **options,
) -> LinearizationResult:
    """Read ``path`` (UTF-8) and run the linearizer registered as ``linearizer_name`` on it.

    The whole file is one record. ``language`` defaults to the one the file suffix names
    (``.go`` -> go), if any; ``options`` go to the linearizer's factory
    (``split_identifiers=True``, ``max_tokens=512``, ``parser="tree-sitter"`` ...).
    """
    path = Path(path)
    text = read_text(path)
    if language is None:
        language = LANGUAGE_OF_SUFFIX.get(path.suffix.lower())
    linearizer = get_registry().create("linearizer", linearizer_name, **options)
    record = CodeRecord(id=str(path), code=text, language=language or "", path=str(path))
    failures_before = Counter(linearizer.failures if isinstance(linearizer, HasFailures) else {})
    sequence = linearizer.linearize(record)
    failures = Counter(linearizer.failures if isinstance(linearizer, HasFailures) else {})
    failures.subtract(failures_before)
    if sequence is not None:
        _check_sequence(sequence, linearizer_name)
    return LinearizationResult(str(path), linearizer_name, language, text, sequence, +failures)


def _check_sequence(sequence: Sequence, linearizer_name: str) -> None:
    """Parents must point at tokens of the sequence: the informed attention head indexes by them."""
    tokens, parents = sequence.tokens, sequence.parents
    if parents is None:
        return
    if len(parents) != len(tokens):
        raise PluginError(
            f"linearizer '{linearizer_name}' returned {len(tokens)} tokens but {len(parents)} parents; "
            f"every token needs one. This is a bug in that linearizer."
        )
    for i, p in enumerate(parents):
        if p == i or not -1 <= p < len(tokens):
            raise PluginError(
                f"linearizer '{linearizer_name}' gave token {i} ({tokens[i]!r}) the parent {p}, which is "
                f"not another token of the sequence (0..{len(tokens) - 1}, or -1 for a root). "
                f"This is a bug in that linearizer."
            )


class TextFormat:
    """How records and queries become the strings a model reads: their own ``text()``, or
    a linearizer's ``text(record)`` (``product``: SANTA's template; ``aspects``: ATTEMPT's
    layout). Training and retrieval both go through it, and a trained model's recipe names
    it, so a model is always evaluated on the form it was trained on.
    """

    def __init__(self, name: str = "", options: dict | None = None):
        self.name, self.options = name, dict(options or {})
        self.linearizer = None
        self.fallbacks = 0  # records the linearizer could not write, given as their own text()
        if not name:
            return
        self.linearizer = get_registry().create("linearizer", name, **self.options)
        if not isinstance(self.linearizer, HasText):
            raise PluginError(f"text_format '{name}': that linearizer makes token sequences for a structure-aware "
                              f"encoder, not text (it has no text(record)); use product or aspects, or leave it empty.")

    def document(self, record) -> str:
        if self.linearizer is not None:
            text = self.linearizer.text(record)
            if text is not None:
                return text
            self.fallbacks += 1
        return record.text()

    def query(self, query) -> str:
        """A Query, or a plain string (typed at ``structret search``, a bullet point as a query)."""
        if self.linearizer is not None:
            text = self.linearizer.text(Query(id="", text=query) if isinstance(query, str) else query)
            if text is not None:
                return text
            self.fallbacks += 1
        return query if isinstance(query, str) else query.text

    @classmethod
    def of_recipe(cls, recipe: dict) -> "TextFormat":
        """The text format a run trained with, from its recipe (``structret.json``'s ``recipe``):
        the linearizer's table, or for a run written before plugin tables, the top-level fields
        that are options of that linearizer."""
        name = recipe.get("text_format") or ""
        if not name:
            return cls()
        options = (recipe.get("plugins") or {}).get(name)
        if options is None:
            model = get_registry().get("linearizer", name).options_model()
            names = model.model_fields if model is not None else {}
            options = {k: v for k, v in recipe.items() if k in names and v not in ("", None)}
        return cls(name, options)

    def __repr__(self) -> str:
        return f"TextFormat({self.name or 'text()'!r}, {self.options!r})"
