"""A project's files cut into search units: every line of every file it reads in exactly one unit.

Code is parsed with the language's tree-sitter grammar (a wheel from PyPI each, 19 languages). A
definition (function, method, class, struct, enum, interface, trait, impl, module, namespace ...) is a
unit with the comments and attributes right above it; the code between definitions (imports,
module-level statements, constants, a class's fields) is a unit of its own, merged with its neighbours
up to the size cap. A class larger than the cap, or any class when ``methods_alone`` is on, is cut into
its header (the lines up to its first member definition: signature, fields, docs) and one unit per
member, each recording the class as its parent. A unit still larger than the cap is split at line
boundaries into parts that keep its name. tree-sitter recovers from syntax errors, so a file that
parses with errors keeps the units of what parses, and the lines around the error are a unit too.

Units tile a file: each starts where the walk put a cut and runs to the line before the next cut, so
no line is lost and none is in two units (blank lines at a unit's ends belong to none: adding a function
below another leaves the other's text, and so its vector, as it was). Text files no grammar reads (Markdown, reStructuredText,
YAML, TOML, JSON, SQL, Dockerfiles, shell scripts without an extension ...) are cut at headings, then
at blank lines, then into windows of lines, to the same cap.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable

from structret.records import Unit

# extension -> language; ".h" is sniffed (_header_language): C++ when it reads like C++
EXTENSIONS = {
    ".py": "python", ".pyi": "python", ".pyw": "python",
    ".java": "java", ".go": "go",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
    ".rb": "ruby", ".rake": "ruby", ".gemspec": "ruby",
    ".php": "php",
    ".rs": "rust",
    ".c": "c", ".h": "c",
    ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".c++": "cpp", ".hh": "cpp", ".hpp": "cpp", ".hxx": "cpp",
    ".h++": "cpp", ".ipp": "cpp", ".tpp": "cpp", ".inl": "cpp",
    ".cs": "csharp",
    ".kt": "kotlin", ".kts": "kotlin",
    ".scala": "scala", ".sc": "scala",
    ".swift": "swift",
    ".ex": "elixir", ".exs": "elixir",
    ".hs": "haskell", ".lhs": "haskell",
    ".lua": "lua",
    ".zig": "zig",
    ".sh": "bash", ".bash": "bash", ".bats": "bash", ".zsh": "bash",
}
# language -> (module, function returning the grammar)
GRAMMARS = {
    "python": ("tree_sitter_python", "language"), "java": ("tree_sitter_java", "language"),
    "go": ("tree_sitter_go", "language"), "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"), "ruby": ("tree_sitter_ruby", "language"),
    "php": ("tree_sitter_php", "language_php"), "rust": ("tree_sitter_rust", "language"),
    "c": ("tree_sitter_c", "language"), "cpp": ("tree_sitter_cpp", "language"),
    "csharp": ("tree_sitter_c_sharp", "language"), "kotlin": ("tree_sitter_kotlin", "language"),
    "scala": ("tree_sitter_scala", "language"), "swift": ("tree_sitter_swift", "language"),
    "elixir": ("tree_sitter_elixir", "language"), "haskell": ("tree_sitter_haskell", "language"),
    "lua": ("tree_sitter_lua", "language"), "zig": ("tree_sitter_zig", "language"),
    "bash": ("tree_sitter_bash", "language"),
}
# text files read as text (no grammar): by extension, and by name
TEXT_EXTENSIONS = frozenset(
    ".md .markdown .rst .txt .adoc .org .yml .yaml .toml .json .jsonc .ini .cfg .conf .sql .graphql .proto "
    ".xml .html .htm .css .scss .less .vue .svelte .erb .tt .haml .slim .mustache .hbs .j2 .jinja .tmpl .tex "
    ".cmake .mk .gradle .properties .pxd .pyx .pxi .ml .mli .clj .cljs .erl .hrl .dart .r .jl .pl .pm .ps1 "
    ".bat .nim .v .sv .vhd .el .vim .fish .nix .tf .hcl .dockerfile .make .in .am .ac".split())
TEXT_NAMES = frozenset("dockerfile makefile gnumakefile rakefile gemfile procfile justfile vagrantfile "
                       "cmakelists.txt readme license changelog".split())

# node types that are a definition, by language: type -> kind. Every grammar's own names.
_COMMON = {"function_definition": "function", "function_declaration": "function", "method_declaration": "method",
           "class_declaration": "class", "class_definition": "class", "interface_declaration": "interface",
           "enum_declaration": "enum", "struct_declaration": "struct", "trait_declaration": "trait",
           "constructor_declaration": "method", "record_declaration": "class"}
DEFINITIONS: dict[str, dict[str, str]] = {
    "python": {"function_definition": "function", "class_definition": "class", "decorated_definition": "function"},
    "java": {**_COMMON, "annotation_type_declaration": "interface"},
    "go": {"function_declaration": "function", "method_declaration": "method", "type_declaration": "type"},
    "javascript": {"function_declaration": "function", "generator_function_declaration": "function",
                   "class_declaration": "class", "method_definition": "method"},
    "typescript": {"function_declaration": "function", "generator_function_declaration": "function",
                   "class_declaration": "class", "abstract_class_declaration": "class", "method_definition": "method",
                   "interface_declaration": "interface", "type_alias_declaration": "type",
                   "enum_declaration": "enum", "internal_module": "namespace", "module": "namespace",
                   "function_signature": "function", "abstract_method_signature": "method"},
    "ruby": {"method": "method", "singleton_method": "method", "class": "class", "module": "module",
             "singleton_class": "class"},
    "php": {**_COMMON, "namespace_definition": "namespace"},
    "rust": {"function_item": "function", "function_signature_item": "function", "struct_item": "struct",
             "enum_item": "enum", "union_item": "struct", "trait_item": "trait", "impl_item": "impl",
             "mod_item": "module", "macro_definition": "macro", "type_item": "type"},
    "c": {"function_definition": "function", "struct_specifier": "struct", "union_specifier": "struct",
          "enum_specifier": "enum", "type_definition": "type", "preproc_function_def": "macro"},
    "cpp": {"function_definition": "function", "struct_specifier": "struct", "union_specifier": "struct",
            "enum_specifier": "enum", "class_specifier": "class", "type_definition": "type",
            "namespace_definition": "namespace", "preproc_function_def": "macro", "alias_declaration": "type",
            "concept_definition": "type"},
    "csharp": {**_COMMON, "namespace_declaration": "namespace", "file_scoped_namespace_declaration": "namespace",
               "destructor_declaration": "method", "operator_declaration": "method",
               "conversion_operator_declaration": "method", "property_declaration": "property",
               "indexer_declaration": "property", "event_declaration": "property",
               "delegate_declaration": "type"},
    "kotlin": {"class_declaration": "class", "object_declaration": "class", "function_declaration": "function",
               "companion_object": "class", "secondary_constructor": "method", "type_alias": "type"},
    "scala": {"class_definition": "class", "object_definition": "class", "trait_definition": "trait",
              "enum_definition": "enum", "function_definition": "function", "function_declaration": "function",
              "given_definition": "function", "extension_definition": "impl", "package_object": "module"},
    "swift": {"class_declaration": "class", "protocol_declaration": "interface", "function_declaration": "function",
              "init_declaration": "method", "deinit_declaration": "method", "subscript_declaration": "method",
              "protocol_function_declaration": "method", "typealias_declaration": "type"},
    "elixir": {},  # definitions are calls: _elixir_kind
    "haskell": {"function": "function", "signature": "function", "data_type": "type", "newtype": "type",
                "class": "class", "instance": "impl", "type_synomym": "type", "type_family": "type",
                "pattern_synonym": "function", "bind": "function"},
    "lua": {"function_declaration": "function"},
    "zig": {"function_declaration": "function", "test_declaration": "test"},
    "bash": {"function_definition": "function"},
}
DEFINITIONS["tsx"] = DEFINITIONS["typescript"]
# what wraps one definition (its decorators, export, template): kind and name are the definition's
_WRAPPERS = frozenset({"decorated_definition", "export_statement", "template_declaration", "ambient_declaration",
                       "annotated_expression"})
# declarations whose value may be a function or a class (const f = () => ..., M.f = function ... end)
_ASSIGNMENTS = frozenset({"lexical_declaration", "variable_declaration", "assignment_statement",
                          "local_variable_declaration", "property_declaration"})
_ASSIGNED_DEFINITIONS = {"arrow_function": "function", "function_expression": "function", "function": "function",
                         "function_definition": "function", "generator_function": "function", "class": "class",
                         "struct_declaration": "struct", "enum_declaration": "enum", "union_declaration": "struct",
                         "opaque_declaration": "struct"}
_ELIXIR = {"defmodule": "module", "defprotocol": "interface", "defimpl": "impl", "def": "function",
           "defp": "function", "defmacro": "macro", "defmacrop": "macro", "defguard": "function",
           "defguardp": "function", "defdelegate": "function", "defstruct": "struct", "defexception": "struct",
           "describe": "test", "test": "test"}
_CONTAINERS = frozenset({"class", "struct", "interface", "trait", "impl", "module", "namespace", "enum", "test"})
_NAMES = ("identifier", "type_identifier", "field_identifier", "property_identifier", "constant", "name",
          "simple_identifier", "word", "alias", "qualified_identifier", "scoped_identifier", "namespace_identifier",
          "dot_index_expression", "method_index_expression", "variable", "constructor", "scoped_type_identifier",
          "destructor_name", "operator_name", "private_property_identifier", "type_constructor")
_MAX_DEPTH = 40  # nesting walked; below it a definition's inside is one unit (deeply nested code is not an error)
# a line that only closes what is above it: punctuation, Ruby's and Lua's end, shell's fi/done/esac, #endif
_CLOSER = re.compile(r"^\s*(?:[\]\)\}>;,.]*|end|fi|done|esac|#\s*endif\b.*)\s*[\]\)\};,]*\s*$")
_HEADER_LANGUAGE = re.compile(rb"\b(?:namespace|template\s*<|class\s+\w+\s*[:{]|std::|constexpr|nullptr)\b|::")


@dataclass
class _Cut:
    line: int  # 0-based line where a unit starts
    kind: str
    name: str = ""
    parent: str = ""


def language_of(path: str, head: bytes = b"") -> str | None:
    """The grammar's language of a file by its name (and, for ``.h`` and scripts without an extension, its first
    bytes ``head``), "text" for a text file no grammar reads, None for one this chunker leaves out."""
    name = path.rsplit("/", 1)[-1].lower()
    dot = name.rfind(".")
    extension = name[dot:] if dot > 0 else ""
    if extension == ".h":
        return "cpp" if _HEADER_LANGUAGE.search(head) else "c"
    if extension in EXTENSIONS:
        return EXTENSIONS[extension]
    if extension in TEXT_EXTENSIONS or name in TEXT_NAMES or name.startswith(("readme", "license", "changelog")):
        return "text"
    if head.startswith(b"#!"):
        first = head.split(b"\n", 1)[0]
        return "bash" if re.search(rb"\b(?:ba|z|k)?sh\b|\bbats\b", first) else \
            "python" if b"python" in first else "ruby" if b"ruby" in first else "text"
    return None


@lru_cache(maxsize=None)
def parser_for(language: str) -> Any:
    """A tree-sitter parser of ``language``; ImportError when its grammar wheel is not installed."""
    import tree_sitter

    module, function = GRAMMARS[language]
    grammar = tree_sitter.Language(getattr(importlib.import_module(module), function)())
    return tree_sitter.Parser(grammar)


class CodeChunker:
    """Units of every line of a file (the module docstring). ``max_chars``: the size cap of a unit;
    ``methods_alone``: a class is always its header plus one unit per member, not one unit when it fits;
    ``merge_under``: neighbouring definitions smaller than this many characters are one unit (0: never);
    ``constants``: a top-level declaration of several lines (``const Schema = z.object({...})``) is a
    definition of its name, not code."""

    name = "syntax"

    def __init__(self, *, max_chars: int = 1500, methods_alone: bool = True, merge_under: int = 0,
                 constants: bool = False):
        if max_chars < 80:
            raise ValueError(f"code chunker: max_chars is the size cap of a unit, at least 80; got {max_chars}")
        self.max_chars = int(max_chars)
        self.methods_alone = bool(methods_alone)
        self.merge_under = int(merge_under)
        self.constants = bool(constants)

    def language(self, path: str, head: bytes = b"") -> str | None:
        return language_of(path, head)

    def chunk(self, text: str, path: str, language: str | None = None) -> list[Unit]:
        """The units of one file's ``text`` (``language``: as ``language`` names it, else found from ``path``)."""
        language = language or language_of(path, text[:4096].encode("utf-8", "replace")) or "text"
        lines = text.splitlines(keepends=True)
        if not any(line.strip() for line in lines):
            return []
        if language == "text" or language not in GRAMMARS:
            cuts = _text_cuts(lines)
            language = "text"
        else:
            source = text.encode("utf-8")
            tree = parser_for(language).parse(source)
            walk = _Walk(language, source, self.max_chars, self.methods_alone, self.constants)
            walk.children(tree.root_node.children, "", 0)
            cuts = walk.cuts
        return self._units(cuts, lines, language)

    def _joins(self, span: tuple[_Cut, int, int], cut: _Cut, lines: list[str], end: int) -> bool:
        """Whether the unit starting at ``cut`` (to ``end``) is part of the one before: punctuation alone (a
        class's closing brace), code beside code up to the cap, another clause of the same definition (Elixir's
        and Haskell's equations, a signature and its function), or a definition below ``merge_under``."""
        before, start, _ = span
        if cut.kind == "code" and all(_CLOSER.match(line) for line in lines[cut.line:end]):
            return True
        if _size(lines, start, end) > self.max_chars:
            return False
        if cut.kind == "code" and before.kind in ("code", "section") and before.parent == cut.parent:
            return True
        if cut.kind != "code" and cut.name and (cut.kind, cut.name, cut.parent) == (before.kind, before.name,
                                                                                    before.parent):
            return True
        return bool(self.merge_under) and before.kind != "code" and cut.kind != "code" and \
            before.parent == cut.parent and before.kind not in _CONTAINERS and cut.kind not in _CONTAINERS and \
            _size(lines, cut.line, end) < self.merge_under and _size(lines, start, cut.line) < self.merge_under

    def _units(self, cuts: list[_Cut], lines: list[str], language: str) -> list[Unit]:
        """Cuts sorted and made unique, then tiled into units; a run of code merged to the cap, a long unit split."""
        by_line: dict[int, _Cut] = {0: _Cut(0, "code")}
        for cut in cuts:
            if 0 <= cut.line < len(lines):
                if cut.line not in by_line or by_line[cut.line].kind == "code":
                    by_line[cut.line] = cut  # a definition's cut wins over code's at the same line
        ordered = [by_line[line] for line in sorted(by_line)]
        spans: list[tuple[_Cut, int, int]] = []
        for n, cut in enumerate(ordered):
            end = ordered[n + 1].line if n + 1 < len(ordered) else len(lines)
            if spans and self._joins(spans[-1], cut, lines, end):
                spans[-1] = (spans[-1][0], spans[-1][1], end)
                continue
            spans.append((cut, cut.line, end))
        units: list[Unit] = []
        for cut, start, end in spans:
            first = True
            for a, b in _windows(lines, start, end, self.max_chars):
                # blank lines at either end are in no unit: a function added below another leaves its text as it was
                while a < b and not lines[a].strip():
                    a += 1
                while b > a and not lines[b - 1].strip():
                    b -= 1
                if a == b:
                    continue
                units.append(Unit(a + 1, b, "".join(lines[a:b]), cut.kind if first else f"{cut.kind}-part",
                                  cut.name, cut.parent, language))
                first = False
        return units


