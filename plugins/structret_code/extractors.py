"""Code entities for masked entity prediction: identifiers, as character spans of the code.

SANTA (Appendix A.3) takes the identifiers of a function as its entities: for Python every
``NAME`` token of the standard ``tokenize`` module that is not a keyword, for the other
languages the identifier nodes of the tree-sitter parse. Both extractors here follow that,
and report spans in characters of the original text (never bytes, never token positions).

Code they cannot read gives no entities and is counted in ``extractor.failures`` (a
``Counter`` by reason) instead of raising: one broken function must not stop a corpus.
"""

from __future__ import annotations

import keyword
import tokenize
from collections import Counter

from structret.errors import PluginError
from structret.records import Entity
from structret_code.pytokens import python_tokens
from structret_code.treesitter import CLASS_WRAPPERS, ParseTimeout, language_name, load_grammar, parse

# f-strings are one STRING token up to Python 3.11 (as in SANTA's runs); 3.12 splits them
# into FSTRING_* tokens with NAMEs inside. Those inner names are skipped so that every Python
# version yields the same entities.


class PythonTokenize:
    """Every non-keyword ``NAME`` token of Python's ``tokenize``: SANTA's Python entities.

    Soft keywords (``match``, ``case``, ``_``, ``type``) count as names, as they do for
    ``keyword.iskeyword`` and so in SANTA's data: tokenize is lexical and cannot tell
    ``match x:`` from ``m = re.match(...)``, and in CodeSearchNet-era code they are almost
    always names (``type(x)``, ``_ = f()``). Use the ``tree-sitter`` extractor with
    ``language="python"`` to leave out their keyword uses.
    """

    def __init__(self):
        self.failures: Counter = Counter()

    def extract(self, text: str, language: str | None = None) -> list[Entity]:
        if language is not None and language.lower() not in ("python", "py"):
            raise PluginError(
                f"the python-tokenize extractor reads Python only, not {language}; "
                f"use the tree-sitter extractor for {language}"
            )
        # A leading byte-order mark is not part of the first name (3.12+ glues it to it).
        shift = 1 if text.startswith("\ufeff") else 0
        source = text[shift:]
        entities = []
        try:
            for token in python_tokens(source):
                if token.type == tokenize.NAME and not keyword.iskeyword(token.string):
                    entities.append(Entity(token.start + shift, token.end + shift, token.string, "identifier"))
        except (tokenize.TokenError, SyntaxError) as exc:  # IndentationError is a SyntaxError
            message = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
            self.failures[f"{type(exc).__name__}: {message}"] += 1
            return []
        # tokenize's rows follow its own idea of a line; never hand out a span that is off
        if any(text[e.start : e.end] != e.text for e in entities):
            self.failures["token positions do not match the text"] += 1
            return []
        return entities


# The node types SANTA-style extraction takes per language; a name occurrence is always a
# leaf of one of these types. JavaScript adds the destructuring and #private forms of the
# same names (``{a, b} = o``, ``this.#count``), which the plain types would miss.
NODE_TYPES: dict[str, frozenset[str]] = {
    "python": frozenset({"identifier"}),
    "go": frozenset({"identifier", "type_identifier", "field_identifier", "package_identifier"}),
    "java": frozenset({"identifier", "type_identifier"}),
    "javascript": frozenset(
        {
            "identifier",
            "property_identifier",
            "shorthand_property_identifier",
            "shorthand_property_identifier_pattern",
            "private_property_identifier",
        }
    ),
    "php": frozenset({"name"}),
    "ruby": frozenset({"identifier", "constant"}),
}



