import keyword
import re

from structret.records import Entity

IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
# Keywords shared by the CodeSearchNet languages; they are syntax, not names a model should recover.
KEYWORDS = frozenset(keyword.kwlist) | {
    "func", "var", "let", "const", "function", "return", "if", "else", "for", "while", "new",
    "this", "self", "null", "nil", "true", "false", "public", "private", "protected", "static",
    "void", "int", "class", "end", "def", "package", "import", "type", "struct", "interface",
}
SUBTOKEN = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


class RegexIdentifiers:
    """Every identifier-shaped word that is not a keyword, as character spans."""

    def __init__(self, min_length: int = 1):
        self.min_length = min_length

    def extract(self, text: str, language: str | None = None) -> list[Entity]:
        return [
            Entity(m.start(), m.end(), m.group(), "identifier")
            for m in IDENTIFIER.finditer(text)
            if m.group() not in KEYWORDS and len(m.group()) >= self.min_length
        ]


def subtokens(identifier: str) -> list[str]:
    """readInputFile -> [read, input, file]; HTTPServer_v2 -> [http, server, v, 2]."""
    return [t.lower() for t in SUBTOKEN.findall(identifier)]