class _Walk:
    """One file's definitions found and their cuts recorded (in order of the file)."""

    def __init__(self, language: str, source: bytes, max_chars: int, methods_alone: bool, constants: bool = False):
        self.constants = constants
        self.language = language
        self.source = source
        self.max_chars = max_chars
        self.methods_alone = methods_alone
        self.kinds = DEFINITIONS[language]
        self.cuts: list[_Cut] = []

    def children(self, nodes: Iterable[Any], parent: str, depth: int) -> None:
        """Cuts for a sequence of sibling nodes: a definition (with the comments right above it) at its start,
        code at the start of each run between definitions."""
        nodes = list(nodes)
        lead: int | None = None  # first line of the comments/attributes right above the next node
        previous_end = -2
        in_code = False
        for node in nodes:
            start, end = node.start_point[0], node.end_point[0]
            if _is_comment(node):
                if lead is None or start > previous_end + 1:
                    lead = start
                previous_end = end
                continue
            attached = lead if lead is not None and start <= previous_end + 1 else None
            found = self.definition(node, top=not parent)
            if found is not None:
                self.definition_cuts(node, found, parent, depth, start if attached is None else attached)
                in_code = False
            elif depth < _MAX_DEPTH and self.holds_definitions(node):
                # a block around definitions (#ifdef, extern "C", Haskell's declarations): walked through
                self.cuts.append(_Cut(start if attached is None else attached, "code", parent=parent))
                self.children(node.children, parent, depth + 1)
                in_code = False
            elif not in_code or lead is not None:
                self.cuts.append(_Cut(start if attached is None else lead or start, "code", parent=parent))
                in_code = True
            lead = None
            previous_end = end
        if lead is not None and not in_code:
            self.cuts.append(_Cut(lead, "code", parent=parent))  # comments closing a block

    def definition(self, node: Any, top: bool = False) -> tuple[str, str] | None:
        """(kind, name) of a definition node, or None. ``top``: at a file's top level, where a declaration of
        several lines is a constant's definition (``constants``)."""
        if self.language == "elixir":
            return self._elixir(node)
        kind = self.kinds.get(node.type)
        if node.type in _WRAPPERS:  # the wrapped definition's kind and name
            inner = next((found for c in node.named_children if (found := self.definition(c)) is not None), None)
            if inner is not None or kind is None:
                return inner
        if kind is None and node.type in _ASSIGNMENTS:
            return self._assigned(node, top)
        if kind is None:
            if node.type == "declaration" and self.language in ("c", "cpp"):
                body = next((c for c in node.named_children if c.type in self.kinds and
                             c.child_by_field_name("body") is not None), None)
                return self.definition(body) if body is not None else None
            return None
        if node.type in ("struct_specifier", "union_specifier", "enum_specifier", "class_specifier") and \
                node.child_by_field_name("body") is None:
            return None  # a use of the type (struct foo *p), not its definition
        return kind, self.name(node)

    def _assigned(self, node: Any, top: bool = False) -> tuple[str, str] | None:
        """``const f = () => ...``, ``M.f = function ... end``, Zig's ``const S = struct {...}``; at the top level
        (``constants``), ``export const ZodString = $constructor(...)`` over several lines."""
        value = None
        for child in _descendants(node, 3):
            if child.type in _ASSIGNED_DEFINITIONS:
                value = child
                break
        if value is None:
            if not (top and self.constants and node.end_point[0] > node.start_point[0]):
                return None
            name = next((self.text(c) for c in _descendants(node, 3) if c.type in _NAMES), "")
            return ("const", name) if name else None
        name = ""
        for child in _descendants(node, 3):
            if child.type in _NAMES and child.start_byte < value.start_byte:
                name = self.text(child)
                break
        return _ASSIGNED_DEFINITIONS[value.type], name

    def _elixir(self, node: Any) -> tuple[str, str] | None:
        if node.type != "call":
            return None
        target = node.child_by_field_name("target") or (node.named_children[0] if node.named_children else None)
        if target is None or target.type != "identifier" or self.text(target) not in _ELIXIR:
            return None
        arguments = next((c for c in node.named_children if c.type == "arguments"), None)
        name = ""
        if arguments is not None and arguments.named_children:
            first = arguments.named_children[0]
            while first.type in ("call", "binary_operator") and first.named_children:
                first = first.child_by_field_name("target") or first.child_by_field_name("left") or \
                    first.named_children[0]
            name = self.text(first).strip("\"'")
        kind = _ELIXIR[self.text(target)]
        return kind, "" if kind == "struct" else name  # defstruct [...]: the module's struct

    def name(self, node: Any) -> str:
        """What a definition defines: its name field, else the first name-like node before its body."""
        field = node.child_by_field_name("name")
        if field is None and node.type in ("function_definition", "declaration") and self.language in ("c", "cpp"):
            field = node.child_by_field_name("declarator")
        if field is None and node.type == "impl_item":
            field = node.child_by_field_name("type")
        if field is None and node.type == "type_declaration":
            spec = next((c for c in node.named_children if c.type in ("type_spec", "type_alias")), None)
            field = spec.child_by_field_name("name") if spec is not None else None
        if field is None and node.type == "type_definition":
            field = node.child_by_field_name("declarator")
        if field is not None and field.type not in _NAMES:
            inner = next((c for c in _descendants(field, 6) if c.type in _NAMES), None)
            field = inner if inner is not None else field
        if field is None:
            body = node.child_by_field_name("body")
            limit = body.start_byte if body is not None else node.end_byte
            field = next((c for c in _descendants(node, 3) if c.type in _NAMES and c.start_byte < limit), None)
        if field is None:
            return ""
        text = self.text(field)
        return text if len(text) <= 200 and "\n" not in text else text.split("\n", 1)[0][:200]

    def definition_cuts(self, node: Any, found: tuple[str, str], parent: str, depth: int, start: int) -> None:
        kind, name = found
        while node.type in _WRAPPERS:  # export, decorators, template<...>: the members are the definition's
            inner = next((c for c in node.named_children if self.definition(c) is not None), None)
            if inner is None:
                break
            node = inner
        qualified = f"{parent}.{name}" if parent and name else name or parent
        self.cuts.append(_Cut(start, kind, name, parent))
        if depth >= _MAX_DEPTH:
            return
        if kind not in _CONTAINERS:
            return  # a function is one unit (split into parts at the cap): what is defined inside it is its own
        body = self.members(node)
        if body is None:
            return
        if self.methods_alone or node.end_byte - node.start_byte > self.max_chars:
            # its header (signature, fields, docs) to its first member, then each member a unit of its own
            self.children(body, qualified if kind in _CONTAINERS else parent, depth + 1)
            self._drop_leading_code(start)

    def _drop_leading_code(self, start: int) -> None:
        """The code cut a walk into a body puts at the body's first line belongs to the header above it."""
        header = next(n for n in range(len(self.cuts) - 1, -1, -1) if self.cuts[n].line == start)
        if header + 1 < len(self.cuts) and self.cuts[header + 1].kind == "code":
            del self.cuts[header + 1]

    def members(self, node: Any) -> list[Any] | None:
        """The children of the node (a body, at most three levels down) that holds a definition's member
        definitions, or None when it holds none."""
        frontier = [node]
        for _ in range(3):
            following = []
            for item in frontier:
                for child in item.children:
                    if child is not node and self.definition(child) is not None and item is not node:
                        return list(item.children)
                    following.append(child)
            if frontier == [node] and any(self.definition(c) is not None for c in node.children):
                if node.type not in _WRAPPERS:
                    return list(node.children)
            frontier = [c for c in following if c.child_count and self.definition(c) is None]
        return None

    def holds_definitions(self, node: Any) -> bool:
        return node.child_count > 0 and any(self.definition(c) is not None or
                                            (c.child_count and c.type.startswith("preproc") and
                                             self.holds_definitions(c)) for c in node.children)

    def text(self, node: Any) -> str:
        return self.source[node.start_byte:node.end_byte].decode("utf-8", "replace")


