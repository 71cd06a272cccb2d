"""The layout rules of docs/architecture.md, checked on the source (no module is imported).

* No import cycle among the modules of ``structret/`` and of the plugin packages under
  ``plugins/`` (one graph over all of them, so a cycle between two plugins counts too).
  Imports inside functions count: they only delay the cycle to the first call.
  Imports under ``if TYPE_CHECKING:`` do not, as they never run. Importing ``a.b.c``
  counts as an edge to ``a.b.c`` only, not to its parent packages: a package's
  ``__init__`` that re-exports its submodules is not a cycle.
* No module in ``structret/`` over 400 lines, unless its docstring or leading comment says
  why in a sentence starting "Over 400 lines because".
* Core knows no paper: no module in ``structret/`` imports a plugin package
  (``structret_*``), by an import statement or a ``"structret_x.module"`` string
  (``importlib``, a lazy registry target). Plugins reach core through the registry's
  entry points, which name no package in core's code.
* Core names no plugin: no string in ``structret/`` (docstrings aside) is the name of a plugin
  the repository's packages register, except in ``structret/defaults.py``, the one table of
  the built-ins core uses when a user names none. Evaluation protocols are exempt: core
  implements them and names the protocol a dataset asks for.
* The command line is a thin layer: ``structret/cli.py`` imports from structret only
  ``structret.api`` and ``structret.errors``. ``structret.api`` is the top of core: no other
  module of core imports it (``structret/__init__.py`` hands its names on lazily), so every
  arrow of core runs down.
* Plugins reach core through one surface: a plugin package imports from ``structret`` only
  ``structret.plugin``, ``structret.errors``, ``structret.records`` and ``hookimpl``, and
  imports no other plugin package (what two plugins share belongs in core's surface).
  Imports under ``if TYPE_CHECKING:`` count here: an annotation is a dependency too.
* An import inside a function of core is of something heavy (outside ``if TYPE_CHECKING:``).
  An import of something light belongs at the top of its module: the standard library, a
  third-party library not in HEAVY, or a module of core whose module-level imports, followed
  through core, reach nothing in HEAVY. What a heavy import is kept out of is not written
  beside it: tests/test_import_cost.py runs the light imports and commands (``import
  structret``, ``structret --help``, ``structret search`` of an ONNX-encoded index, ...) and
  names the chain of calls that loaded a heavy library, should one do so.

Today's violations owned by work in progress are listed in the KNOWN_* sets below. Each
entry must still be a violation, so the lists can only shrink: fix one, delete its entry.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 400
REASON = "Over 400 lines because"

# Import cycles still in core, each as the set of modules of one strongly connected component.
KNOWN_CYCLES: set[frozenset[str]] = set()

# Modules of structret/ over 400 lines with no reason at their top.
KNOWN_LONG: set[str] = set()

# Modules of structret/ allowed to name a plugin package (none today: entry points suffice).
PLUGIN_IMPORTS_ALLOWED: set[str] = set()

# What a plugin package may import from core (structret/plugin.py is the surface).
# structret.api too: the public Python API, for a plugin that runs whole jobs (a command, a figure)
SURFACE = {"structret.plugin", "structret.api", "structret.errors", "structret.records"}

# What an import inside a function may keep out of the light imports: third-party libraries (top-level
# names) that are slow to import or optional (their import can fail), and a few measured as slow that
# are not (milliseconds with bytecode cached, loaded after structret.api).
HEAVY = {
    "accelerate", "bm25s", "datasets", "hnswlib", "huggingface_hub", "ir_measures", "matplotlib", "mteb", "nltk",
    "numpy", "onnx", "onnxruntime", "peft", "pyarrow", "pydantic", "pygments", "pymilvus", "pytrec_eval",
    "safetensors", "sentence_transformers", "sklearn", "spacy", "starlette", "tokenizers", "torch", "tqdm",
    "transformers", "tree_sitter", "umap", "usearch", "uvicorn", "mcp",
    "filelock",  # ~15 ms
    "concurrent",  # concurrent.futures' process pool: multiprocessing, ~9 ms
    "structret.api",  # all of core, ~75 ms: `import structret` (a plugin's hookimpl) is ~15 ms
    "structret.suites",  # ~15 ms: statistics, tomllib and five modules
    "structret.search.system",  # ~7 ms (structret.models): kept out of import structret.plugin
}

_PLUGIN_PACKAGE = re.compile(r"structret_[a-z0-9_]+")
_PLUGIN_TARGET = re.compile(r"structret_[a-z0-9_]+[.:][A-Za-z_]")  # "structret_code.plugin", "pkg:attr"


@dataclass(frozen=True)
class Module:
    name: str  # dotted, e.g. "structret_code.extractors"
    path: Path
    rel: str  # the path as messages show it, e.g. "plugins/structret_code/extractors.py"
    is_package: bool  # an __init__.py

    @property
    def in_core(self) -> bool:
        return self.name.split(".")[0] == "structret"


@dataclass(frozen=True)
class Import:
    source: str
    target: str  # dotted name as written, relative imports resolved
    names: tuple[str, ...]  # for "from target import a, b"; () for "import target"
    line: int
    end_line: int = 0  # the statement's last line
    in_function: bool = False


def module_at(path: Path, source_root: Path, root: Path) -> Module:
    """The module a file is when ``source_root`` is on sys.path."""
    parts = list(path.relative_to(source_root).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return Module(".".join(parts), path, path.relative_to(root).as_posix(), is_package)


def all_modules(root: Path = ROOT) -> dict[str, Module]:
    """structret and every plugin package: plugins/structret_*, and the example plugin's packages."""
    roots = [(root, "structret")]
    for source_root in (root / "plugins", root / "plugins" / "example"):
        for init in sorted(source_root.glob("*/__init__.py")):
            roots.append((source_root, init.parent.name))
    modules = {}
    for source_root, package in roots:
        for path in sorted((source_root / package).rglob("*.py")):
            module = module_at(path, source_root, root)
            modules[module.name] = module
    return modules


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(module: Module, tree: ast.Module | None = None, *, type_checking: bool = False) -> list[Import]:
    """Every import statement of ``module``, at any depth, except (unless ``type_checking``) those
    under ``if TYPE_CHECKING:``."""
    tree = tree or ast.parse(module.path.read_text(encoding="utf-8"), str(module.path))
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.If) and _type_checking_only(node) and not type_checking:
            for child in node.orelse:
                visit(child, in_function)
            return
        at = (node.lineno, node.end_lineno or node.lineno, in_function) if isinstance(node, ast.stmt) else ()
        if isinstance(node, ast.Import):
            found.extend(Import(module.name, alias.name, (), *at) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append(Import(module.name, target, tuple(a.name for a in node.names), *at))
        in_function = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, in_function)

    visit(tree, False)
    return found


