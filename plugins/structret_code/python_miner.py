"""The Python miner for ``structret mine``: functions and methods via the standard ``ast``.

Which functions, following CodeSearchNet's ``function_parser`` (parsers/python_parser.py):

* module-level functions and the methods of classes (of nested classes too, named
  ``Outer.Inner.method``; CodeSearchNet looked at module-level classes only);
* not functions nested in functions, nor definitions under a module-level
  ``if``/``try`` (CodeSearchNet only looked at the module's and classes' direct children);
* decorators are not part of the function's text, which starts at ``def``
  (CodeSearchNet took the ``function_definition`` inside a ``decorated_definition``).

``original_string`` is the source from ``def`` to the end of the body, as
CodeSearchNet cut it: the first line starts at ``def``, the following lines keep
their indentation. ``code`` is the same without the docstring statement.
``docstring`` is the docstring literal's text between its quotes, stripped, with
escapes and inner indentation as written (CodeSearchNet's choice too).
``code_tokens`` are the file's ``tokenize`` tokens inside the function, without the
docstring, comments and layout tokens (NEWLINE, NL, INDENT, DEDENT); a string
literal, f-strings included, is one token, as in CodeSearchNet's tree-sitter tokens.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings
from bisect import bisect_left
from typing import Iterator

from structret.plugin import MinedFunction

_LAYOUT = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENCODING,
    tokenize.ENDMARKER,
}
# Python 3.12+ tokenizes f-strings (3.14: t-strings) piece by piece; they are glued back.
_STRING_START = {getattr(tokenize, n) for n in ("FSTRING_START", "TSTRING_START") if hasattr(tokenize, n)}
_STRING_END = {getattr(tokenize, n) for n in ("FSTRING_END", "TSTRING_END") if hasattr(tokenize, n)}

_STRING_LITERAL = re.compile(r'[rRuU]?("""|\'\'\'|"|\')(.*)\1', re.DOTALL)

_FUNCTION_NODES = (ast.FunctionDef, ast.AsyncFunctionDef)
_DUNDER = re.compile(r"__\w+__")


class PythonMiner:
    """Functions and methods of Python files (``.py``)."""

    extensions = (".py",)
    # Python's standard methods are the dunders, marked ``is_special`` instead (any __name__ is one).
    standard_methods: frozenset[str] = frozenset()

    def functions(self, source: str, path: str) -> list[MinedFunction]:
        tree = _parse(source, path)
        text = _Source(source)
        tokens = _Tokens(text, path)
        return [_mine(name, node, in_class, text, tokens) for name, node, in_class in _definitions(tree.body)]

    def blank_docstrings(self, source: str, path: str) -> str:
        """``source`` with the text of every mined function's docstring replaced by spaces, its quotes and
        line breaks kept: the same code, the same line numbers, no description of it left."""
        tree = _parse(source, path)
        text = _Source(source)
        starts = [0]
        for line in text.lines:
            starts.append(starts[-1] + len(line) + 1)
        chars = list(source)
        for _, node, _ in _definitions(tree.body):
            doc = _docstring_node(node)
            if doc is None:
                continue
            assert doc.end_lineno is not None and doc.end_col_offset is not None  # ast.parse sets them
            (r1, c1), (r2, c2) = text.pos(doc.lineno, doc.col_offset), text.pos(doc.end_lineno, doc.end_col_offset)
            first, last = starts[r1 - 1] + c1, starts[r2 - 1] + c2
            match = _STRING_LITERAL.fullmatch(source[first:last])
            if match is None:  # "a" "b": left as it is (the benchmark drops a function whose docstring stays)
                continue
            inner_start = first + match.start(2)
            for i in range(inner_start, inner_start + len(match.group(2))):
                if chars[i] != "\n":
                    chars[i] = " "
        return "".join(chars)


def _parse(source: str, path: str) -> ast.Module:
    try:
        with warnings.catch_warnings():
            # invalid escapes ("\d") warn at parse time; mining is not the place to report them
            warnings.simplefilter("ignore")
            return ast.parse(source, filename=path)
    except SyntaxError:
        raise
    except ValueError as exc:  # null bytes, before Python 3.12
        raise SyntaxError(str(exc), (path, 1, 1, "")) from None
    except (RecursionError, MemoryError):
        raise SyntaxError("nested too deeply for Python's parser", (path, 1, 1, "")) from None


def _definitions(body: list[ast.stmt], prefix: str = "") -> Iterator[tuple[str, ast.AST, bool]]:
    """(qualified name, node, is a method) for each function directly in ``body`` or its classes."""
    for node in body:
        if isinstance(node, _FUNCTION_NODES):
            yield prefix + node.name, node, bool(prefix)
        elif isinstance(node, ast.ClassDef):
            yield from _definitions(node.body, f"{prefix}{node.name}.")


def _docstring_node(node: ast.AST) -> ast.Expr | None:
    first = node.body[0] if node.body else None  # type: ignore[attr-defined]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return first
    return None


