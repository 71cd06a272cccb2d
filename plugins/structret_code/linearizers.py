"""Code as token sequences: raw tokens, and AST traversals with each token's parent.

Khan & Jang ("Structurally-Informed Code Representation Improves Natural Language Code
Search") compare a model fed the code's own tokens with one fed a pre-order (DFS)
traversal of the AST, and feed each token's parent to a structurally-informed attention
head. The linearizers here produce those inputs, and a breadth-first order to compare:

``raw``
    The code's tokens. Python: ``tokenize``'s NAME, OP, NUMBER and STRING tokens
    (comments and layout tokens dropped; an f-string is one token, on every Python
    version). Other languages: the texts of tree-sitter's leaves, comments left out, a
    string literal as one token (the tokens the miners store as ``code_tokens``). No parents.
    With ``split_identifiers=True`` it is the paper's Table 1 (``def, sum, two, numbers,
    (, a, ,, b, ), :, return, a, +, b``: the ``,`` token is kept, which the paper's
    comma-separated listing cannot show apart from its separators).
``dfs``
    Pre-order traversal of the AST, tokens only (the paper's Table 2).
``dfs-parent``
    The same tokens, each with its parent's index (Table 3: the parent tokens).
``bfs``
    The same tokens and parents in breadth-first order: level by level, each level in
    pre-order (so siblings stay in source order).

Python trees come from the standard ``ast`` module, as in the paper; for
``def sum_two_numbers(a, b): return a + b`` they give exactly Table 2,
``Module, FunctionDef, sum_two_numbers, arguments, arg, a, arg, b, body, Return,
BinOpAdd, NameLoad, a, NameLoad, b``, and Table 3's parents. The rules behind it:

* a node is its class name, with its operator and expression context appended
  (``BinOp`` + ``Add`` -> ``BinOpAdd``, ``Name`` + ``Load`` -> ``NameLoad``; a chained
  comparison appends each: ``CompareLtLtE``);
* identifiers (``name``, ``id``, ``arg``, ``attr``, imported names ...) and constants
  are leaves under their node; a constant is its ``repr`` (``'text'``, ``1.5``, ``None``,
  ``...`` for Ellipsis), a string constant one token;
* a field holding a block of statements, a *suite* (``body``, ``orelse``,
  ``finalbody``), is a token of its own, the parent of the block's statements: it is
  what ``:`` and the indentation are in the source, as ``arguments`` is what ``(`` and
  ``)`` are. The module's body is not a suite: ``Module`` already stands for it. No
  other list gets a token (Table 2 has none for the ``args`` of ``arguments``): the
  node types of expressions, arguments, decorators or handlers say what they are;
* empty fields (``decorator_list=[]``, ``returns=None``, 3.12's ``type_params=[]``),
  type comments and integer flags (``ImportFrom.level``, ``comprehension.is_async``,
  ``FormattedValue.conversion``) give no token; ``None`` inside a list (``**x`` in a
  dict, a keyword-only argument without default) is skipped;
* children come in the ``ast``'s field order, so decorators and a return annotation
  follow the body: a pre-order traversal of the tree, not of the text.

Other languages (and Python with ``parser="tree-sitter"``) are read with tree-sitter:

* named nodes are tokens, by type; anonymous nodes (keywords, punctuation) are left
  out, their meaning is in the type (``return_statement``), except an operator: a child
  in an ``operator`` or ``operators`` field is appended to its node's type
  (``binary_expression:+``, ``comparison_operator:<:not_in``), as ``ast`` gives ``BinOpAdd``
  (Ruby's grammar files the dot of a call there too: ``call:.``, ``call:&.``);
* a named node without named children is a leaf: its type, then its text as a value
  token (``identifier``, ``a``); if it has anonymous children, the keywords among them
  that its type does not already name (``modifiers``, ``public``, ``static``, but
  ``pass_statement`` alone and an empty ``argument_list`` without ``(`` ``)``); a
  string literal (``string``, ``interpreted_string_literal`` ...) is its type and its
  whole text, like a constant;
* comments are left out; tree-sitter's trees already have a node for every list
  (``block``, ``parameters``, ``argument_list``), so no field tokens are added;
* a method as CodeSearchNet stores it (Java, JavaScript, PHP) parses inside a class;
  that wrapper's nodes are left out, and the snippet's nodes hang under the grammar's
  root (``program``), as a Python function hangs under ``Module``.

``split_identifiers=True`` splits identifier-shaped tokens as the paper's preprocessing
does, on ``_``/``$``/``.`` and at case changes, keeping case (``readInputFile`` ->
``read Input File``, ``read_input`` -> ``read input``, ``HTMLParser`` -> ``HTML Parser``).
Node types, operators, strings and numbers are never split. In the trees, a split
leaf's sub-tokens are all children of the leaf's node (``FunctionDef, read, input``).
``max_tokens`` keeps the first tokens; their parents are always among them.

Python code indented as a whole (a method copied out of its class) is dedented first.
Code that does not parse (tokenize, ``ast`` or tree-sitter) gives ``None`` and is counted
in ``linearizer.failures`` by reason, never raised: one broken function must not stop
a corpus. ``raw`` only tokenizes Python, so it accepts some code ``dfs`` refuses.
"""

