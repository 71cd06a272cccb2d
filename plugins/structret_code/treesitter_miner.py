"""Miners for Go, Java, JavaScript, PHP and Ruby via tree-sitter (``structret mine``).

Which functions each language yields, and their names:

* Go: top-level ``func`` declarations (``Name``) and methods (``Receiver.Name``);
* Java: methods with a body and constructors of classes, interfaces, enums and
  records, nested types included (``Outer.Inner.method``); not those of local or
  anonymous classes inside method bodies;
* JavaScript: function declarations, class and object methods (``Class.method``), and
  function expressions or arrow functions assigned to a name (``const f = ...``,
  ``a.b.f = ...``, ``{f: ...}``), anywhere in the file, as CodeSearchNet took
  functions anywhere; anonymous functions that are not assigned are left out;
* PHP: functions, and methods of classes, traits, interfaces and enums (``Class.method``);
* Ruby: methods and singleton methods, named by their enclosing modules and classes
  (``Module.Class.method``; ``def self.x`` in ``Class`` is ``Class.x``).

Like CodeSearchNet, ``original_string`` and ``code`` are the function's own text
(the doc comment above it is not part of it), and a string literal is a single code
token. The docstring is the doc comment right above the function (no blank line
between): a run of ``//`` lines (Go) or ``#`` lines (Ruby), or one ``/** ... */``
block (Java, JavaScript, PHP; Go accepts a ``/* */`` block too), with the comment
markers removed. A file tree-sitter cannot parse without error is refused with
``SyntaxError`` at the first error, so no function is mined from a misread tree.
"""

from __future__ import annotations

import bisect
import re
from typing import Callable, Iterator

import tree_sitter

from structret.plugin import MinedFunction
from structret_code.treesitter import ParseTimeout, load_grammar, parse

# (name, function node, anchor node the doc comment sits above, is a constructor)
Found = tuple[str, "tree_sitter.Node", "tree_sitter.Node", bool]

_GO_DIRECTIVE = re.compile(r"//[a-z0-9]+:[a-z0-9]")  # //go:generate, //nolint:x -- not documentation
# __name__ methods are special by convention (Ruby's __send__, JavaScript's __proto__ accessors)
_DUNDER = re.compile(r"__\w+__")