def _known_prefix(name: str, modules: dict[str, Module]) -> str | None:
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def import_graph(modules: dict[str, Module]) -> dict[str, dict[str, int]]:
    """module -> {imported module: line of the first such import}, internal modules only."""
    graph: dict[str, dict[str, int]] = {name: {} for name in modules}
    for module in modules.values():
        for imp in imports_of(module):
            targets = []
            if imp.names:  # from X import a: X.a when that is a module, else X
                for name in imp.names:
                    sub = f"{imp.target}.{name}"
                    targets.append(sub if sub in modules else _known_prefix(imp.target, modules))
            else:
                targets.append(_known_prefix(imp.target, modules))
            for target in targets:
                if target is not None and target != module.name:
                    graph[module.name].setdefault(target, imp.line)
    return graph


def strongly_connected(graph: dict[str, dict[str, int]]) -> list[set[str]]:
    """Tarjan's algorithm (iterative); components of more than one module only."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(component)
    return components


def cycle_chain(component: set[str], graph: dict[str, dict[str, int]], modules: dict[str, Module]) -> str:
    """One cycle through the component, shortest from its first module, as
    ``a (a.py:12) -> b (b.py:40) -> a``: each arrow names the line of the import."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node]):
                if child == start:
                    chain = paths[node] + [start]
                    steps = [f"{a} ({modules[a].rel}:{graph[a][b]})" for a, b in zip(chain, chain[1:])]
                    return " -> ".join(steps + [start])
                if child in component and child not in paths:
                    paths[child] = paths[node] + [child]
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {start} in {sorted(component)}")