from __future__ import annotations

import ast
import re
import textwrap
import tokenize
import warnings
from collections import Counter
from typing import Any

from structret.errors import PluginError
from structret.records import Sequence
from structret_code.pytokens import python_tokens
from structret_code.treesitter import CLASS_WRAPPERS, ParseTimeout, language_name, load_grammar, parse

# --- identifier splitting ------------------------------------------------------------

# what a name looks like in any of the languages: Ruby's `empty?`, PHP's `$x`, `os.path`
_IDENTIFIER = re.compile(r"(?:[^\W\d]|\$)[\w$.]*[?!]?")
_SEPARATORS = re.compile(r"[_$.]+")
_CASE_CHANGE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def split_identifier(token: str) -> list[str]:
    """Sub-tokens of an identifier; any other token (``+``, ``'text'``, ``42``) unchanged.

    ``readInputFile`` -> ``read, Input, File``; ``read_input`` -> ``read, input``;
    ``HTMLParser`` -> ``HTML, Parser``; ``utf8Decode`` -> ``utf8, Decode``; a name made of
    separators only (``_``, ``$``) stays whole.
    """
    if not _IDENTIFIER.fullmatch(token):
        return [token]
    parts = [part for chunk in _SEPARATORS.split(token) if chunk for part in _CASE_CHANGE.split(chunk)]
    return parts or [token]


class _Unreadable(Exception):
    """The code cannot be linearized; the message is the reason counted in ``failures``."""


class _Builder:
    """Tokens and their parents' indices, in the order they are emitted."""

    def __init__(self, split: bool):
        self.tokens: list[str] = []
        self.parents: list[int] = []
        self.split = split

    def node(self, token: str, parent: int) -> int:
        self.tokens.append(token)
        self.parents.append(parent)
        return len(self.tokens) - 1

    def value(self, text: str, parent: int) -> None:
        for part in split_identifier(text) if self.split else (text,):
            self.tokens.append(part)
            self.parents.append(parent)


# --- the linearizers -------------------------------------------------------------------


