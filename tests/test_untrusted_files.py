"""Files from elsewhere (models, checkpoints, indexes, datasets, source trees) never run code.

- a scan of structret/ and plugins/ for the calls that can run code from a file: unpickling
  (torch.load without weights_only, pickle, np.load with pickles), remote model code on by
  default, eval/exec, archive extraction without path checks, weights read from anything
  but safetensors;
- a model directory whose weights are a pickled pytorch_model.bin, and one whose config
  names its own code (auto_map), are refused, and the code in them does not run;
- a source file that tree-sitter needs too long for is skipped by the miner.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from _tiny_models import tiny_bert_dir, tiny_t5_dir, one_torch_thread  # noqa: F401  (fixtures)

from structret.errors import ModelLoadError

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("structret", "plugins")
UNPICKLERS = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "joblib", "shelve", "marshal"}
# loaders that read configs and tokenizers only, never weights
NO_WEIGHTS = {"AutoConfig", "AutoTokenizer"}


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is(node: ast.expr | None, value: object) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else "?"


def risky_calls(source: str, filename: str = "<snippet>") -> list[str]:
    """``line: what`` for every construct that can run code or write outside a directory
    when given a hostile file."""
    found = []
    tree = ast.parse(source, filename)
    enclosing: dict[ast.AST, str] = {}  # node -> name of the innermost function around it
    for fn in ast.walk(tree):  # outer functions come first, inner ones overwrite
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            enclosing.update((node, fn.name) for node in ast.walk(fn))
            arguments = fn.args.args + fn.args.kwonlyargs
            defaults = [None] * (len(fn.args.args) - len(fn.args.defaults)) + fn.args.defaults + fn.args.kw_defaults
            for arg, default in zip(arguments, defaults):
                if arg.arg == "trust_remote_code" and default is not None and not _is(default, False):
                    found.append(f"{fn.lineno}: trust_remote_code defaults to something other than False in {fn.name}()")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in UNPICKLERS:
                    found.append(f"{node.lineno}: import {alias.name} (unpickling runs code)")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in UNPICKLERS:
            found.append(f"{node.lineno}: from {node.module} import ... (unpickling runs code)")
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        last = name.rsplit(".", 1)[-1]
        if name == "torch.load" and not _is(_keyword(node, "weights_only"), True):
            found.append(f"{node.lineno}: torch.load without weights_only=True")
        elif name in ("np.load", "numpy.load") and not _is(_keyword(node, "allow_pickle"), False):
            found.append(f"{node.lineno}: {name} without allow_pickle=False")
        elif last in ("read_pickle", "unsafe_load") or name == "yaml.load":
            found.append(f"{node.lineno}: {name} (unpickles or builds objects)")
        elif isinstance(node.func, ast.Name) and node.func.id in ("eval", "exec"):
            found.append(f"{node.lineno}: {node.func.id}()")
        elif last == "extractall" and not (isinstance(_keyword(node, "filter"), ast.Constant)
                                           and _keyword(node, "filter").value == "data"):
            found.append(f"{node.lineno}: {name} without filter='data' (members may be absolute or contain '..')")
        elif name == "shutil.unpack_archive":
            found.append(f"{node.lineno}: shutil.unpack_archive (no member path checks)")
        if _is(_keyword(node, "trust_remote_code"), True):
            found.append(f"{node.lineno}: {name}(trust_remote_code=True)")
        if last == "from_pretrained":
            # our wrapper from_pretrained(loader, ...) or loader.from_pretrained(...)
            loader = node.args[0] if isinstance(node.func, ast.Name) and node.args else getattr(node.func, "value", None)
            passes_on = enclosing.get(node) == "from_pretrained" and any(k.arg is None for k in node.keywords)
            if not (_is(_keyword(node, "use_safetensors"), True) or passes_on
                    or (isinstance(loader, ast.Name) and loader.id in NO_WEIGHTS)):
                found.append(f"{node.lineno}: {name}({_dotted(loader) if loader is not None else ''}, ...) "
                             f"without use_safetensors=True")
    return sorted(found, key=lambda line: int(line.split(":")[0]))


@pytest.mark.parametrize("snippet", [
    "import torch\ntorch.load(path)",
    "import torch\ntorch.load(path, weights_only=False)",
    "import pickle\n",
    "from joblib import load\n",
    "import numpy as np\nnp.load(path)",
    "import numpy as np\nnp.load(path, allow_pickle=True)",
    "eval(line)",
    "exec(code)",
    "import tarfile\ntarfile.open(p).extractall(out)",
    "import zipfile\nzipfile.ZipFile(p).extractall(out)",
    "def load(model, trust_remote_code=True): ...",
    "def load(model, *, trust_remote_code: bool = True): ...",
    "AutoModel.from_pretrained(path, trust_remote_code=True, use_safetensors=True)",
    "AutoModel.from_pretrained(path)",
    "from_pretrained(AutoModelForMaskedLM, source, True, 'weights')",
])
def test_the_scan_catches_each_kind_of_risky_call(snippet):
    assert risky_calls(snippet), snippet


@pytest.mark.parametrize("snippet", [
    "torch.load(path, weights_only=True)",
    "np.load(path, mmap_mode='r', allow_pickle=False)",
    "model.eval()",
    "tarfile.open(p).extractall(out, filter='data')",
    "def load(model, trust_remote_code: bool = False): ...",
    "from_pretrained(AutoConfig, source, is_local, 'config', trust_remote_code=flag)",
    "from_pretrained(AutoModel, source, is_local, 'weights', config=c, use_safetensors=True)",
    "def from_pretrained(loader, source, **kwargs):\n    return loader.from_pretrained(source, **kwargs)",
])
def test_the_scan_lets_safe_calls_through(snippet):
    assert risky_calls(snippet) == []


def test_no_source_file_reads_untrusted_files_unsafely():
    files = sorted(p for top in SCANNED for p in (ROOT / top).rglob("*.py"))
    assert len(files) > 50  # the scan found the source tree
    found = [f"{path.relative_to(ROOT)}:{line}" for path in files
             for line in risky_calls(path.read_text(encoding="utf-8"), str(path))]
    assert found == [], "\n".join(found) + (
        "\nRead weights with safetensors (use_safetensors=True), torch.load only with weights_only=True, "
        "np.load with allow_pickle=False, archives with extractall(filter='data'), and keep "
        "trust_remote_code off unless the user passes it.")


# --- pickled weights ---------------------------------------------------------------------------------


class _RunsWhenUnpickled:
    """What a hostile pytorch_model.bin holds: unpickling it calls os.mkdir(marker)."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return os.mkdir, (self.marker,)