class TreeSitterMiner:
    """Functions of one language, found by a tree walk over the tree-sitter parse."""

    def __init__(
        self,
        language: str,
        extensions: tuple[str, ...],
        find: Callable[[_File], Iterator[Found]],
        *,
        comment_types: frozenset[str] = frozenset({"comment"}),
        string_types: frozenset[str] = frozenset(),
        line_comment: str | None = None,
        block_doc: str | None = "/**",
        standard_methods: frozenset[str] = frozenset(),
    ):
        self.language = language
        self.extensions = extensions
        self.standard_methods = standard_methods
        self._find = find
        self._comment_types = comment_types
        self._string_types = string_types
        self._line_comment = line_comment  # prefix of a one-line doc comment, e.g. "//"
        self._block_doc = block_doc  # prefix of a block doc comment, e.g. "/**"
        self._parser = tree_sitter.Parser(load_grammar(language))
        assert self._parser.language is not None  # just given
        pattern = "[" + " ".join(f"({t})" for t in sorted(comment_types)) + "] @comment"
        self._comments = tree_sitter.Query(self._parser.language, pattern)

    def functions(self, source: str, path: str) -> list[MinedFunction]:
        data = source.encode("utf-8")
        try:
            root = parse(self._parser, data).root_node
        except ParseTimeout as exc:
            # skipped like a file that does not parse: one pathological file must not stall a run
            raise SyntaxError(f"{exc} (tree-sitter-{self.language})", (path, 1, 1, "")) from None
        if root.has_error:
            raise _syntax_error(root, path, data, self.language)
        file = _File(data, root)
        comments = tree_sitter.QueryCursor(self._comments).captures(root).get("comment", [])
        comments.sort(key=lambda n: n.start_byte)
        comment_ends = [c.end_byte for c in comments]
        mined = []
        for name, node, anchor, is_constructor in self._find(file):
            text = file.text(node)
            mined.append(
                MinedFunction(
                    func_name=name,
                    original_string=text,
                    code=text,
                    docstring=self._doc_comment(file, anchor, comments, comment_ends),
                    start_line=node.start_point.row + 1,
                    end_line=node.end_point.row + 1,
                    code_tokens=self._tokens(file, node),
                    is_constructor=is_constructor,
                    is_special=bool(_DUNDER.fullmatch(name.rsplit(".", 1)[-1])),
                )
            )
        return mined

    def blank_docstrings(self, source: str, path: str) -> str:
        """``source`` with every mined function's doc comment replaced by spaces, line breaks kept: the same
        code, the same line numbers, no description of it left."""
        data = source.encode("utf-8")
        try:
            root = parse(self._parser, data).root_node
        except ParseTimeout as exc:
            raise SyntaxError(f"{exc} (tree-sitter-{self.language})", (path, 1, 1, "")) from None
        file = _File(data, root)
        comments = tree_sitter.QueryCursor(self._comments).captures(root).get("comment", [])
        comments.sort(key=lambda n: n.start_byte)
        comment_ends = [c.end_byte for c in comments]
        blanked = bytearray(data)
        for _, _, anchor, _ in self._find(file):
            for node in self._doc_nodes(file, anchor, comments, comment_ends):
                for i in range(node.start_byte, node.end_byte):
                    if blanked[i] != 0x0A:
                        blanked[i] = 0x20
        return blanked.decode("utf-8", errors="replace")

    def _doc_nodes(self, file: _File, anchor, comments: list, comment_ends: list[int]) -> list:
        """The comment nodes of the doc comment right above ``anchor`` (in order), or []."""
        i = bisect.bisect_right(comment_ends, anchor.start_byte) - 1
        if i < 0 or not _adjacent(file.data, comments[i], anchor.start_byte):
            return []
        first = file.text(comments[i])
        if self._block_doc and first.startswith(self._block_doc):
            return [comments[i]]
        if not (self._line_comment and first.startswith(self._line_comment)):
            return []
        run = [comments[i]]
        while i > 0 and _adjacent(file.data, comments[i - 1], comments[i].start_byte):
            if not file.text(comments[i - 1]).startswith(self._line_comment):
                break
            run.append(comments[i - 1])
            i -= 1
        return list(reversed(run))

    def _doc_comment(self, file: _File, anchor, comments: list, comment_ends: list[int]) -> str:
        """The cleaned doc comment right above ``anchor``, or ""."""
        nodes = self._doc_nodes(file, anchor, comments, comment_ends)
        if len(nodes) == 1 and self._block_doc and file.text(nodes[0]).startswith(self._block_doc):
            return _clean(file.text(nodes[0]))
        lines = [file.text(n) for n in nodes if not _GO_DIRECTIVE.match(file.text(n))]
        return _clean("\n".join(lines))

    def _tokens(self, file: _File, node) -> list[str]:
        """Leaf texts under ``node``, comments left out, a string literal as one token."""
        tokens = []
        cursor = node.walk()
        while True:
            current = cursor.node
            kind = current.type
            atomic = kind in self._string_types
            if (atomic or current.child_count == 0) and current.end_byte > current.start_byte:
                if kind not in self._comment_types:
                    tokens.append(file.text(current))
            if not atomic and cursor.goto_first_child():
                continue
            while not cursor.goto_next_sibling():
                if not cursor.goto_parent():
                    return tokens