class _CodeLinearizer:
    """What the four linearizers share: options, records, languages, parsers and failures.

    A subclass implements ``_linearize(code, language) -> (tokens, parents or None)``,
    raising ``_Unreadable`` for code it cannot read.
    """

    name = ""
    python_parser = ""  # the standard-library module that reads Python by default

    def __init__(
        self,
        language: str | None = None,
        parser: str | None = None,
        split_identifiers: bool = False,
        max_tokens: int | None = None,
    ):
        if parser not in (None, self.python_parser, "tree-sitter"):
            raise PluginError(
                f"the {self.name} linearizer has no parser '{parser}'; use parser=tree-sitter to read "
                f"Python with tree-sitter, or leave it out for Python's {self.python_parser}"
            )
        if not isinstance(split_identifiers, bool):
            raise PluginError(f"split_identifiers is true or false, not {split_identifiers!r}")
        if max_tokens is not None and (type(max_tokens) is not int or max_tokens < 1):  # True is no count
            raise PluginError(f"max_tokens is a positive whole number (or left out), not {max_tokens!r}")
        self.language = language_name(language)
        self.parser = parser
        self.split_identifiers = split_identifiers
        self.max_tokens = max_tokens
        self.failures: Counter = Counter()
        self._grammars: dict[str, _TreeSitter] = {}
        if self.language:
            self._check_parser(self.language)
            if self._uses_tree_sitter(self.language):
                self._tree_sitter(self.language)  # a missing grammar should fail now, not mid-corpus

    def _linearize(self, code: str, language: str) -> tuple[list[str], list[int] | None]:
        raise NotImplementedError

    def linearize(self, record: Any, language: str | None = None) -> Sequence | None:
        """The record's sequence, or ``None`` (counted in ``failures``) if its code does not parse.

        ``record`` is a ``CodeRecord`` (its ``code`` in its ``language``) or a string of
        code; ``language`` overrides the record's, which overrides the linearizer's.
        """
        code, language = self._code_and_language(record, language)
        self._check_parser(language)
        try:
            tokens, parents = self._linearize(code, language)
        except _Unreadable as exc:
            self.failures[f"{language}: {exc}"] += 1
            return None
        if self.max_tokens is not None:
            tokens = tokens[: self.max_tokens]
            parents = parents[: self.max_tokens] if parents is not None else None
        return Sequence(tokens, parents)

    def _code_and_language(self, record: Any, language: str | None) -> tuple[str, str]:
        if isinstance(record, str):
            code, own = record, None
        elif isinstance(getattr(record, "code", None), str):
            code, own = record.code, getattr(record, "language", None)
        else:
            raise PluginError(
                f"the {self.name} linearizer reads code: give it a CodeRecord or a string of code, "
                f"not {type(record).__name__}"
            )
        language = language_name(language) or language_name(own) or self.language
        if not language:
            raise PluginError(
                f"the {self.name} linearizer needs the language of the code: set it on the record, "
                f"or pass language=... (structret linearize --language go)"
            )
        return code, language

    def _check_parser(self, language: str) -> None:
        if self.parser == self.python_parser and language != "python":
            raise PluginError(
                f"parser={self.parser} reads Python only, not {language}; leave the parser out "
                f"and {language} is read with tree-sitter"
            )

    def _uses_tree_sitter(self, language: str) -> bool:
        return language != "python" or self.parser == "tree-sitter"

    def _tree_sitter(self, language: str) -> _TreeSitter:
        if language not in self._grammars:
            self._grammars[language] = _TreeSitter(language, f"the {self.name} linearizer for {language}")
        return self._grammars[language]


class RawLinearizer(_CodeLinearizer):
    """The code's own tokens (the paper's baseline input); ``parents`` is ``None``."""

    name = "raw"
    python_parser = "tokenize"

    def _linearize(self, code: str, language: str) -> tuple[list[str], None]:
        if self._uses_tree_sitter(language):
            tokens = self._tree_sitter(language).leaves(code)
        else:
            tokens = _python_tokens(code)
        if self.split_identifiers:
            tokens = [part for token in tokens for part in split_identifier(token)]
        return tokens, None


class TreeLinearizer(_CodeLinearizer):
    """AST tokens in depth-first (pre-order) or breadth-first order, with or without parents."""

    python_parser = "ast"

    def __init__(
        self,
        order: str = "dfs",
        with_parents: bool = True,
        language: str | None = None,
        parser: str | None = None,
        split_identifiers: bool = False,
        max_tokens: int | None = None,
    ):
        if order not in ("dfs", "bfs"):
            raise PluginError(f"a tree linearizer walks in order 'dfs' or 'bfs', not '{order}'")
        self.order = order
        self.with_parents = with_parents
        self.name = order + ("-parent" if with_parents and order == "dfs" else "")
        super().__init__(language, parser, split_identifiers, max_tokens)

    def _linearize(self, code: str, language: str) -> tuple[list[str], list[int] | None]:
        builder = _Builder(self.split_identifiers)
        # pre-order can stop at max_tokens; breadth-first needs the whole tree first
        limit = self.max_tokens if self.order == "dfs" and self.max_tokens else float("inf")
        if self._uses_tree_sitter(language):
            self._tree_sitter(language).tree(code, builder, limit)
        else:
            _python_tree(code, builder, limit)
        tokens, parents = builder.tokens, builder.parents
        if self.order == "bfs":
            tokens, parents = _breadth_first(tokens, parents)
        return tokens, parents if self.with_parents else None