def _pickled_copy(model_dir: Path, target: Path, marker: Path) -> Path:
    from safetensors.torch import load_file

    shutil.copytree(model_dir, target)
    weights = load_file(str(target / "model.safetensors"))
    (target / "model.safetensors").unlink()
    torch.save({**weights, "payload": _RunsWhenUnpickled(str(marker))}, target / "pytorch_model.bin")
    return target


@pytest.mark.parametrize("backbone", ["hf-encoder", "t5"])
def test_a_model_with_only_pickled_weights_is_refused_unread(tmp_path, backbone, tiny_bert_dir, tiny_t5_dir, fresh_registry):
    from structret.recipes import Recipe, resolve_recipe
    from structret.registry import get_registry
    from structret.training import create_backbone

    marker = tmp_path / "the-pickle-ran"
    source = tiny_bert_dir if backbone == "hf-encoder" else tiny_t5_dir
    model = _pickled_copy(source, tmp_path / "model", marker)
    with pytest.raises(ModelLoadError, match=r"has no model.safetensors\. structret loads safetensors weights only, "
                                             r"never pickled \.bin files; convert the checkpoint"):
        get_registry().create("backbone", backbone, str(model))

    # a checkpoint of a run (what --resume and --model RUN load) whose weights were swapped for a pickle
    checkpoint = _pickled_copy(source, tmp_path / "run" / "checkpoint-000002", marker)
    (checkpoint / "structret.json").write_text(json.dumps({"backbone": backbone, "base_model": str(source)}))
    with pytest.raises(ModelLoadError, match="never pickled .bin files"):
        create_backbone(resolve_recipe(None, dict(backbone=backbone)), checkpoint)
    assert not marker.exists()


