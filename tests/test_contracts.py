"""Every registered plugin (built-in and the example plugin's) against its contract, through
structret.testing.check_plugin; and broken plugins named with the rule they break, from
check_plugin and from a training run through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from _tiny_models import one_torch_thread, tiny_bert_dir, tiny_t5_dir  # noqa: F401  (fixtures)
from structret.errors import ContractError, StructretError
from structret.registry import get_registry
from structret.testing import check_plugin

DATA = Path(__file__).parent / "data"
# a sample file or folder per built-in reader; the others are checked with a missing path only
SAMPLES = {
    "codesearchnet": (DATA / "csn" / "mined" / "functions.jsonl.gz", None),
    "adv": (DATA / "adv" / "test.jsonl", "test"),
    "beir": (DATA / "beir", "test"),
    "debian-packages": (DATA / "debian", None),
    "tevatron": (DATA / "bad" / "tevatron-bad.jsonl", None),
}
BERT_BACKBONES = {"hf-encoder", "minilm", "bert-base"}  # given the tiny BERT as model=
T5_BACKBONES = {"t5", "t5-base", "codet5-base"}  # given the tiny T5 as model=


def entries(kind: str) -> list:
    return [pytest.param(name, id=f"{kind}-{name}") for name in get_registry().names(kind)]


def _checked(kind: str, name: str, **options):
    """check_plugin, with plugins whose resources are not installed here skipped (reason shown)."""
    try:
        return check_plugin(kind, name, **options)
    except ContractError:
        raise
    except StructretError as exc:  # a tagger model or grammar that is not installed: not a broken contract
        pytest.skip(f"{kind} {name} unavailable here: {str(exc)[:120]}")


@pytest.mark.parametrize("name", entries("objective"))
def test_objective_keeps_its_contract(name):
    report = _checked("objective", name)
    assert isinstance(report["report"], dict)


@pytest.mark.parametrize("name", entries("extractor"))
def test_extractor_keeps_its_contract(name):
    assert _checked("extractor", name)["entities"] >= 0


@pytest.mark.parametrize("name", entries("linearizer"))
def test_linearizer_keeps_its_contract(name):
    result = _checked("linearizer", name)
    assert result["linearized"] + result["refused"] <= 8


@pytest.mark.parametrize("name", entries("index"))
def test_index_keeps_its_contract(name):
    assert _checked("index", name)["size"] == 50


@pytest.mark.parametrize("name", entries("retriever"))
def test_retriever_keeps_its_contract(name):
    assert _checked("retriever", name)["documents"] == 8


@pytest.mark.parametrize("name", entries("dataset"))
def test_dataset_reader_keeps_its_contract(name):
    assert _checked("dataset", name) == {"missing path": "DataError"}
    if name in SAMPLES:
        path, split = SAMPLES[name]
        assert _checked("dataset", name, path=path, split=split)["documents"] > 0


@pytest.mark.parametrize("name", entries("backbone"))
def test_backbone_keeps_its_contract(name, tiny_bert_dir, tiny_t5_dir, tmp_path):
    if name in BERT_BACKBONES:
        model = tiny_bert_dir
    elif name in T5_BACKBONES:
        model = tiny_t5_dir
    elif name == "informed-transformer":
        from structret_structure.model import initialize

        model = initialize(tmp_path / "informed", ["def f(x):\n    return x + 1"] * 4, dim=32, layers=1, heads=2)
    elif name == "static":
        from structret_backbones.hf import HFEncoder
        from structret_backbones.static import distill

        distill(HFEncoder(tiny_bert_dir, pooling="mean"), tmp_path / "table", dims=8)
        model = tmp_path / "table"
    else:
        pytest.skip(f"backbone {name}: no tiny local model for it (hub weights cannot load offline)")
    result = _checked("backbone", name, model=str(model))
    assert result["dim"] > 0 and "encoder" in result["capabilities"] and result["trainable"]


# --- broken plugins --------------------------------------------------------------------------

BROKEN = """
import torch
from structret import hookimpl
from structret.contracts import ObjectiveDefaults


class NoLabels(ObjectiveDefaults):
    name, role, needs = "no-labels", "corruption", frozenset({"mlm"})

    def check(self, backbone):
        pass

    def corrupt(self, texts, records, backbone, *, max_length, label_max_length, rngs):
        return dict(backbone.tokenize(list(texts), kind="document", max_length=max_length))


class Dotted(ObjectiveDefaults):
    name, role = "dot.ted", "contrastive"

    def check(self, backbone):
        pass

    def loss(self, queries, passages):
        return (queries @ passages.T).mean()