# The factories the plugin registers (structret_code.plugin).


def raw(language: str | None = None, parser: str | None = None, split_identifiers: bool = False,
        max_tokens: int | None = None) -> RawLinearizer:
    return RawLinearizer(language, parser, split_identifiers, max_tokens)


def dfs(language: str | None = None, parser: str | None = None, split_identifiers: bool = False,
        max_tokens: int | None = None) -> TreeLinearizer:
    return TreeLinearizer("dfs", False, language, parser, split_identifiers, max_tokens)


def dfs_parent(language: str | None = None, parser: str | None = None, split_identifiers: bool = False,
               max_tokens: int | None = None) -> TreeLinearizer:
    return TreeLinearizer("dfs", True, language, parser, split_identifiers, max_tokens)


def bfs(language: str | None = None, parser: str | None = None, split_identifiers: bool = False,
        max_tokens: int | None = None) -> TreeLinearizer:
    return TreeLinearizer("bfs", True, language, parser, split_identifiers, max_tokens)


def _breadth_first(tokens: list[str], parents: list[int]) -> tuple[list[str], list[int]]:
    """Pre-order to breadth-first: a stable sort by depth keeps each level in pre-order."""
    depth: list[int] = []
    for parent in parents:  # a parent precedes its children in pre-order
        depth.append(depth[parent] + 1 if parent >= 0 else 0)
    order = sorted(range(len(tokens)), key=depth.__getitem__)
    moved_to = [0] * len(tokens)
    for new, old in enumerate(order):
        moved_to[old] = new
    return [tokens[i] for i in order], [moved_to[parents[i]] if parents[i] >= 0 else -1 for i in order]


# --- Python with the standard library ----------------------------------------------------


def _dedent(code: str) -> str:
    # a method copied out of its class, indented as a whole, is still one function
    return textwrap.dedent(code) if code.lstrip("\r\n")[:1] in (" ", "\t") else code


_KEPT = frozenset({tokenize.NAME, tokenize.OP, tokenize.NUMBER, tokenize.STRING})


def _python_tokens(code: str) -> list[str]:
    tokens: list[str] = []
    try:
        for token in python_tokens(_dedent(code)):
            if token.type in _KEPT:
                tokens.append(token.string)
            elif token.type == tokenize.ERRORTOKEN and token.string.strip():
                raise _Unreadable(f"tokenize could not read {token.string!r} on line {token.line}")
    except (tokenize.TokenError, SyntaxError) as exc:  # IndentationError is a SyntaxError
        message = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
        raise _Unreadable(f"{type(exc).__name__}: {message}") from None
    return tokens


# operators and expression contexts: appended to their node's name, never tokens of their own
_FOLDED = (ast.operator, ast.unaryop, ast.cmpop, ast.boolop, ast.expr_context)
# string fields that hold no identifier: Constant.kind ("u"), type comments, TypeIgnore.tag
_NOT_NAMES = frozenset({"kind", "type_comment", "tag"})


def _python_tree(code: str, builder: _Builder, limit: float) -> None:
    try:
        with warnings.catch_warnings():
            # invalid escapes ("\d") warn at parse time; linearizing is not the place to report them
            warnings.simplefilter("ignore")
            tree = ast.parse(_dedent(code))
    except SyntaxError as exc:
        raise _Unreadable(f"{type(exc).__name__}: {exc.msg}") from None
    except ValueError as exc:  # null bytes, before Python 3.12
        raise _Unreadable(f"ValueError: {exc}") from None
    except (RecursionError, MemoryError):
        raise _Unreadable("nested too deeply for Python's parser") from None
    # Items to visit, last first: an AST node, a leaf's text, or a suite (field name, statements).
    stack: list[tuple[Any, int]] = [(tree, -1)]
    while stack and len(builder.tokens) < limit:
        item, parent = stack.pop()
        if isinstance(item, str):
            builder.value(item, parent)
        elif isinstance(item, tuple):
            field, statements = item
            index = builder.node(field, parent)
            stack.extend((statement, index) for statement in reversed(statements))
        else:
            name, children = _python_node(item)
            index = builder.node(name, parent)
            stack.extend((child, index) for child in reversed(children))


