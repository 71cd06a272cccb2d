"""structret export: a sentence-transformers folder and ONNX graphs that give the run's own vectors,
the torch-free loader, serving an index through the ONNX export, and the runs it refuses."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from _tiny_models import build_lively_bert, one_torch_thread, tiny_bert_dir, tiny_t5_dir  # noqa: F401  (fixtures)
from click.testing import CliRunner
from test_serve import FUNCTIONS, write_functions

import structret
from structret.models import open_model
from structret.cli import cli
from structret.exporting import ExportError, check_faithful, export_run
from structret.exporting.checks import cosines
from structret.onnx_encoder import OnnxEncoder

# not the texts the export checks itself on
QUERIES = ["parse a date", "send mail through a server", "Count Words In TEXT", "ünïcode query ✓"]
DOCUMENTS = [f"def {name}({arg}):\n    \"\"\"{doc}\"\"\"\n    {body}" for name, arg, doc, body in FUNCTIONS]
DOCUMENTS.append("def long(x): return " + " + ".join(f"value_{i}" for i in range(400)))  # truncated


@pytest.fixture(scope="module")
def lively_bert_dir(tmp_path_factory, tiny_bert_dir) -> Path:  # noqa: F811
    return build_lively_bert(tiny_bert_dir, tmp_path_factory.mktemp("lively-bert"))


@pytest.fixture(scope="module")
def run(tmp_path_factory, lively_bert_dir) -> Path:
    """A two-step run of the minilm backbone (mean pooling, unit vectors) on the lively tiny BERT."""
    tmp = tmp_path_factory.mktemp("export-run")
    data = write_functions(tmp / "functions.jsonl.gz", partition="train")
    trained = structret.train(data=f"codesearchnet:{data}", out=str(tmp / "run"), backbone="minilm",
                              model=str(lively_bert_dir), max_steps=2, batch_size=4, checkpoint_every=0,
                              settings={"lr": 1e-3, "passage_max_len": 32})
    return trained.path


@pytest.fixture(scope="module")
def model(run):
    return open_model(None, str(run), {"dtype": "fp32"})


@pytest.fixture(scope="module")
def onnx_dir(run, tmp_path_factory) -> tuple[Path, list[str]]:
    out = tmp_path_factory.mktemp("onnx") / "export"
    lines: list[str] = []
    export_run(run, "onnx", out, echo=lines.append)
    return out, lines


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


# --- sentence-transformers -----------------------------------------------------------------


def test_the_test_model_tells_texts_apart(model):
    """Otherwise the cosine checks below would pass for any model of the right shape: two
    different texts must be further apart than the loosest threshold (int8's 0.99)."""
    vectors = model.encode_document(DOCUMENTS)
    pairwise = cosines(np.repeat(vectors, len(vectors), axis=0), np.tile(vectors, (len(vectors), 1)))
    others = pairwise.reshape(len(vectors), len(vectors))[~np.eye(len(vectors), dtype=bool)]
    assert others.max() < 0.99


def test_sentence_transformers_loads_the_folder_and_gives_the_runs_vectors(run, model, tmp_path):
    from sentence_transformers import SentenceTransformer

    out = tmp_path / "st"
    export_run(run, "sentence-transformers", out, echo=lambda line: None)
    st = SentenceTransformer(str(out), device="cpu")
    assert st.max_seq_length == model.backbone.max_length
    assert cosines(st.encode_query(QUERIES), model.encode_query(QUERIES)).min() >= 0.9999
    assert cosines(st.encode_document(DOCUMENTS), model.encode_document(DOCUMENTS)).min() >= 0.9999
    np.testing.assert_allclose(st.encode_document(DOCUMENTS), model.encode_document(DOCUMENTS), atol=1e-5)
    assert not (out / "structret.json").exists()  # not a structret run: its checksums would not list the card


def test_the_model_card_says_what_the_run_was_and_that_nothing_was_benchmarked(run, tmp_path, lively_bert_dir):
    out = tmp_path / "st"
    export_run(run, "sentence-transformers", out, echo=lambda line: None)
    card = (out / "README.md").read_text(encoding="utf-8")
    assert f"Base model: `{lively_bert_dir}`" in card
    assert "objectives: `sda`" in card and "functions.jsonl.gz" in card
    assert oct(out.stat().st_mode & 0o777) == oct(0o777 & ~_umask())  # not mkdtemp's private 0700
    assert "Steps: 2 × batch 4 = 8 training examples seen" in card
    assert "unknown: check the base model's licence" in card
    assert "No benchmark numbers are recorded" in card
    assert "mean pooling" in card and "unit-length vectors" in card
    assert "SentenceTransformer(" in card


def test_query_and_document_prefixes_become_sentence_transformers_prompts(run, tmp_path):
    from sentence_transformers import SentenceTransformer

    from structret.exporting.st_folder import write_sentence_transformers

    # cls pooling and raw vectors here: the run's own are mean and unit length
    prefixed = open_model(None, str(run), {"dtype": "fp32", "query_prefix": "query: ", "document_prefix": "passage: ",
                                           "pooling": "cls", "normalize": False})
    out = tmp_path / "st"
    write_sentence_transformers(prefixed, run, out, echo=lambda line: None)
    config = json.loads((out / "config_sentence_transformers.json").read_text(encoding="utf-8"))
    assert config["prompts"] == {"query": "query: ", "document": "passage: "}
    st = SentenceTransformer(str(out), device="cpu")
    assert cosines(st.encode_query(QUERIES), prefixed.encode_query(QUERIES)).min() >= 0.9999
    assert cosines(st.encode_document(DOCUMENTS), prefixed.encode_document(DOCUMENTS)).min() >= 0.9999
    np.testing.assert_allclose(st.encode_query(QUERIES), prefixed.encode_query(QUERIES), atol=1e-4)  # lengths too
    # the prefixes matter: without them the vectors are another model's
    assert cosines(st.encode(QUERIES), prefixed.encode_query(QUERIES)).min() < 0.9999


# --- ONNX ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("variant", "floor"), [("fp32", 0.9999), ("int8", 0.99)])
def test_onnx_graphs_give_the_runs_vectors(onnx_dir, model, variant, floor):
    encoder = OnnxEncoder(onnx_dir[0], variant=variant)
    assert encoder.name == model.name  # the identity an index built with the run checks
    assert cosines(encoder.encode(QUERIES, kind="query"), model.encode_query(QUERIES)).min() >= floor
    single = np.stack([encoder.encode([q], kind="query")[0] for q in QUERIES])  # as a server encodes
    assert cosines(single, model.encode_query(QUERIES)).min() >= floor
    assert cosines(encoder.encode(DOCUMENTS, kind="document"), model.encode_document(DOCUMENTS)).min() >= floor


def test_the_onnx_export_prints_its_check_and_speeds(onnx_dir):
    out, lines = onnx_dir
    text = "\n".join(lines)
    assert "onnx fp32: min cosine to the torch model" in text
    assert re.search(r"onnx int8 \(.*\): min cosine to the torch model 0\.99\d+ \(needs >= 0\.99\)", text)
    speeds = next(line for line in lines if line.startswith("speed"))
    assert all(f"{what} " in speeds for what in ("torch", "onnx fp32", "onnx int8")) and "texts/s" in speeds
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "texts/s" in card and "structret serve INDEX_DIR --model" in card


def test_the_onnx_export_fails_when_a_graph_differs_from_the_run(onnx_dir, model, monkeypatch):
    from structret.exporting import onnx_graph

    real = OnnxEncoder.encode
    monkeypatch.setattr(OnnxEncoder, "encode", lambda self, texts, **kw: -real(self, texts, **kw))
    with pytest.raises(ExportError, match=r"ONNX fp32 graph .* differ from the run's"):
        onnx_graph.check_onnx(model, onnx_dir[0], echo=lambda line: None, min_seconds=0.01)


def test_int8_keeps_more_in_fp32_until_it_passes_and_a_failed_export_leaves_nothing(run, onnx_dir, model, tmp_path,
                                                                                    monkeypatch):
    from structret.exporting import onnx_graph

    assert json.loads((onnx_dir[0] / "onnx_export.json").read_text(encoding="utf-8"))["int8"] in onnx_graph.INT8_LEVELS
    ffn = onnx_graph.feed_forward_matmuls(onnx_dir[0] / "model.onnx", model.dim)
    assert len(ffn["in"]) == len(ffn["out"]) == 2  # the tiny BERT's two layers
    levels = []
    real = onnx_graph.quantize
    monkeypatch.setattr(onnx_graph, "quantize", lambda *a, level="none", **kw: (levels.append(level),
                                                                               real(*a, level=level, **kw)))
    monkeypatch.setattr(onnx_graph, "INT8_COSINE", 1.5)  # no graph can reach it
    lines = []
    (tmp_path / "out").mkdir()  # empty: allowed, and kept empty when the export fails
    with pytest.raises(ExportError, match="no int8 graph comes within cosine 1.5 .* nothing was written"):
        export_run(run, "onnx", tmp_path / "out", echo=lines.append)
    assert levels == ["none", "ffn-output", "ffn"]
    assert sum("keeping more of it in fp32" in line for line in lines) == 3
    assert [p.name for p in tmp_path.iterdir()] == ["out"] and not any((tmp_path / "out").iterdir())


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300)