def long_modules(modules: dict[str, Module]) -> dict[str, int]:
    """Core modules over MAX_LINES lines without a written reason: rel path -> lines."""
    found = {}
    for module in modules.values():
        if not module.in_core:
            continue
        text = module.path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MAX_LINES and REASON not in top_text(text):
            found[module.rel] = lines
    return found


def top_text(text: str) -> str:
    """The module docstring and the comment lines above the first statement after it, as
    one line (a sentence may wrap)."""
    tree = ast.parse(text)
    body = list(tree.body)
    docstring = ast.get_docstring(tree) or ""
    if docstring:
        body.pop(0)
    stop = body[0].lineno - 1 if body else None
    comments = [line.strip().lstrip("#") for line in text.splitlines()[:stop] if line.strip().startswith("#")]
    return " ".join(" ".join([docstring, *comments]).split())


def core_plugin_imports(modules: dict[str, Module]) -> list[str]:
    """Places in core that name a plugin package: ``path:line: what``."""
    found = []
    for module in modules.values():
        if not module.in_core or module.name in PLUGIN_IMPORTS_ALLOWED:
            continue
        tree = ast.parse(module.path.read_text(encoding="utf-8"), str(module.path))
        for imp in imports_of(module, tree):
            if _PLUGIN_PACKAGE.fullmatch(imp.target.split(".")[0]):
                found.append(f"{module.rel}:{imp.line}: imports {imp.target}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _PLUGIN_TARGET.match(node.value):
                found.append(f"{module.rel}:{node.lineno}: names {node.value!r}")
    return found


def plugin_imports_outside_surface(modules: dict[str, Module]) -> list[str]:
    """Places in plugin packages that import core past its surface, or another plugin package."""
    found = []
    for module in modules.values():
        if module.in_core:
            continue
        own = module.name.split(".")[0]
        for imp in imports_of(module, type_checking=True):
            top = imp.target.split(".")[0]
            if imp.target == "structret" and imp.names and set(imp.names) <= {"hookimpl", "api"}:
                continue
            if top == "structret" and imp.target not in SURFACE:
                found.append(f"{module.rel}:{imp.line}: imports {imp.target} (use structret.plugin)")
            elif _PLUGIN_PACKAGE.fullmatch(top) and top != own:
                found.append(f"{module.rel}:{imp.line}: imports another plugin, {imp.target}")
    return found


# Where core may write a plugin's name: the defaults table, and words that are a plugin's name
# by coincidence (a language, a capability).
PLUGIN_NAMES_ALLOWED = {"structret/defaults.py"}
NOT_A_PLUGIN = {
    ("structret/extraction.py", "python"), ("structret/extraction.py", "go"), ("structret/extraction.py", "java"),
    ("structret/extraction.py", "javascript"), ("structret/extraction.py", "php"), ("structret/extraction.py", "ruby"),
    ("structret/contracts.py", "mlm"), ("structret/testing.py", "mlm"),  # the capability
    ("structret/training/distributed.py", "python"),  # Python's own RNG state
    ("structret/testing.py", "python"), ("structret/serving/entities.py", "python"),  # the language
    ("structret/serving/searcher.py", "python"),
    ("structret/models.py", "t5"), ("structret/testing.py", "t5"),  # a config's model_type; a tiny test model
}


def registered_names(modules: dict[str, Module]) -> dict[str, str]:
    """name -> plugin module, for every ``register("name", ..., aliases=(...))`` in a plugin's
    ``register_*`` hooks, read from the source (protocols left out, see the docstring)."""
    names = {}
    for module in modules.values():
        if module.in_core:
            continue
        for hook in ast.walk(ast.parse(module.path.read_text(encoding="utf-8"))):
            if not (isinstance(hook, ast.FunctionDef) and hook.name.startswith("register_")
                    and hook.name != "register_protocols"):
                continue
            for call in ast.walk(hook):
                if isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Constant):
                    names[str(call.args[0].value)] = module.rel
                    for kw in call.keywords:
                        if kw.arg == "aliases" and isinstance(kw.value, (ast.Tuple, ast.List)):
                            names.update({str(e.value): module.rel for e in kw.value.elts
                                          if isinstance(e, ast.Constant)})
    # recipes and suites are registered from their files' names: the live registry knows them
    from structret.registry import get_registry

    registry = get_registry()
    for kind in ("recipe", "suite"):
        names.update({e.name: f"{e.kind} {e.name}" for e in registry.all() if e.kind == kind})
    return names


