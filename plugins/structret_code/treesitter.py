"""What every tree-sitter user of this plugin shares: loading a grammar, parsing with a time
limit, language names, and the class wrapper that makes a lone method parse.

The miners, the identifier extractor and the linearizers all import from here (and never
from each other), so none of them depends on another's module.
"""

from __future__ import annotations

import importlib
import time
from typing import TYPE_CHECKING

from structret.errors import PluginError

if TYPE_CHECKING:  # imported when a grammar is loaded: the python-tokenize extractor never pays for it
    import tree_sitter

# A method as CodeSearchNet stores it (``public function f()``, ``async load() {}``, a Java
# constructor) is not a valid program on its own; it parses inside a class body. The
# wrapper's own nodes are outside the snippet's byte range and are left out.
CLASS_WRAPPERS: dict[str, tuple[str, str]] = {
    "java": ("class _Wrapper {\n", "\n}"),
    "javascript": ("class _Wrapper {\n", "\n}"),
    "php": ("class _Wrapper {\n", "\n}"),
}

_ALIASES = {"py": "python", "js": "javascript", "golang": "go", "rb": "ruby"}


def language_name(language: str | None) -> str | None:
    """The grammar name of ``language``, lower case, common short forms resolved (``js`` -> javascript)."""
    if not language:
        return None
    return _ALIASES.get(language.lower(), language.lower())


# tree-sitter's error recovery can take minutes on megabytes of garbage (2 MB of "x x x ..."
# as Java: 30 s): a parse that runs longer is cancelled, and the text counts as a failure
PARSE_SECONDS = 5.0


class ParseTimeout(Exception):
    """tree-sitter ran out of time (PARSE_SECONDS); the message is the failure reason."""


def parse(parser, data: bytes):
    """``parser.parse(data)``, cancelled after PARSE_SECONDS (raising ParseTimeout)."""
    deadline = time.monotonic() + PARSE_SECONDS
    try:
        # the progress callback that can cancel a parse is only called when reading through a callback
        tree = parser.parse(lambda byte, _point: data[byte : byte + 65536],
                            progress_callback=lambda *_: time.monotonic() > deadline)
    except ValueError:  # "Parsing failed": the callback cancelled it
        if time.monotonic() <= deadline:
            raise
        tree = None
    if tree is None:
        parser.reset()  # else the next parse would resume this one
        raise ParseTimeout(f"tree-sitter gave up after {PARSE_SECONDS:g} s")
    return tree


def load_grammar(language: str, *, entry: str | None = None, purpose: str | None = None) -> tree_sitter.Language:
    """The installed tree-sitter grammar of ``language``.

    ``entry`` names the function of the grammar package that returns the language, for
    packages that ship several grammars; ``purpose`` ("mining go") starts the error message.
    """
    import tree_sitter

    package = f"tree-sitter-{language.replace('_', '-')}"
    try:
        module = importlib.import_module(f"tree_sitter_{language.replace('-', '_')}")
    except ModuleNotFoundError:
        raise PluginError(
            f"{purpose or f'mining {language}'} needs the tree-sitter grammar package '{package}', "
            f"which is not installed. Install it with: pip install {package}"
        ) from None
    if entry is None:
        # tree-sitter-php ships two grammars; language_php also reads the HTML around <?php ?>
        entry = "language_php" if language == "php" else "language"
        if not hasattr(module, entry):  # e.g. tree_sitter_typescript.language_typescript
            entry = f"language_{language.replace('-', '_')}"
    function = getattr(module, entry, None)
    if function is None:
        raise PluginError(
            f"the grammar package '{package}' has no function '{entry}' returning its language; "
            f"it may be too old or too new for structret. Try: pip install -U {package}"
        )
    try:
        return tree_sitter.Language(function())
    except ValueError as exc:  # grammar built for another tree-sitter ABI
        raise PluginError(
            f"{package} does not work with the installed tree-sitter {getattr(tree_sitter, '__version__', '')}: "
            f"{exc}. Install versions that fit: pip install -U tree-sitter {package}"
        ) from None
