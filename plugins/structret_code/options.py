"""Options of the code extractors and linearizers (``--option KEY=VALUE`` of ``structret extract``
and ``structret linearize``, a recipe's table when a run names one). Kept apart from them so that
listing or checking options never imports tree-sitter."""

from structret.plugin import Count, Names, Options


class PythonTokenize(Options):
    """The ``python-tokenize`` extractor has no options."""


class TreeSitterIdentifiers(Options):
    """Options of the ``tree-sitter`` extractor."""

    language: str | None = None
    """The code's language (go, java, ruby ...), loaded now; unset = each text's own language, given per call."""
    node_types: Names | None = None
    """Node types counted as identifiers, e.g. "identifier,constant"; unset = the language's own list."""


class CodeLinearizer(Options):
    """Options of ``raw``, ``dfs``, ``dfs-parent`` and ``bfs``."""

    language: str | None = None
    """The code's language; unset = each record's own language (Python by default)."""
    parser: str | None = None
    """tree-sitter = read Python with tree-sitter too; unset = Python's own tokenize (raw) or ast (the others)."""
    split_identifiers: bool = False
    """Split identifiers into their camelCase / snake_case parts."""
    max_tokens: Count | None = None
    """Stop after this many tokens; unset = the whole code."""


class CodeChunker(Options):
    """Options of the ``syntax`` chunker (``structret index SOURCE``)."""

    max_chars: Count = 1500
    """The size cap of a unit, in characters: a longer definition is split at line boundaries into parts."""
    methods_alone: bool = True
    """A class is its header (signature, fields) plus one unit per member, even when it fits under the cap."""
    merge_under: int = 0
    """Neighbouring definitions of one scope smaller than this many characters are one unit; 0: never."""
    constants: bool = False
    """A top-level declaration of several lines (``export const Schema = z.object({...})``) is a definition of
    its name, a unit of its own, rather than code between definitions."""
