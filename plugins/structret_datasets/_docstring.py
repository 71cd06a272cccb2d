"""Taking the docstring out of a Python function's source.

CodeSearchNet's ``code`` for Python is the whole ``def`` span, docstring included (its
function_parser keeps the docstring node in ``function`` and leaves it out of
``function_tokens`` only). The query is that docstring's first paragraph, so a document
that kept it would contain its own query.

A small scanner rather than ``tokenize``: it reads only the header and the first
statement, and runs once per row of files with hundreds of thousands of rows.
"""

from __future__ import annotations

import re

# A string literal with an optional prefix; triple quotes first, so '"""' is not read as '""'.
_STRING = re.compile(
    r"""[rRbBuUfF]{0,2}(?:"{3}(?:\\.|[^\\])*?"{3}|'{3}(?:\\.|[^\\])*?'{3}|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')""",
    re.S,
)
# Blank lines, comments and the indentation before the body's first statement.
_GAP = re.compile(r"(?:[ \t]*(?:#[^\n]*)?(?:\\?\n))*[ \t]*")
# What may follow a docstring on its line: a comment, or the end of the line or code.
_REST = re.compile(r"[ \t]*(?:#[^\n]*)?(?:\n|$)")


def _header_end(code: str) -> int | None:
    """Index just past the ':' that ends the ``def`` header (outside brackets and strings)."""
    depth, i, n = 0, 0, len(code)
    while i < n:
        c = code[i]
        if c in "\"'":
            match = _STRING.match(code, i)
            if not match:
                return None
            i = match.end()
            continue
        if c == "#":
            i = code.find("\n", i)
            if i < 0:
                return None
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == ":" and depth == 0:
            return i + 1
        i += 1
    return None


def strip_python_docstring(code: str) -> str:
    """``code`` without its docstring statement; unchanged if it has none."""
    body = _header_end(code)
    if body is None:
        return code
    gap = _GAP.match(code, body)
    assert gap is not None  # it matches the empty string too
    start = gap.end()
    literal = _STRING.match(code, start)
    # '"abc".join(x)' starts with a string too; a docstring is a statement of its own.
    rest = literal and _REST.match(code, literal.end())
    if not rest:
        return code
    line_start = code.rfind("\n", 0, start) + 1
    if code[line_start:start].strip():
        return code  # 'def f(): "doc"' on one line: leave it
    return code[:line_start] + code[rest.end():]
