"""CodeSearchNet's rules, the same for every language: what a function becomes as a row
(its query is the docstring's first paragraph, tokenized as CodeSearchNet did), which
functions are dropped and why, and which split a file lands in.

The miner plugin owns all language knowledge (see ``register_miners``): it finds the
functions and says which are constructors or special methods (``MinedFunction``) and
which names are the language's standard methods (``Miner.standard_methods``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Protocol, Sequence, runtime_checkable

SPLIT_NAMES = ("train", "valid", "test")

# Drop rules, in the order they are checked.
RULE_DUNDER = "dunder or constructor"
RULE_STANDARD = "standard method"
RULE_TEST = "'test' in name"
RULE_NO_DOC = "no docstring"
RULE_SHORT_DOC = "docstring < 3 tokens"
RULE_SHORT_CODE = "code < 3 lines"
RULE_DUPLICATE = "duplicate code"
RULES = (RULE_DUNDER, RULE_STANDARD, RULE_TEST, RULE_NO_DOC, RULE_SHORT_DOC, RULE_SHORT_CODE, RULE_DUPLICATE)

MIN_DOCSTRING_TOKENS = 3
MIN_CODE_LINES = 3

# CodeSearchNet's docstring tokenizer (function_parser, DOCSTRING_REGEX_TOKENIZER),
# written out long-hand. A word is a run of anything but whitespace and the
# delimiters below; each delimiter kind comes out as its own run ("...", "((").
# Commas and quotes are delimiters without a token of their own, so they vanish;
# '<' is not a delimiter but '>' is -- both quirks are CodeSearchNet's.
_DOCSTRING_TOKEN = re.compile(
    r"""
      [^\s,'"`.():\[\]=*;>{}+\-/\\]+     # a word
    | \\+ | \.+                          # runs of backslashes, dots
    | \(\) | \{\} | \[\]                 # empty bracket pairs stay together
    | \(+ | \)+ | \{+ | \}+ | \[+ | \]+  # runs of one bracket
    | :+ | =+ | \*+ | ;+ | >+ | \++ | -+ | /+
    """,
    re.VERBOSE,
)

_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_TAG_LINE = re.compile(r"^[ \t]*@", re.MULTILINE)


@dataclass
class MinedFunction:
    """One function or method as a miner found it, before any filtering."""

    func_name: str  # "Class.method" for methods, else "name"
    original_string: str  # the function's source as CodeSearchNet stores it
    code: str  # the source without its docstring
    docstring: str  # the whole docstring / doc comment, comment markers removed
    start_line: int  # 1-based, inclusive
    end_line: int
    code_tokens: list[str] = field(default_factory=list)
    is_constructor: bool = False
    # a method the language calls implicitly, such as Python's __repr__: dropped like a constructor
    is_special: bool = False


@runtime_checkable
class Miner(Protocol):
    """What ``register_miners`` factories return; see ``structret.mining``."""

    extensions: tuple[str, ...]

    def functions(self, source: str, path: str) -> list[MinedFunction]: ...


def tokenize_docstring(text: str) -> list[str]:
    """Split text into tokens exactly as CodeSearchNet's ``docstring_tokens`` were."""
    return _DOCSTRING_TOKEN.findall(text)


def docstring_summary(docstring: str) -> str:
    """The docstring's first paragraph: what a user would type as the query.

    Text before the first blank line; a docstring without one stops at its first
    ``@tag`` line (JavaDoc/JSDoc ``@param``), as in CodeSearchNet.
    """
    blank = _BLANK_LINE.search(docstring)
    if blank:
        return docstring[: blank.start()].strip()
    # CodeSearchNet cut at the first '@' anywhere, which also cut "{@link X}" and
    # e-mail addresses in half; only a line starting with '@' begins the tags.
    tag = _TAG_LINE.search(docstring)
    if tag:
        return docstring[: tag.start()].strip()
    return docstring.strip()


def partition_of(rel_path: str, splits: Sequence[float] = (0.8, 0.1, 0.1)) -> str:
    """The split a file belongs to: sha1 of its relative path mapped to [0, 1)."""
    digest = hashlib.sha1(rel_path.encode("utf-8")).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    bound = 0.0
    for name, share in zip(SPLIT_NAMES, splits):
        bound += share
        if u < bound:
            return name
    return SPLIT_NAMES[-1]  # u just under 1.0 with shares summing to 0.9999...


def drop_rule(
    fn: MinedFunction, docstring_tokens: list[str], standard_methods: frozenset[str] = frozenset()
) -> str | None:
    """The first CodeSearchNet rule ``fn`` fails (duplicates aside), or None to keep it."""
    short_name = fn.func_name.rsplit(".", 1)[-1]
    if fn.is_constructor or fn.is_special:
        return RULE_DUNDER
    if short_name in standard_methods:
        return RULE_STANDARD
    if "test" in fn.func_name.lower():
        return RULE_TEST
    if not fn.docstring.strip():
        return RULE_NO_DOC
    if len(docstring_tokens) < MIN_DOCSTRING_TOKENS:
        return RULE_SHORT_DOC
    if sum(1 for line in fn.code.splitlines() if line.strip()) < MIN_CODE_LINES:
        return RULE_SHORT_CODE
    return None


# Training pairs from functions without a docstring (``structret mine --structure-pairs``), by kind.
PAIR_LEADING_COMMENT = "leading-comment"  # the comment opening the body -> the code without it
PAIR_NAME_SIGNATURE = "name-signature"  # the name's words and the parameters -> the body
_IDENTIFIER_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_LINE_COMMENT = re.compile(r"^\s*(?:#|//+|--)\s?(.*)$")


def name_words(name: str) -> list[str]:
    """``Repo.resetHomeDir`` -> [repo, reset, home, dir]; ``read_file`` -> [read, file]."""
    return [part.lower() for part in _IDENTIFIER_PART.findall(name)]


def structure_pair(fn: MinedFunction) -> tuple[str, str, str] | None:
    """(kind, query, document) for a function that has no docstring, from its own structure,
    or None when it gives no usable query (CodeRetriever's unimodal pairs, issue 27):

    * ``leading-comment``: the body opens with a line comment of 3+ tokens: that comment is
      the query, the code without that line the document;
    * ``name-signature``: else, the words of its (class and) name, 2 or more, with its
      parameter list as the query, and the body without the signature line as the document.

    The document must keep CodeSearchNet's 3 non-empty lines.
    """
    lines = fn.code.splitlines()
    if len(lines) < 2:
        return None
    for i, line in enumerate(lines[1:], 1):
        if not line.strip():
            continue
        comment = _LINE_COMMENT.match(line)
        if comment and len(tokenize_docstring(comment.group(1))) >= MIN_DOCSTRING_TOKENS:
            return _pair(PAIR_LEADING_COMMENT, comment.group(1).strip(), lines[:i] + lines[i + 1:])
        break
    words = name_words(fn.func_name)
    if len(words) < 2:
        return None
    head = lines[0]
    opened, closed = head.find("("), head.rfind(")")
    params = head[opened + 1:closed].strip() if 0 <= opened < closed else ""
    query = " ".join(words) + (f" ({params})" if params else "")
    return _pair(PAIR_NAME_SIGNATURE, query, lines[1:])


def _pair(kind: str, query: str, document: list[str]) -> tuple[str, str, str] | None:
    if sum(1 for line in document if line.strip()) < MIN_CODE_LINES:
        return None
    return kind, query, "\n".join(document)


def check_splits(splits: Sequence[float]) -> tuple[float, float, float]:
    """``splits`` as three floats for train, valid and test; a clear error unless they are shares of 1."""
    values = tuple(float(s) for s in splits)
    if len(values) != 3 or any(v < 0 for v in values) or abs(sum(values) - 1.0) > 1e-6:
        raise ValueError(
            f"splits={tuple(splits)!r}: give three non-negative shares for train, valid and test "
            f"that add up to 1, e.g. (0.8, 0.1, 0.1)."
        )
    return values  # type: ignore[return-value]