class FloatAux(ObjectiveDefaults):
    name, role = "float-aux", "auxiliary"

    def check(self, backbone):
        pass

    def loss(self, backbone, passages, vectors, targets):
        return 0.5


class Detached(ObjectiveDefaults):
    name, role = "detached", "contrastive"

    def check(self, backbone):
        pass

    def loss(self, queries, passages):
        return (queries @ passages.T).mean().detach()


class PickyCheck(ObjectiveDefaults):
    name, role = "picky", "contrastive"

    def check(self, backbone):
        raise ValueError("this backbone will not do")  # the natural exception, not ObjectiveError

    def loss(self, queries, passages):
        return (queries @ passages.T).mean()


class Twin(ObjectiveDefaults):  # calls itself what the built-in contrastive objective is called
    name, role = "dr", "auxiliary"

    def check(self, backbone):
        pass

    def loss(self, backbone, passages, vectors, targets):
        return vectors.pow(2).mean(), torch.tensor(1.0)


class SummedAux(ObjectiveDefaults):
    name, role = "summed-aux", "auxiliary"

    def check(self, backbone):
        pass

    def loss(self, backbone, passages, vectors, targets):
        return vectors.pow(2).sum(dim=1).sum(), torch.tensor(float(len(vectors)))  # a sum, not a mean


class PastTheEnd:
    def extract(self, text, language=None):
        from structret.records import Entity

        return [Entity(len(text) - 2, len(text) + 1000, "x", "name")]


class Tuples:
    def extract(self, text, language=None):
        return [(0, 3, "def", "keyword")]


@hookimpl
def register_objectives(register):
    register("no-labels", NoLabels)
    register("dot.ted", Dotted)
    register("float-aux", FloatAux)
    register("detached", Detached)
    register("picky", PickyCheck)
    register("twin", Twin)
    register("summed-aux", SummedAux)


@hookimpl
def register_extractors(register):
    register("past-the-end", PastTheEnd)
    register("tuples", Tuples)
