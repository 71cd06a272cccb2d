"""The static backbone: a token table read as model2vec writes it, distilled from a transformer,
trained by structret's trainer, and encoding without torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from _tiny_models import _WORDS, one_torch_thread, tiny_bert_dir  # noqa: F401  (fixtures)
from structret.cli import cli
from structret.errors import ModelLoadError


def structret(*args, code=0):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result


@pytest.fixture(scope="module")
def table_dir(tmp_path_factory, tiny_bert_dir) -> Path:
    """The tiny random BERT distilled to an 8-dimensional table, frequencies from a few texts."""
    from structret_backbones.hf import HFEncoder
    from structret_backbones.static import distill

    out = tmp_path_factory.mktemp("static") / "table"
    done = distill(HFEncoder(tiny_bert_dir, pooling="mean"), out, dims=8, corpus=["def read(path): return path"] * 3)
    assert done["dim"] == 8 and done["frequency_texts"] == 3 and 0 < done["explained_variance"] <= 1
    return out


def _by_hand(folder: Path, text: str, max_length: int = 512) -> np.ndarray:
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    table = load_file(str(folder / "model.safetensors"))["embeddings"]
    unk = tokenizer.token_to_id("[UNK]")
    ids = [i for i in tokenizer.encode(text, add_special_tokens=False).ids if i != unk][:max_length]
    mean = table[ids].mean(0)
    return mean / np.linalg.norm(mean)


def test_a_text_is_the_normalized_mean_of_its_tokens_rows(table_dir):
    from structret.models import load_model

    model = load_model(str(table_dir))  # a bare folder: its config (model_type model2vec) picks the backbone
    assert model.backbone_name == "static" and model.dim == 8
    texts = ["read input file", "sum two numbers and return", "read input file " * 40]
    vectors = model.backbone.encode(texts)
    assert vectors.dtype == np.float32 and vectors.shape == (3, 8)
    for text, vector in zip(texts, vectors):
        np.testing.assert_allclose(vector, _by_hand(table_dir, text), rtol=1e-5, atol=1e-6)
    short = load_model(str(table_dir), max_length=3).backbone.encode([texts[1]])[0]
    np.testing.assert_allclose(short, _by_hand(table_dir, texts[1], max_length=3), rtol=1e-5, atol=1e-6)
    assert not np.allclose(short, vectors[1])
    # nothing known to the vocabulary (the unknown token is dropped) and nothing at all: the zero vector
    empty = model.backbone.encode(["", "\u2603\u2603"])
    assert not empty.any()


def test_the_folder_is_model2vecs_layout(table_dir):
    config = json.loads((table_dir / "config.json").read_text())
    assert config["model_type"] == "model2vec" and config["normalize"] is True and config["hidden_dim"] == 8
    from safetensors.numpy import load_file

    assert list(load_file(str(table_dir / "model.safetensors"))) == ["embeddings"]
    tokenizer = json.loads((table_dir / "tokenizer.json").read_text())
    assert tokenizer["truncation"] is None and tokenizer["padding"] is None


def test_frequent_tokens_weigh_less(tiny_bert_dir, tmp_path):
    """SIF weights: a token the corpus repeats gets a shorter row than it had without the corpus."""
    from structret_backbones.hf import HFEncoder
    from structret_backbones.static import StaticEncoder, distill

    backbone = HFEncoder(tiny_bert_dir, pooling="mean")
    distill(backbone, tmp_path / "zipf", dims=None)
    distill(backbone, tmp_path / "counted", dims=None, corpus=["return return return return"] * 50)
    zipf, counted = StaticEncoder(tmp_path / "zipf"), StaticEncoder(tmp_path / "counted")
    ret = backbone.tokenizer.convert_tokens_to_ids("return")
    other = backbone.tokenizer.convert_tokens_to_ids("read")
    ratio = lambda t: np.linalg.norm(counted.table[t]) / np.linalg.norm(zipf.table[t])  # noqa: E731
    assert ratio(ret) < 0.5 * ratio(other)


def test_sda_trains_the_table_and_the_run_loads_as_a_static_model(tmp_path, table_dir):
    from structret.models import load_model

    rows = []
    for i in range(16):
        name, arg = _WORDS[i % len(_WORDS)], _WORDS[(i * 7 + 3) % len(_WORDS)]
        rows.append({"repo": "tiny/repo", "path": f"m{i}.py", "func_name": f"{name}_{i}", "language": "python",
                     "code": f"def {name}_{i}({arg}):\n    return {arg}\n", "docstring": f"{name} the {arg}",
                     "docstring_tokens": [name, "the", arg], "partition": "train", "url": f"https://x/{i}"})
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = tmp_path / "run"
    settings = {"batch_size": 8, "max_steps": 20, "lr": 0.05, "query_max_len": 16, "passage_max_len": 32, "seed": 1,
                "log_every": 1, "checkpoint_every": 0}
    structret("train", "--recipe", "static-code", "--model", table_dir, "--data",
              f"codesearchnet:{data}", *[f"--set={k}={v}" for k, v in settings.items()], "--out", run)
    losses = [json.loads(line)["loss/sda"] for line in (run / "metrics.jsonl").read_text().splitlines()
              if '"phase": "train"' in line]
    assert len(losses) == 20 and np.mean(losses[-5:]) < np.mean(losses[:5]), losses
    trained = load_model(str(run))
    assert trained.recipe["fusion"] == "zscore:0.7"  # what an index of a project fuses this run by

    def mrr(backbone):  # each docstring against the 16 functions: its own should rise
        scores = backbone.encode([r["docstring"] for r in rows], kind="query") @ backbone.encode([r["code"] for r in rows]).T
        return np.mean([1 / (1 + (row > row[i]).sum()) for i, row in enumerate(scores)])

    assert mrr(trained.backbone) > mrr(load_model(str(table_dir)).backbone) + 0.1
    assert trained.backbone_name == "static"
    assert json.loads((run / "final" / "config.json").read_text())["model_type"] == "model2vec"
    before = load_model(str(table_dir)).backbone.encode(["read the file"])
    after = trained.backbone.encode(["read the file"])
    assert not np.allclose(before, after)
    # the trained folder is itself a static model: loaded bare, the same vectors
    np.testing.assert_allclose(load_model(str(run / "final")).backbone.encode(["read the file"]), after, rtol=1e-6)


def test_a_folder_that_is_not_a_table_says_what_is_missing(tmp_path, table_dir):
    from structret_backbones.static import StaticEncoder

    with pytest.raises(ModelLoadError, match="needs a model folder"):
        StaticEncoder()
    with pytest.raises(ModelLoadError, match="no such model folder"):
        StaticEncoder(tmp_path / "absent")
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "tokenizer.json").write_text((table_dir / "tokenizer.json").read_text())
    with pytest.raises(ModelLoadError, match="no model.safetensors"):
        StaticEncoder(tmp_path / "half")
    (tmp_path / "half" / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(ModelLoadError, match="cannot be read as safetensors"):
        StaticEncoder(tmp_path / "half")
    with pytest.raises(ModelLoadError, match="predicts no tokens"):
        StaticEncoder(table_dir).train_forward({}, labels=object())


def test_encoding_imports_no_torch(table_dir):
    """What makes a table fast to start: a process that loads it and encodes never imports torch."""
    code = ("import sys; from structret.models import load_model; "
            f"m = load_model({str(table_dir)!r}); m.encode(['read a file']); "
            "print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_structret_distill_writes_a_table_weighted_by_the_data(tmp_path, tiny_bert_dir):
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps({"repo": "r", "path": f"m{i}.py", "func_name": f"f{i}", "language": "python",
                                        "code": f"def f{i}(path):\n    return read(path)\n", "docstring": "read a file",
                                        "docstring_tokens": ["read", "a", "file"], "partition": "train",
                                        "url": f"u{i}"}) + "\n" for i in range(5)))
    out = tmp_path / "table"
    result = structret("distill", "--model", tiny_bert_dir, "--out", out, "--dims", 8, "--data",
                       f"codesearchnet:{data}")
    assert "x 8 dimensions" in result.output and "weights from 10 texts' token counts" in result.output
    from structret.models import load_model

    assert load_model(str(out)).backbone.encode(["read a file"]).shape == (1, 8)
    structret("distill", "--model", tmp_path / "absent", "--out", tmp_path / "x", code=1)