def _python_node(node: ast.AST) -> tuple[str, list[Any]]:
    """The node's token and its children in field order (nodes, leaf texts, suites)."""
    name = type(node).__name__
    if isinstance(node, (ast.Constant, ast.MatchSingleton)):
        value = node.value
        return name, ["..." if value is Ellipsis else repr(value)]
    children: list[Any] = []
    for field in node._fields:
        value = getattr(node, field, None)
        if value is None:
            continue
        if isinstance(value, ast.AST):
            if isinstance(value, _FOLDED):
                name += type(value).__name__
            else:
                children.append(value)
        elif isinstance(value, list):
            if not value:
                continue
            if isinstance(value[0], _FOLDED):  # Compare.ops
                name += "".join(type(op).__name__ for op in value)
            elif isinstance(value[0], ast.stmt) and not isinstance(node, ast.mod):
                children.append((field, value))
            else:
                children.extend(element for element in value if element is not None)
        elif isinstance(value, str) and field not in _NOT_NAMES:
            children.append(value)
    return name, children


# --- tree-sitter ----------------------------------------------------------------------------

# Literals read as one token, as the miners' ``string_types`` (so ``raw`` gives their code_tokens).
_LITERALS: dict[str, frozenset[str]] = {
    "python": frozenset({"string"}),
    "go": frozenset({"interpreted_string_literal", "raw_string_literal", "rune_literal"}),
    "java": frozenset({"string_literal", "character_literal"}),
    "javascript": frozenset({"string", "template_string", "regex"}),
    "php": frozenset({"string", "encapsed_string", "heredoc", "nowdoc"}),
    "ruby": frozenset({"string", "regex", "subshell", "heredoc_body"}),
}
_OTHER_LITERALS = frozenset({"string", "string_literal"})  # a grammar not listed above
_OPERATOR_FIELDS = ("operator", "operators")


class _Grammar:
    """One tree-sitter grammar: its parser and the ids of the node kinds the walks look for."""

    def __init__(self, language, literals: frozenset[str]):
        import tree_sitter

        self.parser = tree_sitter.Parser(language)
        # ids, not names: one name can have several ids (aliases), and ints compare fastest
        named = [
            (kind_id, language.node_kind_for_id(kind_id))
            for kind_id in range(language.node_kind_count)
            if language.node_kind_is_named(kind_id)
        ]
        self.literal_ids = frozenset(kind_id for kind_id, kind in named if kind in literals)
        self.comment_ids = frozenset(kind_id for kind_id, kind in named if kind and kind.endswith("comment"))
        self.operator_fields = frozenset(
            field_id for field_id in map(language.field_id_for_name, _OPERATOR_FIELDS) if field_id is not None
        )