"""


@pytest.fixture
def broken_plugin(make_plugin):
    make_plugin("broken-objectives", "broken_objectives", BROKEN)


@pytest.mark.parametrize("name, rule, said", [
    ("no-labels", "corrupt-labels", "'labels'"),
    ("dot.ted", "objective-name", "'.'"),
    ("float-aux", "auxiliary-loss", "returned float"),
    ("summed-aux", "loss-mean", "twice: mean"),
    ("detached", "loss-graph", "no gradient"),
])
def test_a_broken_objective_is_named_with_its_rule(broken_plugin, name, rule, said):
    with pytest.raises(ContractError) as info:
        check_plugin("objective", name)
    message = str(info.value)
    assert f"objective '{name}'" in message and "distribution 'broken-objectives'" in message
    assert f"[rule {rule}" in message and said in message


def test_an_objective_without_the_optional_members_is_named(make_plugin):
    make_plugin("bare-objectives", "bare_objectives", """
        from structret import hookimpl

        class Bare:
            name, role = "bare", "contrastive"
            def check(self, backbone):
                pass
            def loss(self, queries, passages):
                return (queries @ passages.T).mean()

        @hookimpl
        def register_objectives(register):
            register("bare", Bare)
    """)
    with pytest.raises(ContractError, match=r"it has no needs, standalone, module, counts.*rule objective-members"):
        check_plugin("objective", "bare")


@pytest.mark.parametrize("objective, rule, extra", [
    ("no-labels", "[rule corrupt-labels", ()),
    ("dr+dot.ted", "[rule objective-name", ()),
    ("dr+float-aux", "[rule auxiliary-loss", ()),
    ("detached", "[rule loss-graph", ()),
    ("picky", "[rule objective-check", ()),
    ("dr+twin", "more than one objective is named dr", ()),
    ("mep", "[rule extractor-spans", ("--set", "mep.extractor=past-the-end", "--set", "mep.lm_warmup=0")),
    ("mep", "[rule extractor-spans", ("--set", "mep.extractor=tuples", "--set", "mep.lm_warmup=0")),
])
def test_training_with_a_broken_plugin_ends_in_one_clean_error(broken_plugin, tiny_bert_dir, tmp_path,
                                                               objective, rule, extra):
    from structret.cli import cli

    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"query": f"query {i}", "positive_passages": [{"text": f"passage {i}"}]}) + "\n"
                            for i in range(4)))
    result = CliRunner().invoke(cli, ["train", "--backbone", "hf-encoder", "--model", str(tiny_bert_dir),
                                      "--objective", objective, "--data", f"tevatron:{data}",
                                      "--out", str(tmp_path / "run"), "--set", "batch_size=2", "--set", "max_steps=1",
                                      *extra])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    errors = [line[line.index("Error:"):] for line in result.stderr.replace("\r", "\n").splitlines() if "Error:" in line]
    assert len(errors) == 1 and rule in errors[0], result.stderr
    if rule.startswith("[rule"):
        assert "distribution 'broken-objectives'" in errors[0]


def test_an_unanticipated_exception_in_plugin_code_is_one_line_naming_it(make_plugin, tmp_path, monkeypatch,
                                                                        tiny_bert_dir):
    from structret.cli import cli

    make_plugin("crashing-index", "crashing_index", """
        from structret import hookimpl

        class Crashes:
            def __init__(self, dim, metric="ip"):
                self.dim, self.metric = dim, metric
            def __len__(self):
                return 0
            def add(self, ids, vectors):
                {}["no such key"]
            def search(self, queries, k):
                return [], []
            def save(self, path, meta=None):
                pass
            @classmethod
            def load(cls, path):
                return cls(1)

        @hookimpl
        def register_indexes(register):
            register("crashes", Crashes)
    """)
    data = tmp_path / "c.jsonl"
    data.write_text("".join(json.dumps({"repo": "r", "path": f"m{i}.py", "func_name": f"f{i}", "language": "python",
                                        "code": f"def f{i}(x):\n    return x + {i}\n", "docstring": f"add {i}",
                                        "docstring_tokens": ["add", str(i)], "partition": "test", "url": f"u{i}"})
                            + "\n" for i in range(3)))
    args = ["index", "--data", f"codesearchnet:{data}", "--backbone", "hf-encoder", "--model", str(tiny_bert_dir),
            "--index", "crashes", "--out", str(tmp_path / "idx")]
    result = CliRunner().invoke(cli, args)
    line = [x for x in result.stderr.splitlines() if x.startswith("Error:")]
    assert result.exit_code == 1 and len(line) == 1 and "Traceback" not in result.output
    assert "plugin 'crashing_index' from distribution 'crashing-index' failed: KeyError" in line[0]
    assert "crashing_index.py:" in line[0] and "--debug" in line[0]
    monkeypatch.setenv("STRUCTRET_DEBUG", "1")
    assert isinstance(CliRunner().invoke(cli, args).exception, KeyError)  # the traceback, on request


def test_core_reads_a_plugins_optional_members_only_where_declared():
    """Every member core may read from a plugin is on contracts.py's page: an optional one as a
    runtime_checkable Protocol of one member, listed in OPTIONAL, asked with isinstance; core never
    probes a plugin with getattr or hasattr."""
    import ast
    from pathlib import Path

    from structret import contracts
    from structret.contracts import OPTIONAL, HasSettings, optional_member

    class Bare:
        pass

    class Described:
        def settings(self):
            return "k1=1.2"

    assert not isinstance(Bare(), HasSettings) and isinstance(Described(), HasSettings)
    listed = [p for protocols in OPTIONAL.values() for p in protocols]
    declared = [v for n, v in vars(contracts).items() if n.startswith("Has") and isinstance(v, type)]
    assert set(declared) == set(listed), "a Has* protocol of contracts.py is missing from OPTIONAL, or the reverse"
    for protocol in listed:
        assert getattr(protocol, "_is_runtime_protocol", False), f"{protocol.__name__} is not runtime_checkable"
        assert optional_member(protocol)  # exactly one member each
    plugin_names = {"retriever", "linearizer", "extractor", "miner", "objective", "backbone", "index", "b", "o"}
    probes = []
    import structret

    for path in Path(structret.__file__).parent.rglob("*.py"):
        if path.name in ("contracts.py", "testing.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                    and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in plugin_names):
                probes.append(f"{path}:{node.lineno}")
    assert not probes, f"core probes plugin objects outside contracts.OPTIONAL's protocols: {probes}"
    assert set(OPTIONAL) <= {"backbone", "retriever", "extractor", "linearizer", "miner", "index", "objective"}


def test_the_tiny_bert_is_the_same_in_every_build(tmp_path):
    # tokenizers' WordPiece trainer broke ties in hash order: each process got another
    # vocabulary, and convergence tests on the tiny BERT passed or failed by luck
    from structret.testing import build_tiny_bert

    first, second = build_tiny_bert(tmp_path / "a"), build_tiny_bert(tmp_path / "b")
    for name in ("tokenizer.json", "model.safetensors"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