def _is_comment(node: Any) -> bool:
    kind = node.type
    return "comment" in kind or kind in ("attribute_item", "inner_attribute_item", "haddock", "decorator",
                                         "annotation", "marker_annotation", "attribute_list", "pragma")


def _descendants(node: Any, depth: int) -> Iterable[Any]:
    """``node``'s descendants breadth-first, ``depth`` levels down."""
    level = list(node.children)
    for _ in range(depth):
        following = []
        for child in level:
            yield child
            following.extend(child.children)
        level = following


def _size(lines: list[str], start: int, end: int) -> int:
    return sum(len(line) for line in lines[start:end])


def _windows(lines: list[str], start: int, end: int, cap: int) -> list[tuple[int, int]]:
    """[start, end) as line ranges of at most ``cap`` characters each (a longer line alone), cut at a blank line
    where one falls in the last third of a window."""
    if _size(lines, start, end) <= cap:
        return [(start, end)]
    out = []
    a = start
    while a < end:
        size, b, blank = 0, a, None
        while b < end and (size + len(lines[b]) <= cap or b == a):
            size += len(lines[b])
            if not lines[b].strip() and size > cap * 2 // 3:
                blank = b + 1
            b += 1
        if blank is not None and b < end:
            b = blank
        out.append((a, b))
        a = b
    return out


def _text_cuts(lines: list[str]) -> list[_Cut]:
    """A text file's cuts: each Markdown/reStructuredText heading, each paragraph after a blank line (the
    tiling merges paragraphs to the cap)."""
    cuts = []
    blank = True
    for n, line in enumerate(lines):
        stripped = line.strip()
        if re.match(r"#{1,6}\s", stripped) or (n + 1 < len(lines) and stripped and
                                               re.fullmatch(r"(=+|-+|~+)", lines[n + 1].strip() or "x") and
                                               len(lines[n + 1].strip()) >= len(stripped) // 2):
            cuts.append(_Cut(n, "section", stripped.lstrip("# ").strip()[:200]))
        elif stripped and blank:
            cuts.append(_Cut(n, "code"))
        blank = not stripped
    return cuts