class _Parsed:
    """A parse: the bytes read, the tree's root, and the byte range of the code itself."""

    def __init__(self, grammar: _Grammar, data: bytes, root, low: int, high: int):
        self.grammar, self.data, self.root, self.low, self.high = grammar, data, root, low, high

    @property
    def wrapped(self) -> bool:
        return self.low > 0

    def text(self, node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8", "surrogatepass")

    def snippet_nodes(self) -> list:
        """The outermost nodes inside the code's range: the snippet without its wrapper."""
        found: list = []
        pending = [self.root]
        while pending:
            node = pending.pop()
            inner = []
            for child in node.children:
                if self.low <= child.start_byte and child.end_byte <= self.high:
                    found.append(child)
                elif child.start_byte < self.high and child.end_byte > self.low:
                    inner.append(child)
            pending.extend(reversed(inner))
        found.sort(key=lambda node: node.start_byte)
        return found


class _TreeSitter:
    """One language read with tree-sitter: parsing, leaves (``raw``) and the tree walk."""

    def __init__(self, language: str, purpose: str):
        self.language = language
        literals = _LITERALS.get(language, _OTHER_LITERALS)
        if language == "php":
            # function snippets carry no <?php tag: read them with the PHP-only grammar
            grammars = [load_grammar("php", entry="language_php_only", purpose=purpose),
                        load_grammar("php", purpose=purpose)]
        else:
            grammars = [load_grammar(language, purpose=purpose)]
        self.plain = _Grammar(grammars[0], literals)
        self.tagged = _Grammar(grammars[-1], literals) if len(grammars) > 1 else self.plain

    def parse(self, code: str) -> _Parsed:
        if self.language == "python":
            code = _dedent(code)
        data = code.encode("utf-8", "surrogatepass")
        tagged = self.language == "php" and code.lstrip().startswith("<?")  # a whole PHP file
        grammar = self.tagged if tagged else self.plain
        try:
            root = parse(grammar.parser, data).root_node
            low, high = 0, len(data)
            if root.has_error and self.language in CLASS_WRAPPERS and not tagged:
                before, after = (part.encode() for part in CLASS_WRAPPERS[self.language])
                low, high = len(before), len(before) + len(data)
                data = before + data + after
                root = parse(grammar.parser, data).root_node
        except ParseTimeout as exc:
            raise _Unreadable(str(exc)) from None
        if root.has_error:
            raise _Unreadable("tree-sitter could not parse it")
        return _Parsed(grammar, data, root, low, high)

    def leaves(self, code: str) -> list[str]:
        """Texts of the leaves in source order, comments left out, a literal as one token."""
        parsed = self.parse(code)
        grammar, low, high = parsed.grammar, parsed.low, parsed.high
        tokens: list[str] = []
        cursor = parsed.root.walk()
        while True:
            node = cursor.node
            kind = node.kind_id
            descend = False
            if kind in grammar.comment_ids:
                pass
            elif kind in grammar.literal_ids or node.child_count == 0:
                if low <= node.start_byte < node.end_byte <= high:
                    tokens.append(parsed.text(node))
            else:
                descend = True
            if descend and cursor.goto_first_child():
                continue
            while not cursor.goto_next_sibling():
                if not cursor.goto_parent():
                    return tokens

    def tree(self, code: str, builder: _Builder, limit: float) -> None:
        parsed = self.parse(code)
        if not parsed.wrapped:
            _walk(parsed, parsed.root, -1, builder, limit)
            return
        root = builder.node(parsed.root.type, -1)
        for node in parsed.snippet_nodes():
            _walk(parsed, node, root, builder, limit)


def _walk(parsed: _Parsed, top, parent: int, builder: _Builder, limit: float) -> None:
    """Pre-order over the named nodes under ``top`` (see the module docstring for the rules)."""
    grammar = parsed.grammar
    cursor = top.walk()
    owners: list[int] = []  # for each level above the cursor: the token its children hang under
    owner = parent
    while len(builder.tokens) < limit:
        node = cursor.node
        children_owner = None  # set to descend into the node
        if node.is_named:
            kind = node.kind_id
            if kind in grammar.comment_ids:
                pass
            elif kind in grammar.literal_ids:
                builder.value(parsed.text(node), builder.node(node.type, owner))
            elif node.named_child_count == 0:
                index = builder.node(node.type, owner)
                for value in _leaf_values(parsed, node):
                    builder.value(value, index)
            else:
                children_owner = builder.node(node.type, owner)
        elif cursor.field_id in grammar.operator_fields and owner >= 0:
            builder.tokens[owner] += ":" + "_".join(parsed.text(node).split())  # `not in` -> not_in
        elif node.named_child_count:
            children_owner = owner  # an anonymous node around named ones: see through it
        if children_owner is not None and cursor.goto_first_child():
            owners.append(owner)
            owner = children_owner
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return
            owner = owners.pop()


_WORD = re.compile(r"[^\W\d]\w*")


def _leaf_values(parsed: _Parsed, node) -> list[str]:
    """A named leaf's value tokens: its text, or the keywords among its anonymous children.

    Punctuation is left out (an empty ``argument_list`` is not ``(``, ``)``), and so is a
    keyword the type already names (``pass_statement`` holds ``pass``); keywords the type
    does not name stay (``modifiers``: ``public``, ``static``).
    """
    if node.child_count == 0:
        return [parsed.text(node)] if node.end_byte > node.start_byte else []
    named_by_type = node.type.split("_")
    values = []
    for child in node.children:
        text = parsed.text(child)
        if _WORD.fullmatch(text) and text.lower() not in named_by_type:
            values.append(text)
    return values