def test_the_onnx_loader_imports_no_torch(onnx_dir, model):
    done = _python(f"""
        import json, sys
        import structret
        m = structret.load_model({str(onnx_dir[0])!r}, variant="int8")
        v = m.encode_query({QUERIES!r})
        print(json.dumps({{"torch": "torch" in sys.modules, "transformers": "transformers" in sys.modules,
                          "backbone": m.backbone_name, "vectors": v.tolist()}}))
    """)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.splitlines()[-1])
    assert got["torch"] is False and got["transformers"] is False and got["backbone"] == "onnx"
    assert cosines(np.array(got["vectors"]), model.encode_query(QUERIES)).min() >= 0.99


def test_an_index_built_with_the_run_is_served_through_its_onnx_export_without_torch(run, model, onnx_dir, tmp_path):
    data = write_functions(tmp_path / "functions.jsonl.gz")
    index = structret.build_index(model, f"codesearchnet:{data}", show_progress=False)
    index.save(tmp_path / "idx")
    query = "read a configuration file"
    expected = [h.id for h in index.search(model, query, k=len(index))]
    done = _python(f"""
        import json, sys
        from starlette.testclient import TestClient
        from structret.serving import create_app
        app = create_app({str(tmp_path / "idx")!r}, {str(onnx_dir[0])!r})
        client = TestClient(app)
        hits = client.get("/api/search", params={{"q": {query!r}, "k": {len(index)}}}).json()["hits"]
        health = client.get("/api/health").json()
        print(json.dumps({{"torch": "torch" in sys.modules, "ids": [h["id"] for h in hits], "health": health}}))
    """)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.splitlines()[-1])
    assert got["torch"] is False
    assert got["ids"] == expected
    assert got["health"]["backbone"] == "onnx" and got["health"]["model"] == model.name