def _without_line(found: str) -> str:
    """``'a.py:12: 'x' (registered in ...)'`` -> ``"a.py: 'x'"``: known entries survive edits above them."""
    path, _, rest = found.partition(":")
    return f"{path}: {rest.partition(': ')[2].split(' (registered')[0]}"


def plugin_names_in_core(modules: dict[str, Module]) -> list[str]:
    """``path:line: 'name'`` for each string of core (not a docstring) that is a registered plugin's name."""
    names = registered_names(modules)
    found = []
    for module in modules.values():
        if not module.in_core or module.rel in PLUGIN_NAMES_ALLOWED:
            continue
        tree = ast.parse(module.path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
                    and id(node) not in docstrings and (module.rel, node.value) not in NOT_A_PLUGIN):
                found.append(f"{module.rel}:{node.lineno}: {node.value!r} (registered in {names[node.value]})")
    return sorted(found)


CLI_MAY_IMPORT = {"structret.api", "structret.errors"}


def layer_breaches(modules: dict[str, Module]) -> list[str]:
    """cli.py importing core past structret.api, and core below the API importing it."""
    found = []
    for module in modules.values():
        if not module.in_core:
            continue
        for imp in imports_of(module):
            target = imp.target
            if target == "structret":  # from structret import api, defaults, ...
                target = "structret.api" if imp.names == ("api",) else "structret"
            if target != "structret" and not target.startswith("structret."):
                continue
            is_api = target == "structret.api" or target.startswith("structret.api.")
            if module.name == "structret.cli":
                if target not in CLI_MAY_IMPORT:
                    found.append(f"{module.rel}:{imp.line}: imports {target} (call it through structret.api)")
            elif is_api and module.name != "structret" and not module.name.startswith("structret.api"):
                found.append(f"{module.rel}:{imp.line}: imports {target}, the API above it")
    return found


def _imported_modules(imp: Import, modules: dict[str, Module]) -> list[str]:
    """What ``imp`` imports: modules of ``modules`` (``from pkg import mod`` is ``pkg.mod``), else
    the top-level name of a library."""
    found = []
    for name in imp.names or (None,):
        sub = f"{imp.target}.{name}"
        if name and sub in modules:
            found.append(sub)
        else:
            found.append(_known_prefix(imp.target, modules) or imp.target.split(".")[0])
    return list(dict.fromkeys(found))


def heavy_reached(modules: dict[str, Module]) -> dict[str, set[str]]:
    """Each module of core -> what of HEAVY importing it loads: its module-level imports followed
    through core (importing ``a.b.c`` runs ``a`` and ``a.b`` first, so parent packages count)."""
    core = {name: m for name, m in modules.items() if m.in_core}

    def with_parents(name: str) -> list[str]:
        parts = name.split(".")
        return [".".join(parts[:end]) for end in range(1, len(parts) + 1)]

    edges: dict[str, set[str]] = {}
    for name, module in core.items():
        edges[name] = {p for p in with_parents(name)[:-1] if p in core}
        for imp in imports_of(module):
            for target in _imported_modules(imp, modules) if not imp.in_function else ():
                edges[name].update(with_parents(target) if target in core else [target])
    reached = {}
    for name in core:
        seen, todo = set(), [name]
        while todo:
            current = todo.pop()
            if current not in seen:
                seen.add(current)
                todo.extend(edges.get(current, ()))
        reached[name] = {m for m in seen if m in HEAVY or m.split(".")[0] in HEAVY}
    return reached