class _File:
    """A parsed file: its bytes and root, and text by node."""

    def __init__(self, data: bytes, root):
        self.data = data
        self.root = root

    def text(self, node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8")

    def name(self, node, field: str = "name") -> str:
        child = node.child_by_field_name(field)
        return self.text(child) if child is not None else ""


def _adjacent(data: bytes, comment, start_byte: int) -> bool:
    """``comment`` ends right above (or just before) ``start_byte`` and begins its own line."""
    gap = data[comment.end_byte : start_byte]
    if gap.strip() or gap.count(b"\n") > 1:
        return False
    line_start = data.rfind(b"\n", 0, comment.start_byte) + 1
    return not data[line_start : comment.start_byte].strip()  # not a trailing `x = 1 // note`


def _clean(comment: str) -> str:
    """Comment text without markers (/** * */ // #), each line stripped (as CodeSearchNet did)."""
    lines = []
    for line in comment.split("\n"):
        line = line.strip()
        if line in ("=begin", "=end"):  # Ruby's block comment
            continue
        if line.endswith("*/"):
            line = line[:-2]
        if line.startswith("/*"):
            line = line[2:].lstrip("*")
        elif line.startswith("*"):
            line = line[1:]
        elif line.startswith("//"):
            line = line.lstrip("/")
        elif line.startswith("#"):
            line = line.lstrip("#")
        lines.append(line.strip())
    return "\n".join(lines).strip()


def _syntax_error(root, path: str, data: bytes, language: str) -> SyntaxError:
    node = root
    while not (node.is_error or node.is_missing):
        bad = [c for c in node.children if c.has_error or c.is_error or c.is_missing]
        if not bad:
            break
        node = bad[0]
    row, col = node.start_point
    line = data.split(b"\n")[row].decode("utf-8", "replace") if row < data.count(b"\n") + 1 else ""
    what = f"expected {node.type}" if node.is_missing else "tree-sitter could not parse this"
    return SyntaxError(f"{what} (tree-sitter-{language})", (path, row + 1, col + 1, line))


# --- Go ---------------------------------------------------------------------------


def _find_go(file: _File) -> Iterator[Found]:
    for node in file.root.children:
        if node.type == "function_declaration":
            yield file.name(node), node, node, False
        elif node.type == "method_declaration":
            receiver = _go_receiver_type(file, node.child_by_field_name("receiver"))
            name = file.name(node)
            yield (f"{receiver}.{name}" if receiver else name), node, node, False


def _go_receiver_type(file: _File, receiver) -> str:
    """``(s *Server[T])`` -> ``Server``."""
    if receiver is None:
        return ""
    for param in receiver.named_children:
        if param.type == "parameter_declaration":
            kind = param.child_by_field_name("type")
            while kind is not None and kind.type in ("pointer_type", "generic_type", "parenthesized_type"):
                kind = kind.child_by_field_name("type") or (kind.named_children or [None])[0]
            return file.text(kind) if kind is not None else ""
    return ""


# --- Java -------------------------------------------------------------------------

_JAVA_TYPES = {
    "class_declaration",
    "interface_declaration",
    "enum_declaration",
    "record_declaration",
    "annotation_type_declaration",
}
_JAVA_BODIES = {"class_body", "interface_body", "enum_body", "enum_body_declarations", "annotation_type_body"}


def _find_java(file: _File) -> Iterator[Found]:
    yield from _java_members(file, file.root.children, "")


def _java_members(file: _File, nodes, prefix: str) -> Iterator[Found]:
    for node in nodes:
        if node.type in _JAVA_TYPES:
            body = node.child_by_field_name("body")
            if body is not None:
                yield from _java_members(file, body.children, f"{prefix}{file.name(node)}.")
        elif node.type in _JAVA_BODIES:
            yield from _java_members(file, node.children, prefix)
        elif node.type == "method_declaration" and node.child_by_field_name("body") is not None:
            yield f"{prefix}{file.name(node)}", node, node, False
        elif node.type in ("constructor_declaration", "compact_constructor_declaration"):
            yield f"{prefix}{file.name(node)}", node, node, True


# --- JavaScript ---------------------------------------------------------------------

_JS_DECLARATIONS = {"function_declaration", "generator_function_declaration"}
_JS_EXPRESSIONS = {"function_expression", "arrow_function", "generator_function", "function"}
# nodes a doc comment may sit above instead of the function itself
_JS_WRAPPERS = {
    "export_statement",
    "lexical_declaration",
    "variable_declaration",
    "variable_declarator",
    "expression_statement",
    "assignment_expression",
}


def _find_js(file: _File) -> Iterator[Found]:
    stack = [file.root]
    while stack:
        node = stack.pop()
        found = _js_function(file, node)
        if found is not None:
            yield found
        stack.extend(reversed(node.children))


def _js_function(file: _File, node) -> Found | None:
    kind = node.type
    if kind in _JS_DECLARATIONS:
        return file.name(node), node, _js_anchor(node), False
    if kind == "method_definition":
        name = file.name(node)
        owner = _js_class_name(file, node.parent)
        return (f"{owner}.{name}" if owner else name), node, node, name == "constructor"
    if kind not in _JS_EXPRESSIONS or node.parent is None:
        return None
    parent = node.parent
    if parent.type == "variable_declarator" and parent.child_by_field_name("value") == node:
        return file.name(parent), node, _js_anchor(parent), False
    if parent.type == "assignment_expression" and parent.child_by_field_name("right") == node:
        target = " ".join(file.text(parent.child_by_field_name("left")).split())
        return target, node, _js_anchor(parent), False
    if parent.type == "pair" and parent.child_by_field_name("value") == node:
        return file.name(parent, "key").strip("'\"`"), node, parent, False
    if parent.type == "field_definition" and parent.child_by_field_name("value") == node:
        name = file.name(parent, "property")
        owner = _js_class_name(file, parent.parent)
        return (f"{owner}.{name}" if owner else name), node, parent, False
    return None


def _js_anchor(node):
    while node.parent is not None and node.parent.type in _JS_WRAPPERS:
        if node.type == "variable_declarator" and node.prev_named_sibling is not None:
            break  # in `const a = 1, f = () => {}` the comment above `const` is a's
        node = node.parent
    return node


def _js_class_name(file: _File, body) -> str:
    if body is None or body.type != "class_body" or body.parent is None:
        return ""
    return file.name(body.parent)


# --- PHP ----------------------------------------------------------------------------

_PHP_TYPES = {"class_declaration", "trait_declaration", "interface_declaration", "enum_declaration"}


def _find_php(file: _File) -> Iterator[Found]:
    stack: list[tuple[tree_sitter.Node, str]] = [(file.root, "")]
    while stack:
        node, prefix = stack.pop()
        kind = node.type
        if kind == "function_definition":
            yield file.name(node), node, node, False
            continue  # functions inside functions are not mined
        if kind == "method_declaration":
            if node.child_by_field_name("body") is not None:
                name = file.name(node)
                yield f"{prefix}{name}", node, node, name.lower() == "__construct"
            continue
        if kind in _PHP_TYPES:
            prefix = f"{file.name(node)}."
        stack.extend((child, prefix) for child in reversed(node.children))


# --- Ruby ---------------------------------------------------------------------------


def _find_ruby(file: _File) -> Iterator[Found]:
    stack: list[tuple[tree_sitter.Node, str]] = [(file.root, "")]
    while stack:
        node, prefix = stack.pop()
        kind = node.type
        if kind == "method":
            name = file.name(node)
            yield f"{prefix}{name}", node, node, name == "initialize"
            continue  # methods defined inside methods are not mined
        if kind == "singleton_method":
            owner = file.name(node, "object")
            scope = prefix if owner == "self" else f"{owner}."
            yield f"{scope}{file.name(node)}", node, node, False
            continue
        if kind in ("class", "module"):
            prefix = f"{prefix}{file.name(node)}."
        stack.extend((child, prefix) for child in reversed(node.children))


# --- the miners, as registered by structret_code.plugin ------------------------------


def go() -> TreeSitterMiner:
    return TreeSitterMiner(
        "go",
        (".go",),
        _find_go,
        string_types=frozenset({"interpreted_string_literal", "raw_string_literal", "rune_literal"}),
        line_comment="//",
        block_doc="/*",
    )


def java() -> TreeSitterMiner:
    return TreeSitterMiner(
        "java",
        (".java",),
        _find_java,
        comment_types=frozenset({"line_comment", "block_comment"}),
        string_types=frozenset({"string_literal", "character_literal"}),
        # CodeSearchNet's blacklist: java.lang.Object's methods
        standard_methods=frozenset({"toString", "hashCode", "equals", "finalize", "notify", "notifyAll", "clone"}),
    )


def javascript() -> TreeSitterMiner:
    return TreeSitterMiner(
        "javascript",
        (".js", ".mjs", ".cjs"),
        _find_js,
        comment_types=frozenset({"comment", "html_comment"}),
        string_types=frozenset({"string", "template_string", "regex"}),
        standard_methods=frozenset({"toString", "toLocaleString", "valueOf"}),
    )


def php() -> TreeSitterMiner:
    return TreeSitterMiner(
        "php",
        (".php",),
        _find_php,
        string_types=frozenset({"string", "encapsed_string", "heredoc", "nowdoc"}),
        # CodeSearchNet's blacklist of magic methods (__construct counts as a constructor)
        standard_methods=frozenset(
            {
                "__destruct", "__call", "__callStatic", "__get", "__set", "__isset", "__unset",
                "__sleep", "__wakeup", "__toString", "__invoke", "__set_state", "__clone",
                "__debugInfo", "__serialize", "__unserialize",
            }
        ),
    )


def ruby() -> TreeSitterMiner:
    return TreeSitterMiner(
        "ruby",
        (".rb",),
        _find_ruby,
        string_types=frozenset({"string", "regex", "subshell", "heredoc_body"}),
        line_comment="#",
        block_doc="=begin",
        # CodeSearchNet's blacklist (initialize counts as a constructor)
        standard_methods=frozenset(
            {"to_text", "display", "dup", "clone", "equal?", "==", "<=>", "===", "<=", "<", ">", ">=",
             "between?", "eql?", "hash"}
        ),
    )