def test_an_onnx_export_says_which_options_it_takes(onnx_dir):
    from structret.errors import ModelLoadError

    with pytest.raises(ModelLoadError, match="takes variant='fp32'\\|'int8' and threads=N, not max_length"):
        structret.load_model(str(onnx_dir[0]), max_length=32)
    with pytest.raises(ModelLoadError, match="variant='int4': use 'fp32' or 'int8'"):
        structret.load_model(str(onnx_dir[0]), variant="int4")


def test_an_index_of_another_model_refuses_the_onnx_export(onnx_dir, tiny_bert_dir, tmp_path):  # noqa: F811
    from structret.errors import ArtifactError

    data = write_functions(tmp_path / "functions.jsonl.gz")
    index = structret.build_index(structret.load_model(str(tiny_bert_dir)), f"codesearchnet:{data}",
                                  show_progress=False)
    with pytest.raises(ArtifactError, match="scores between different models mean nothing"):
        index.use(structret.load_model(str(onnx_dir[0])))


# --- what is refused -------------------------------------------------------------------------


def test_a_directory_that_is_not_a_run_is_one_clean_error(tmp_path, tiny_bert_dir):  # noqa: F811
    for given, message in ((tiny_bert_dir, "is not a run of 'structret train'"), (tmp_path / "nope", "does not exist")):
        result = CliRunner().invoke(cli, ["export", str(given), "--format", "onnx", "--out", str(tmp_path / "o")])
        assert result.exit_code == 1, result.output
        assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "o").exists()