def _is_light(name: str, modules: dict[str, Module], heavy: dict[str, set[str]]) -> bool:
    if name in modules:
        return modules[name].in_core and not heavy[name]
    return name not in HEAVY and (name in sys.stdlib_module_names or not name.startswith("structret"))


def function_imports(modules: dict[str, Module]) -> list[tuple[Module, list[Import]]]:
    """Each module of core with its imports inside functions (TYPE_CHECKING ones left out)."""
    return [(module, [imp for imp in imports_of(module) if imp.in_function])
            for module in modules.values() if module.in_core]


def light_imports_inside_functions(modules: dict[str, Module]) -> list[str]:
    """``path:line: imports X inside a function, and it is light: it could be at the top``."""
    heavy = heavy_reached(modules)
    found = []
    for module, imports in function_imports(modules):
        for imp in imports:
            targets = _imported_modules(imp, modules)
            if all(_is_light(t, modules, heavy) for t in targets):
                found.append(f"{module.rel}:{imp.line}: imports {', '.join(targets)} inside a function, and it is "
                             f"light: it could be at the top")
    return found


# --- the rules ---------------------------------------------------------------------------


def test_no_import_cycles():
    modules = all_modules()
    graph = import_graph(modules)
    components = strongly_connected(graph)
    new = [c for c in components if frozenset(c) not in KNOWN_CYCLES]
    assert not new, "import cycles (break them, e.g. with a small module both sides import):\n" + "\n".join(
        cycle_chain(c, graph, modules) for c in new
    )
    fixed = KNOWN_CYCLES - {frozenset(c) for c in components}
    assert not fixed, f"no longer a cycle, delete from KNOWN_CYCLES: {[sorted(c) for c in fixed]}"


def test_core_modules_stay_under_400_lines_or_say_why():
    long = long_modules(all_modules())
    new = {path: n for path, n in long.items() if path not in KNOWN_LONG}
    assert not new, (
        f"over {MAX_LINES} lines: {new}. Split the module by what it holds, or start a sentence "
        f"'{REASON} ...' in its docstring"
    )
    fixed = KNOWN_LONG - set(long)
    assert not fixed, f"now under {MAX_LINES} lines or with a reason, delete from KNOWN_LONG: {sorted(fixed)}"


def test_core_imports_no_plugin():
    found = core_plugin_imports(all_modules())
    assert not found, "structret/ must not know a plugin package (reach plugins through the registry):\n" + (
        "\n".join(found)
    )


def test_core_names_no_plugin():
    found = plugin_names_in_core(all_modules())
    assert not found, ("core names a plugin; say what you need as a contract member, or name a default in "
                       "structret/defaults.py:\n" + "\n".join(found))


def test_the_cli_calls_only_the_api_and_nothing_imports_the_api():
    found = layer_breaches(all_modules())
    assert not found, "\n".join(found)


def test_plugins_import_only_the_surface():
    found = plugin_imports_outside_surface(all_modules())
    assert not found, ("plugins reach core only through structret.plugin, structret.api, structret.errors and structret.records "
                       "(add a name to structret/plugin.py if a plugin needs it):\n" + "\n".join(found))


def test_benchmarks_reach_plugins_by_name():
    """A benchmark times what a user runs: plugins made through the registry, not their internals."""
    found = []
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        module = Module(path.stem, path, path.relative_to(ROOT).as_posix(), False)
        found += [f"{module.rel}:{imp.line}: imports {imp.target}" for imp in imports_of(module)
                  if _PLUGIN_PACKAGE.fullmatch(imp.target.split(".")[0])]
    assert not found, "create plugins with get_registry().create(kind, name):\n" + "\n".join(found)


def test_imports_inside_core_functions_are_of_something_heavy():
    found = light_imports_inside_functions(all_modules())
    assert not found, ("an import inside a function of core keeps something heavy (HEAVY) out of a light import "
                       "(tests/test_import_cost.py checks which); anything else goes at the top of its module:\n"
                       + "\n".join(found))


def test_every_package_is_seen():
    modules = all_modules()
    for name in ("structret.cli", "structret_code.treesitter", "structret_objectives.masking", "structret_identifiers"):
        assert name in modules


