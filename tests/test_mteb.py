"""mteb (2.x) evaluates structret models: the encoder protocol, prompts, and agreement with
structret's own evaluation on the same local data."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("mteb")

import mteb  # noqa: E402
from mteb.types import PromptType  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

import structret  # noqa: E402
from structret.errors import StructretError  # noqa: E402
from structret.mteb_adapter import as_mteb_model, local_retrieval_task  # noqa: E402

from _tiny_models import tiny_bert_dir  # noqa: E402,F401

BEIR = "beir:tests/data/beir"
COIR_TASK = "coir:tests/data/coir/cosqa"


def _batches(texts, size=2):
    return DataLoader([{"text": t} for t in texts], batch_size=size)


@pytest.fixture(scope="module")
def minilm():
    # the bundled MiniLM, not the tiny random model: that one's scores differ only in the 6th
    # digit (near-constant vectors), so mteb's torch matmul and structret's numpy one break the
    # near-ties differently. fp32: bf16 vectors change with the padding of their batch, and mteb
    # batches texts differently from structret.
    return structret.load_model("minilm", dtype="fp32")


@pytest.mark.slow
@pytest.mark.parametrize("spec", [BEIR, COIR_TASK])
def test_mteb_scores_a_structret_model_as_structret_does(minilm, spec):
    model = minilm
    task = local_retrieval_task(spec)
    result = mteb.evaluate(as_mteb_model(model), task, cache=None, show_progress_bar=False)
    scores = result.task_results[0].scores["test"][0]
    ours = structret.evaluate(model, spec, show_progress=False)
    # mteb rounds its scores to 5 decimals
    assert scores["ndcg_at_10"] == pytest.approx(ours["nDCG@10"], abs=1e-5)
    assert 0 < scores["ndcg_at_10"] <= 1
    if spec == BEIR:
        assert scores["ndcg_at_10"] < 0.9  # a ranking with mistakes in it: the two agree on those too


def test_prompt_type_routes_queries_and_documents(tiny_bert_dir):
    model = structret.load_model(str(tiny_bert_dir), dtype="fp32", query_prefix="query: ", document_prefix="passage: ")
    encoder = as_mteb_model(model)
    texts = ["read a config file", "parse a date string", "sort numbers"]
    meta = local_retrieval_task(BEIR).metadata
    as_query = encoder.encode(_batches(texts), task_metadata=meta, hf_split="test", hf_subset="default",
                              prompt_type=PromptType.query)
    as_document = encoder.encode(_batches(texts), task_metadata=meta, hf_split="test", hf_subset="default",
                                 prompt_type=PromptType.document)
    assert as_query.dtype == np.float32 and as_query.shape == (3, model.dim)
    np.testing.assert_allclose(as_query, model.encode_query(texts), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(as_document, model.encode_document(texts), rtol=1e-5, atol=1e-6)
    assert not np.allclose(as_query, as_document)  # the prefixes reached the backbone


def test_model_meta_names_the_model_and_scores_by_dot_product(tiny_bert_dir):
    encoder = as_mteb_model(str(tiny_bert_dir))
    meta = encoder.mteb_model_meta
    assert meta.name == f"structret/{tiny_bert_dir.name}"
    assert meta.embed_dim == encoder.model.dim
    assert meta.similarity_fn_name.value == "dot"
    assert len(meta.revision) == 12  # a hash of the weights: another model is another mteb cache entry


def test_a_task_without_judged_queries_is_refused(tmp_path):
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "text": "x"}\n')
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "y"}\n')
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n")
    with pytest.raises(StructretError, match="no judged queries"):
        local_retrieval_task(f"beir:{tmp_path}")


def test_import_structret_does_not_import_mteb():
    code = "import sys, structret; structret.load_dataset; print('mteb' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