def test_an_unknown_format_is_one_clean_error(run, tmp_path):
    result = CliRunner().invoke(cli, ["export", str(run), "--format", "tflite", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "'tflite' is not one of" in result.output and "Traceback" not in result.output
    with pytest.raises(ExportError, match="unknown export format 'tflite'; use one of: sentence-transformers, onnx"):
        export_run(run, "tflite", tmp_path / "o")


def test_a_non_empty_out_directory_is_refused(run, tmp_path):
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "keep.txt").write_text("mine", encoding="utf-8")
    result = CliRunner().invoke(cli, ["export", str(run), "--format", "sentence-transformers", "--out",
                                      str(tmp_path / "o")])
    assert result.exit_code == 1 and "already exists and is not empty" in result.output
    assert (tmp_path / "o" / "keep.txt").read_text(encoding="utf-8") == "mine"


def test_models_an_export_cannot_reproduce_are_refused_with_the_reason(tiny_bert_dir, tiny_t5_dir, tmp_path):  # noqa: F811
    from structret.models import Model
    from structret.linearization import TextFormat

    with pytest.raises(ExportError, match="fuses aspect slots .brand, color."):
        check_faithful(open_model(None, str(tiny_bert_dir), {"aspect_slots": "brand,color"}), tmp_path)
    with pytest.raises(ExportError, match="uses the t5 backbone"):
        check_faithful(open_model(None, str(tiny_t5_dir)), tmp_path)
    plain = open_model(None, str(tiny_bert_dir))
    formatted = Model(plain.backbone, backbone_name="hf-encoder", text_format=TextFormat("product"))
    with pytest.raises(ExportError, match="formats texts with the 'product' text format"):
        check_faithful(formatted, tmp_path)
    check_faithful(plain, tmp_path)  # a plain encoder passes


# --- runtime="onnx" / "onnx-int8": the same export as a backbone option ----------------------


@pytest.mark.parametrize("runtime, floor", [("onnx", 0.9999), ("onnx-int8", 0.99)])
def test_runtime_onnx_encodes_through_onnxruntime_close_to_torch(run, model, tmp_path, monkeypatch, caplog,
                                                                 runtime, floor):
    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path))
    with caplog.at_level("INFO", logger="structret.backbones"):
        onnx = open_model(None, str(run), {"runtime": runtime})
        vectors = onnx.encode_document(DOCUMENTS)
    assert "exporting" in caplog.text and type(onnx.backbone._onnx).__name__ == "OnnxEncoder"
    assert cosines(vectors, model.encode_document(DOCUMENTS)).min() >= floor
    assert cosines(onnx.encode_query(QUERIES), model.encode_query(QUERIES)).min() >= floor
    # another process (a new backbone, same weights and settings) loads the export, never redoes it
    caplog.clear()
    with caplog.at_level("INFO", logger="structret.backbones"):
        again = open_model(None, str(run), {"runtime": runtime})
        np.testing.assert_array_equal(again.encode_document(DOCUMENTS), vectors)
    assert "exporting" not in caplog.text and len(list((tmp_path / "onnx").iterdir())) == 1
    # the vector cache must never hand torch's vectors to the ONNX model or back
    assert again.backbone.fingerprint() != model.backbone.fingerprint()


def test_runtime_onnx_cannot_train_and_says_so(run, tmp_path, monkeypatch):
    from structret.errors import ModelLoadError

    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path))
    onnx = open_model(None, str(run), {"runtime": "onnx"})
    with pytest.raises(ModelLoadError, match="cannot train; train with runtime=torch"):
        onnx.backbone.training_module


def test_an_unknown_runtime_is_refused_with_the_choices(run):
    from structret.errors import StructretError

    with pytest.raises(StructretError, match="runtime"):
        open_model(None, str(run), {"runtime": "tensorrt"})


def test_serve_takes_runtime_onnx_int8_as_a_model_option(run, model, tmp_path, monkeypatch):
    from starlette.testclient import TestClient

    from structret.serving import create_app

    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path / "cache"))
    data = write_functions(tmp_path / "functions.jsonl.gz")
    index = structret.build_index(model, f"codesearchnet:{data}", show_progress=False)
    index.save(tmp_path / "idx")
    query = "read a configuration file"
    expected = [h.id for h in index.search(model, query, k=3)]
    for given in (None, str(run)):  # the index's own model, or the run named with --model
        app = create_app(tmp_path / "idx", given, model_options={"runtime": "onnx-int8"})
        assert app.state.searcher.model.backbone.runtime == "onnx-int8"
        hits = TestClient(app).get("/api/search", params={"q": query, "k": 3}).json()["hits"]
        assert [h["id"] for h in hits][0] == expected[0]