# --- remote code -------------------------------------------------------------------------------------


def _model_with_its_own_code(model_dir: Path, target: Path, marker: Path) -> Path:
    shutil.copytree(model_dir, target)
    config = json.loads((target / "config.json").read_text())
    # a model type transformers does not know, so only the shipped code could build it
    config.update(model_type="own-bert", auto_map={"AutoConfig": "own_code.OwnConfig", "AutoModel": "own_code.OwnModel"})
    (target / "config.json").write_text(json.dumps(config))
    (target / "own_code.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).touch()\n"
        "from transformers import BertConfig, BertModel\n"
        "class OwnConfig(BertConfig):\n    model_type = 'own-bert'\n"
        "class OwnModel(BertModel):\n    config_class = OwnConfig\n"
    )
    return target


def test_a_model_that_ships_code_is_refused_unless_the_flag_is_given(tmp_path, tiny_bert_dir, fresh_registry, monkeypatch):
    import transformers.dynamic_module_utils as dynamic

    from structret.recipes import Recipe, resolve_recipe
    from structret.training import create_backbone

    marker = tmp_path / "the-model-code-ran"
    model = _model_with_its_own_code(tiny_bert_dir, tmp_path / "model", marker)
    with pytest.raises(ModelLoadError, match=r"ships its own Python code\. structret does not run it unless asked: "
                                             r"if you trust its authors, pass --backbone-option trust_remote_code=true "
                                             r"to 'structret train'"):
        create_backbone(resolve_recipe(None, dict(backbone="hf-encoder", model=str(model))))
    assert not marker.exists()

    # the option is the switch: with it the code runs (its copy goes to a cache in tmp_path, not ~/.cache)
    monkeypatch.setattr(dynamic, "HF_MODULES_CACHE", str(tmp_path / "modules"))
    monkeypatch.syspath_prepend(str(tmp_path / "modules"))
    backbone = create_backbone(resolve_recipe(None, dict(backbone="hf-encoder", model=str(model), backbone_options="trust_remote_code=true")))
    assert marker.exists() and type(backbone.model).__name__ == "OwnModel"


# --- tree-sitter time limit in the miners -------------------------------------------------------------


def test_a_source_file_tree_sitter_takes_too_long_on_is_skipped_by_the_miner(tmp_path, monkeypatch, fresh_registry):
    from structret_code import treesitter

    from structret.mining import mine
    from structret.registry import get_registry

    # 600 kB of "x x x ..." as Java: tree-sitter's error recovery runs for seconds on it
    monkeypatch.setattr(treesitter, "PARSE_SECONDS", 0.05)
    miner = get_registry().create("miner", "java")
    good = "class A {\n  /** Returns the sum of two numbers. */\n  int add(int a, int b) {\n    return a + b;\n  }\n}\n"
    with pytest.raises(SyntaxError, match=r"tree-sitter gave up after 0.05 s \(tree-sitter-java\)") as caught:
        miner.functions("x " * 300_000, "slow/Slow.java")
    assert caught.value.filename == "slow/Slow.java"
    assert [f.func_name for f in miner.functions(good, "A.java")] == ["A.add"]  # the parser was reset

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "Slow.java").write_text("x " * 300_000)
    (tmp_path / "src" / "A.java").write_text(good)
    report = mine(tmp_path / "src", "java", tmp_path / "java.jsonl", show_progress=False)
    assert report.files_skipped == {"syntax error": 1}
    assert any("Slow.java:1: syntax error (tree-sitter gave up after 0.05 s" in e for e in report.skipped_examples)
    assert [json.loads(line)["func_name"] for line in (tmp_path / "java.jsonl").read_text().splitlines()] == ["A.add"]