# --- the checks, on made-up packages -----------------------------------------------------


def write_package(tmp_path: Path, files: dict[str, str]) -> dict[str, Module]:
    modules = {}
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        module = module_at(path, tmp_path, tmp_path)
        modules[module.name] = module
    return modules


def test_a_cycle_through_imports_inside_functions_is_found_and_shown(tmp_path):
    modules = write_package(tmp_path, {
        "pkg/__init__.py": "from pkg.a import run\n",  # a package re-exporting its module: no cycle
        "pkg/a.py": "import os\nfrom pkg import b\n\n\ndef run():\n    return b.go()\n",
        "pkg/b.py": "def go():\n    from .c import helper\n    return helper()\n",
        "pkg/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import b\n"
                    "def helper():\n    from . import a\n    return a\n",
        "pkg/d.py": "import pkg.a\nfrom pkg.c import helper\n",
    })
    graph = import_graph(modules)
    assert graph["pkg"] == {"pkg.a": 1}
    assert graph["pkg.c"] == {"pkg.a": 5}  # the TYPE_CHECKING import of b is no edge
    assert graph["pkg.d"] == {"pkg.a": 1, "pkg.c": 2}
    (component,) = strongly_connected(graph)
    assert component == {"pkg.a", "pkg.b", "pkg.c"}
    assert cycle_chain(component, graph, modules) == "pkg.a (pkg/a.py:2) -> pkg.b (pkg/b.py:2) -> pkg.c (pkg/c.py:5) -> pkg.a"


def test_an_acyclic_graph_has_no_component():
    assert strongly_connected({"a": {"b": 1, "c": 1}, "b": {"c": 1}, "c": {}}) == []
    assert strongly_connected({"a": {"b": 1}, "b": {"a": 1}, "c": {"a": 1}}) == [{"a", "b"}]


def test_the_reason_for_a_long_module_is_read_from_its_top(tmp_path):
    assert REASON in top_text(f'"""Many things.\n\n{REASON} the\nparts share state."""\nx = 1\n')
    assert REASON in top_text(f'"""Many things."""\n# {REASON} it must.\nx = 1\n')
    assert REASON not in top_text(f'"""Many things."""\nx = 1\n# {REASON} too late.\n')
    modules = write_package(tmp_path, {
        "structret/long.py": "x = 1\n" * 401,
        "structret/said.py": f"# {REASON} of x.\n" + "x = 1\n" * 401,
        "structret/short.py": "x = 1\n" * 400,
    })
    assert long_modules(modules) == {"structret/long.py": 401}


def test_core_naming_a_plugin_is_found(tmp_path):
    modules = write_package(tmp_path, {
        "structret/a.py": "from structret_code.extractors import X\n",
        "structret/b.py": "def f():\n    import structret_objectives.masking\n",
        "structret/c.py": "import importlib\nimportlib.import_module('structret_code.plugin')\n",
        "structret/d.py": "TARGET = 'structret_code.extractors:PythonTokenize'\n",
        "structret/ok.py": "import structret.records\nNAME = 'structret_decided'\n",
        "structret_code/e.py": "import structret_objectives\n",  # plugins may use each other
    })
    assert core_plugin_imports(modules) == [
        "structret/a.py:1: imports structret_code.extractors",
        "structret/b.py:2: imports structret_objectives.masking",
        "structret/c.py:2: names 'structret_code.plugin'",
        "structret/d.py:1: names 'structret_code.extractors:PythonTokenize'",
    ]


def test_a_plugin_past_the_surface_is_found(tmp_path):
    modules = write_package(tmp_path, {
        "structret/plugin.py": "",
        "structret_code/__init__.py": "from structret import hookimpl\n",
        "structret_code/a.py": "from structret.plugin import Options\nfrom structret.errors import PluginError\n"
                               "from structret_code import b\n",
        "structret_code/b.py": "from structret.registry import get_registry\nimport structret\n",
        "structret_code/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from structret.models import Model\n"
                               "def f():\n    from structret_text.nouns import Nouns\n",
    })
    assert plugin_imports_outside_surface(modules) == [
        "structret_code/b.py:1: imports structret.registry (use structret.plugin)",
        "structret_code/b.py:2: imports structret (use structret.plugin)",
        "structret_code/c.py:3: imports structret.models (use structret.plugin)",
        "structret_code/c.py:5: imports another plugin, structret_text.nouns",
    ]


