"""The import-cost rule, held by one mechanism: run code or ``structret`` commands in a fresh
interpreter with a finder first on ``sys.meta_path`` that, the first time a forbidden library is
looked for, records the chain of the project's frames that asked for it.

    done = run_commands(["search", "runs/idx", "read a file"])
    assert not done.loaded, done.report()
    # structret search runs/idx 'read a file' loaded torch: structret/cli.py:608 (search) model = found.model
    #   -> structret/search/index.py:154 (SearchIndex.model) model = open_model(...) -> ...

The finder is asked before any module of the library runs, so a failed or caught import counts
too (an attempt is the cost), and nothing is blocked: the code runs to its end, and each forbidden
library is recorded once, by whatever asked for it first. Where the project's frames end, the
frame that imported the library itself is shown after them (transformers importing torch).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[1]
# what `import structret`, `structret.api`, `--help` and a search of an ONNX-encoded index keep out
TORCH = ("torch", "transformers")
# what `import structret` and `--help` keep out besides (docs/architecture.md, "Plugins")
LIGHT = (*TORCH, "numpy", "tree_sitter", "hnswlib", "bm25s", "pyarrow", "spacy", "nltk", "matplotlib", "pydantic")

# Runs first in the child, before structret is imported: installs the finder, then runs each
# part (a snippet, or a command line of structret.cli) under its label, and writes what was
# recorded to a file at exit (stdout is the program's own).
_BOOT = r'''
import atexit, json, linecache, os, sys
spec = json.loads(os.environ.pop("STRUCTRET_IMPORT_GUARD"))
forbidden, out = set(spec["forbidden"]), spec["out"]
roots = [os.path.realpath(r) + ("" if os.path.isfile(r) else os.sep) for r in spec["roots"]]  # folders, or files
loaded, label = {}, [spec["parts"][0]["label"] if spec["parts"] else ""]
early = sorted(m for m in forbidden if m in sys.modules)  # imported before the finder was in place (site, .pth)
loaded.update({m: {"label": "interpreter start-up", "chain": ["(before the finder was installed)"]} for m in early})


def where(frame):
    path = os.path.realpath(frame.f_code.co_filename)
    for root in roots:
        if path.startswith(root) if root.endswith(os.sep) else path == root:
            return os.path.relpath(path, os.path.dirname(root.rstrip(os.sep)))
    return frame.f_code.co_filename if frame.f_code.co_filename.startswith("<snippet") else None


def step(frame, shown):
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    name = frame.f_code.co_qualname
    return f"{shown}:{frame.f_lineno}" + ("" if name == "<module>" else f" ({name})") + (f" {line}" if line else "")


def probe(frame):
    """Whether the import system was asked by importlib.util.find_spec (is it installed?), not by an import."""
    while frame is not None and frame.f_code.co_filename.startswith("<frozen importlib._bootstrap"):
        frame = frame.f_back
    name = frame.f_code.co_filename if frame is not None else ""
    return name == "<frozen importlib.util>" or name.endswith(os.path.join("importlib", "util.py"))


class Guard:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in forbidden and top not in loaded and not probe(sys._getframe(1)):
            frames, frame = [], sys._getframe(1)
            while frame is not None:
                frames.append(frame)
                frame = frame.f_back
            frames.reverse()  # outermost first
            ours = [(f, where(f)) for f in frames]
            chain = [step(f, shown) for f, shown in ours if shown]
            last = max((i for i, (_, shown) in enumerate(ours) if shown), default=-1)
            outside = [f for f, _ in ours[last + 1:] if "importlib" not in f.f_code.co_filename]
            if outside:  # the library's importer, past the project's frames (transformers importing torch)
                chain.append(step(outside[-1], outside[-1].f_code.co_filename.rpartition("site-packages" + os.sep)[2]))
            loaded[top] = {"label": label[0], "chain": chain or ["(no frame of the project)"]}
        return None


def write():
    with open(out, "w", encoding="utf-8") as f:
        json.dump(loaded, f)


atexit.register(write)
sys.meta_path.insert(0, Guard())
namespace = {"__name__": "__main__"}  # one for all snippets, as one script's
for number, part in enumerate(spec["parts"]):
    label[0] = part["label"]
    if "code" in part:
        name = f"<snippet {number}>"
        linecache.cache[name] = (len(part["code"]), None, part["code"].splitlines(True), name)
        exec(compile(part["code"], name, "exec"), namespace)
    else:
        from structret.cli import cli
        try:
            cli.main(part["argv"], prog_name="structret")
        except SystemExit as end:
            if end.code not in (0, None):
                print(f"{part['label']}: exit {end.code}", file=sys.stderr)
                sys.exit(end.code)
'''


@dataclass
class Loaded:
    module: str
    label: str  # the part that loaded it: a command line, or "snippet N"
    chain: list[str]  # the project's frames, outermost first, each "path:line (function) statement"

    def __str__(self) -> str:
        return f"{self.label} loaded {self.module}: " + "\n  -> ".join(self.chain)


@dataclass
class Guarded:
    """What one guarded interpreter did: its exit status and output, and each forbidden library it loaded."""

    returncode: int
    stdout: str
    stderr: str
    loaded: dict[str, Loaded] = field(default_factory=dict)

    def report(self) -> str:
        return "\n".join(str(found) for found in self.loaded.values()) or "nothing forbidden was loaded"

    def check(self) -> "Guarded":
        """This run, after asserting that it ended well."""
        assert self.returncode == 0, f"exit {self.returncode}\n{self.stderr[-3000:]}"
        return self


def guarded(parts: Sequence[dict], *, forbidden: Sequence[str] = TORCH, roots: Sequence[str | os.PathLike] = (),
            cwd: str | os.PathLike | None = None, env: dict[str, str] | None = None, timeout: int = 300) -> Guarded:
    """Run ``parts`` (each ``{"label", "code"}`` or ``{"label", "argv"}``) in order in one fresh interpreter.
    ``roots``: folders whose frames make the chain, besides the repository's structret/ and plugins/."""
    with tempfile.TemporaryDirectory(prefix="import-guard-") as tmp:
        out = Path(tmp) / "loaded.json"
        spec = {"forbidden": list(forbidden), "parts": list(parts), "out": str(out),
                "roots": [str(ROOT / "structret"), str(ROOT / "plugins"), *map(str, roots)]}
        done = subprocess.run([sys.executable, "-c", _BOOT], capture_output=True, text=True, cwd=cwd, timeout=timeout,
                              env={**os.environ, **(env or {}), "STRUCTRET_IMPORT_GUARD": json.dumps(spec)})
        recorded = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {}
    return Guarded(done.returncode, done.stdout, done.stderr,
                   {module: Loaded(module, r["label"], r["chain"]) for module, r in recorded.items()})


def run_code(*snippets: str, **kwargs) -> Guarded:
    """Python snippets, one after the other in one interpreter and namespace (labelled "snippet 0", ...)."""
    return guarded([{"label": f"snippet {n}", "code": code} for n, code in enumerate(snippets)], **kwargs)


def run_commands(*argvs: Sequence[str], **kwargs) -> Guarded:
    """``structret ARGV`` for each argv, one after the other in one interpreter: a library one of them
    loads is recorded under that command line (the ones after it are not checked for it again)."""
    return guarded([{"label": " ".join(["structret", *map(_shown, argv)]), "argv": [str(a) for a in argv]}
                    for argv in argvs], **kwargs)


def _shown(arg: object) -> str:
    text = str(arg)
    return text if text and all(c.isalnum() or c in "-_./=:" for c in text) else repr(text)