class TreeSitterIdentifiers:
    """Identifier nodes of the tree-sitter parse: SANTA's entities for non-Python code.

    ``language`` (here or per ``extract`` call) is a grammar name: any language whose
    ``tree_sitter_<language>`` package is installed works; for those not in
    ``NODE_TYPES`` the node types ending in ``identifier`` or named ``name`` are taken.
    ``node_types`` overrides the node types for every language. Code whose parse has
    errors gives no entities (SANTA dropped unparsable code) and is counted in ``failures``.
    """

    def __init__(self, language: str | None = None, node_types: str | list[str] | tuple[str, ...] | None = None):
        self.language = language_name(language)
        if isinstance(node_types, str):  # "identifier,constant", as typed on a command line
            node_types = [t.strip() for t in node_types.split(",") if t.strip()]
        self.node_types = frozenset(node_types) if node_types else None
        self.failures: Counter = Counter()
        self._grammars: dict[str, _Grammar] = {}
        if self.language:
            self._grammar(self.language)  # a missing grammar should fail now, not mid-corpus

    def extract(self, text: str, language: str | None = None) -> list[Entity]:
        language = language_name(language) or self.language
        if not language:
            raise PluginError(
                "the tree-sitter extractor needs the language of the code: pass language=... "
                "to extract() or to the extractor (e.g. --language go)"
            )
        grammar = self._grammar(language)
        data = text.encode("utf-8", "surrogatepass")
        tagged = language == "php" and text.lstrip().startswith("<?")  # a whole PHP file, not a snippet
        try:
            nodes = grammar.identifiers(data, tagged)
        except ParseTimeout as exc:
            self.failures[f"{language}: {exc}"] += 1
            return []
        if nodes is None:
            self.failures[f"{language}: tree-sitter could not parse it"] += 1
            return []
        if text.isascii():
            return [Entity(start, end, text[start:end], kind) for start, end, kind in nodes]
        # Byte offsets to character offsets, walking forward once: nodes come in text order.
        entities = []
        byte, char = 0, 0
        for start, end, kind in nodes:
            char += len(data[byte:start].decode("utf-8", "surrogatepass"))
            name = data[start:end].decode("utf-8", "surrogatepass")
            entities.append(Entity(char, char + len(name), name, kind))
            byte = start
        return entities

    def _grammar(self, language: str) -> "_Grammar":
        if language not in self._grammars:
            self._grammars[language] = _Grammar(language, self.node_types)
        return self._grammars[language]


class _Grammar:
    """One language: its parser(s) and the kind ids of its identifier nodes."""

    def __init__(self, language: str, node_types: frozenset[str] | None):
        import tree_sitter

        purpose = f"extracting {language} identifiers"
        self.language = language
        if language == "php":
            # function snippets carry no <?php tag: read them with the PHP-only grammar
            grammars = [load_grammar("php", entry="language_php_only", purpose=purpose),
                        load_grammar("php", purpose=purpose)]
        else:
            grammars = [load_grammar(language, purpose=purpose)]
        types = node_types or NODE_TYPES.get(language) or _generic_types(grammars[0])
        # a generic grammar may call a composite node "...identifier" (a::b::c): take its leaves
        self.leaves_only = node_types is None and language not in NODE_TYPES
        # (parser, kind ids) for plain snippets and for text that starts with a <?php tag
        parsers = [(tree_sitter.Parser(g), _kind_ids(g, types)) for g in grammars]
        self.plain, self.tagged = parsers[0], parsers[-1]
        if not self.plain[1]:
            raise PluginError(
                f"tree-sitter-{language} has none of the node types {sorted(types)}; "
                f"pass node_types=... with the identifier node types of this grammar"
            )

    def identifiers(self, data: bytes, tagged: bool) -> list[tuple[int, int, str]] | None:
        """(start byte, end byte, node type) of each identifier in text order, or None if unparsable.

        A cursor walk comparing kind ids: on 500 standard-library Python functions and 300
        JavaScript files it took 16 ms and 300 ms, against 19 ms and 370 ms for a
        Query + QueryCursor (which also needs a sort); parsing itself costs more than both.
        """
        parser, kind_ids = self.tagged if tagged else self.plain
        root = parse(parser, data).root_node
        low, high = 0, len(data)
        if root.has_error and self.language in CLASS_WRAPPERS and not tagged:
            before, after = (part.encode() for part in CLASS_WRAPPERS[self.language])
            low, high = len(before), len(before) + len(data)
            root = parse(parser, before + data + after).root_node
        if root.has_error:
            return None
        found = []
        leaves_only = self.leaves_only
        cursor = root.walk()
        while True:
            node = cursor.node
            if node.kind_id in kind_ids and not (leaves_only and node.named_child_count):
                if low <= node.start_byte and node.end_byte <= high:  # not the wrapper's own name
                    found.append((node.start_byte - low, node.end_byte - low, node.type))
            elif cursor.goto_first_child():
                continue
            while not cursor.goto_next_sibling():
                if not cursor.goto_parent():
                    return found


def _generic_types(language) -> frozenset[str]:
    """Named node types of an unknown grammar that look like names: ``*identifier`` and ``name``."""
    found = set()
    for kind_id in range(language.node_kind_count):
        kind = language.node_kind_for_id(kind_id)
        if kind and language.node_kind_is_named(kind_id) and language.node_kind_is_visible(kind_id):
            if kind.endswith("identifier") or kind == "name":
                found.add(kind)
    return frozenset(found)


def _kind_ids(language, types: frozenset[str]) -> frozenset[int]:
    # ids, not names: one name can have several ids (aliases), and ints compare fastest
    return frozenset(
        kind_id
        for kind_id in range(language.node_kind_count)
        if language.node_kind_is_named(kind_id) and language.node_kind_for_id(kind_id) in types
    )