def test_a_plugin_named_in_core_is_found(tmp_path):
    modules = write_package(tmp_path, {
        "structret_code/plugin.py": "def register_extractors(register):\n"
                                    "    register('tree-sitter', 'structret_code.x:y', aliases=('ts',))\n"
                                    "def register_protocols(register):\n    register('code-search', 'x:y')\n",
        "structret/a.py": '"""Uses tree-sitter."""\nNAME = "tree-sitter"\ndef f():\n    """ts"""\n    return "ts"\n',
        "structret/b.py": "PROTOCOL = 'code-search'\nOTHER = 'tree-sitter-x'\n",
        "structret/defaults.py": "EXTRACTOR = 'tree-sitter'\n",
    })
    assert plugin_names_in_core(modules) == [
        "structret/a.py:2: 'tree-sitter' (registered in structret_code/plugin.py)",
        "structret/a.py:5: 'ts' (registered in structret_code/plugin.py)",
    ]


def test_a_layer_breach_is_found(tmp_path):
    modules = write_package(tmp_path, {
        "structret/__init__.py": "def __getattr__(name):\n    from structret import api\n",
        "structret/api/__init__.py": "from structret.models import Model\n",
        "structret/cli.py": "from structret import api\nfrom structret.api import defaults\nfrom structret.errors import E\n"
                            "from structret.registry import get_registry\n",
        "structret/serving.py": "def f():\n    from structret.api import load_index\n",
        "structret/models.py": "import json\nfrom structret.errors import E\n",
    })
    assert layer_breaches(modules) == [
        "structret/cli.py:4: imports structret.registry (call it through structret.api)",
        "structret/serving.py:2: imports structret.api, the API above it",
    ]


def test_an_import_of_something_light_inside_a_function_is_found(tmp_path):
    modules = write_package(tmp_path, {
        "structret/__init__.py": "def __getattr__(name):\n    from structret import api\n",
        "structret/api/__init__.py": "from structret import light\n",  # HEAVY names it: heavy itself
        "structret/light.py": "import json\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import torch\n",
        "structret/heavy.py": "import numpy.linalg\n",
        "structret/via.py": "from structret import heavy\n",  # numpy, through core
        "structret/sub/__init__.py": "import torch\n",
        "structret/sub/inner.py": "X = 1\n",  # its package imports torch first
        "structret/a.py": (
            "from typing import TYPE_CHECKING\n"
            "def f():\n"
            "    import numpy as np\n"
            "\n"
            "    import torch\n"
            "    from structret import via\n"
            "\n"
            "    import json\n"  # 8: light
            "    from structret.heavy import load\n"
            "def g():\n"
            "    if TYPE_CHECKING:\n"
            "        from structret import heavy\n"  # never runs
            "    from structret import light, registry\n"  # 13: all of it light
            "    from structret.sub.inner import (\n"
            "        X,\n"
            "    )\n"
            "    from concurrent.futures import ProcessPoolExecutor\n"
            "    from structret import json_tools, heavy\n"  # 18: one of them heavy is enough
        ),
        "structret/json_tools.py": "import json\n",
        "structret/registry/__init__.py": "",
        "structret_plugin/b.py": "def f():\n    import json\n",  # a plugin: not core's rule
    })
    heavy = heavy_reached(modules)
    assert heavy["structret.light"] == set() and heavy["structret.via"] == {"numpy"}
    assert heavy["structret.sub.inner"] == {"torch"} and heavy["structret.api"] == {"structret.api"}
    assert "structret_plugin.b" not in heavy
    assert light_imports_inside_functions(modules) == [
        "structret/a.py:8: imports json inside a function, and it is light: it could be at the top",
        "structret/a.py:13: imports structret.light, structret.registry inside a function, and it is light: "
        "it could be at the top",
    ]
