"""Python's tokenize with character offsets, shared by the python-tokenize extractor and
the raw linearizer."""

from __future__ import annotations

import io
import tokenize
from typing import Iterator, NamedTuple

# Python 3.12+ tokenizes f-strings (3.14: t-strings) piece by piece; they are glued back
# into one STRING token so every Python version sees the same tokens.
_STRING_START = frozenset(getattr(tokenize, n) for n in ("FSTRING_START", "TSTRING_START") if hasattr(tokenize, n))
_STRING_END = frozenset(getattr(tokenize, n) for n in ("FSTRING_END", "TSTRING_END") if hasattr(tokenize, n))


class Token(NamedTuple):
    type: int
    string: str
    start: int  # character offsets into the code
    end: int
    line: int


def python_tokens(code: str) -> Iterator[Token]:
    """Every token of ``code`` with character offsets; raises tokenize.TokenError or
    SyntaxError (IndentationError included) when the code does not tokenize."""
    line_starts: list[int] = []  # character offset of each line tokenize has read
    lines = io.StringIO(code)
    position = 0

    def readline() -> str:
        nonlocal position
        line = lines.readline()
        line_starts.append(position)
        position += len(line)
        return line

    def offset(point: tuple[int, int]) -> int:
        return line_starts[point[0] - 1] + point[1]

    depth, begin = 0, 0
    for token in tokenize.generate_tokens(readline):
        if token.type in _STRING_START:
            if depth == 0:
                begin = offset(token.start)
            depth += 1
        elif token.type in _STRING_END:
            depth -= 1
            if depth == 0:
                end = offset(token.end)
                yield Token(tokenize.STRING, code[begin:end], begin, end, token.start[0])
        elif not depth:
            yield Token(token.type, token.string, offset(token.start), offset(token.end), token.start[0])