def _mine(name: str, node, in_class: bool, text: _Source, tokens: _Tokens) -> MinedFunction:
    start = text.pos(node.lineno, node.col_offset)
    end = text.pos(node.end_lineno, node.end_col_offset)
    original = text.span(start, end)
    doc_node = _docstring_node(node)
    if doc_node is None:
        docstring, code = "", original
        code_tokens = tokens.between(start, end)
    else:
        assert doc_node.end_lineno is not None and doc_node.end_col_offset is not None  # ast.parse sets them
        doc_start = text.pos(doc_node.lineno, doc_node.col_offset)
        doc_end = text.pos(doc_node.end_lineno, doc_node.end_col_offset)
        value = doc_node.value
        assert isinstance(value, ast.Constant) and isinstance(value.value, str)  # _docstring_node checked
        docstring = _docstring_text(text.span(doc_start, doc_end), value.value)
        code = _without(text, start, end, doc_start, doc_end)
        after = tokens.between(doc_end, end)
        if after[:1] == [";"]:  # the ';' that only separated the docstring cut out of `code`
            after = after[1:]
        code_tokens = tokens.between(start, doc_start) + after
    short = name.rsplit(".", 1)[-1]
    return MinedFunction(
        func_name=name,
        original_string=original,
        code=code,
        docstring=docstring,
        start_line=node.lineno,
        end_line=node.end_lineno,
        code_tokens=code_tokens,
        is_constructor=in_class and short in ("__init__", "__new__"),
        is_special=bool(_DUNDER.fullmatch(short)),
    )


def _docstring_text(literal: str, value: str) -> str:
    """The docstring as written between its quotes; the parsed value for "a" "b" concatenations."""
    match = _STRING_LITERAL.fullmatch(literal)
    return (match.group(2) if match else value).strip()


def _without(text: _Source, start, end, doc_start, doc_end) -> str:
    """The function's source from ``start`` to ``end`` with the docstring cut out."""
    (doc_row, doc_col), (after_row, after_col) = doc_start, doc_end
    before_on_line = text.lines[doc_row - 1][:doc_col]
    after_on_line = text.lines[after_row - 1][after_col:]
    if not before_on_line.strip() and (not after_on_line.strip() or after_on_line.lstrip().startswith("#")):
        # The usual case: the docstring has lines of its own. Drop them, and the
        # blank lines after it, so the body reads as if it never had one.
        head = text.span(start, (doc_row - 1, len(text.lines[doc_row - 2])))
        row = after_row + 1
        while row <= end[0] and not text.lines[row - 1].strip():
            row += 1
        return head if row > end[0] else head + "\n" + text.span((row, 0), end)
    # def f(): """Doc."""; return 1  -- cut the literal and the ';' after it
    tail = text.span(doc_end, end).lstrip(" \t")
    if tail.startswith(";"):
        tail = tail[1:].lstrip(" \t")
    return (text.span(start, doc_start) + tail).rstrip()


class _Source:
    """A file's lines, addressed by (1-based row, 0-based character column)."""

    def __init__(self, source: str):
        self.lines = source.split("\n")

    def pos(self, row: int, byte_col: int) -> tuple[int, int]:
        """``ast`` counts columns in UTF-8 bytes; slicing needs characters."""
        line = self.lines[row - 1]
        if line.isascii():
            return row, byte_col
        return row, len(line.encode("utf-8")[:byte_col].decode("utf-8"))

    def span(self, start: tuple[int, int], end: tuple[int, int]) -> str:
        (r1, c1), (r2, c2) = start, end
        if r1 == r2:
            return self.lines[r1 - 1][c1:c2]
        return "\n".join([self.lines[r1 - 1][c1:], *self.lines[r1 : r2 - 1], self.lines[r2 - 1][:c2]])


class _Tokens:
    """The file's code tokens in order, each with its (row, column) start, tokenized once."""

    def __init__(self, text: _Source, path: str):
        self.starts: list[tuple[int, int]] = []
        self.texts: list[str] = []
        depth, begin = 0, (0, 0)
        readline = io.StringIO("\n".join(text.lines)).readline
        try:
            for tok in tokenize.generate_tokens(readline):
                if tok.type in _STRING_START:
                    if depth == 0:
                        begin = tok.start
                    depth += 1
                elif tok.type in _STRING_END:
                    depth -= 1
                    if depth == 0:
                        self._add(begin, text.span(begin, tok.end))
                elif depth or tok.type in _LAYOUT or not tok.string.strip():
                    continue
                else:
                    self._add(tok.start, tok.string)
        except tokenize.TokenError as exc:
            # ast accepted the file, so this is rare; the tokens would be wrong, so refuse
            row = exc.args[1][0] if len(exc.args) > 1 else 1
            raise SyntaxError(exc.args[0], (path, row, 1, "")) from None

    def _add(self, start: tuple[int, int], string: str) -> None:
        self.starts.append(start)
        self.texts.append(string)

    def between(self, start: tuple[int, int], end: tuple[int, int]) -> list[str]:
        """Tokens starting at or after ``start`` and before ``end``."""
        return self.texts[bisect_left(self.starts, start) : bisect_left(self.starts, end)]
