"""structret models inside mteb (2.x): ``as_mteb_model`` and ``local_retrieval_task``.

``as_mteb_model(name_or_model)`` wraps a structret model (a backbone name, a run of
``structret train``, a model folder, or a loaded ``structret.Model``) in mteb's encoder
protocol, so ``mteb.evaluate(as_mteb_model("runs/sda"), mteb.get_tasks([...]))`` scores it
on any mteb task. mteb tells the encoder what it is encoding through ``prompt_type``:
``query`` goes to ``Model.encode_query`` and ``document`` to ``Model.encode_document``, so
the backbone's ``query_prefix`` / ``document_prefix`` and a trained run's text format apply
exactly as in ``structret bench``. Tasks without a prompt type (STS, classification,
clustering) encode as documents. Scores are the dot product of the vectors, as structret
scores them (a backbone with ``normalize`` gives cosine).

``local_retrieval_task(spec)`` defines an mteb retrieval task from local files read by a
structret reader (``beir:PATH``, ``coir:PATH``, ...), for data the hub cannot serve here
and for checking mteb's numbers against structret's own.

mteb is imported only by this module (``pip install 'structret[mteb]'``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
from mteb.abstasks.retrieval import AbsTaskRetrieval
from mteb.abstasks.task_metadata import TaskMetadata
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta, ScoringFunction
from mteb.types import PromptType

from structret.models import Model, load_model
from structret.contracts import HasFingerprint
from structret.datasets import load_dataset
from structret.errors import StructretError
from structret.records import COIR_RANKING


class StructretEncoder(AbsEncoder):
    """mteb's ``EncoderProtocol`` over a ``structret.Model`` (see the module docs)."""

    def __init__(self, model_name: str | Model, revision: str | None = None, *, device: str | None = None,
                 batch_size: int = 32, **options: Any) -> None:
        if device not in (None, "cpu"):
            raise StructretError(f"device={device!r}: structret picks its own device; leave device unset.")
        self.model = model_name if isinstance(model_name, Model) else load_model(str(model_name), **options)
        self.batch_size = batch_size
        label = model_name.model or model_name.backbone_name if isinstance(model_name, Model) else str(model_name)
        self.mteb_model_meta = _meta(self.model, label, revision)

    def encode(self, inputs, *, task_metadata: TaskMetadata, hf_split: str, hf_subset: str,
               prompt_type: PromptType | None = None, **kwargs: Any) -> np.ndarray:
        """float32 ``[n, dim]`` for every text of ``inputs`` (mteb's DataLoader of ``{"text": [...]}`` batches)."""
        texts: list[str] = []
        for batch in inputs:
            texts.extend(batch["text"])
        if not texts:
            return np.zeros((0, self.model.dim), dtype=np.float32)
        kind = "query" if prompt_type == PromptType.query else "document"
        batch_size = int(kwargs.get("batch_size") or self.batch_size)
        vectors = self.model.encode(texts, kind, batch_size=batch_size,
                                    show_progress=bool(kwargs.get("show_progress_bar", False)))
        return np.asarray(vectors, dtype=np.float32)


def as_mteb_model(name_or_model: str | Model, *, batch_size: int = 32, **options: Any) -> StructretEncoder:
    """An mteb model over ``name_or_model``: a backbone name, a run directory, a model folder or a
    loaded ``Model``; ``options`` go to the backbone as in ``structret.load_model``."""
    return StructretEncoder(name_or_model, batch_size=batch_size, **options)


def _meta(model: Model, label: str, revision: str | None) -> ModelMeta:
    # mteb keys its results by "org/name" and a revision: name the weights, not the full path
    name = Path(label.rstrip("/")).name or label
    if revision is None:
        backbone = model.backbone
        seed = backbone.fingerprint() if isinstance(backbone, HasFingerprint) else f"{label}|{model.option_strings()}"
        revision = hashlib.sha1(str(seed).encode("utf-8")).hexdigest()[:12]
    return ModelMeta.create_empty(overwrites={
        "loader": None,
        "name": f"structret/{name}",
        "revision": revision,
        "embed_dim": model.dim,
        "framework": ["PyTorch"],
        "similarity_fn_name": ScoringFunction.DOT_PRODUCT,
        "use_instructions": False,
        "open_weights": True,
    })


def local_retrieval_task(spec: str, *, split: str = "test", name: str | None = None,
                         options: dict[str, Any] | None = None) -> AbsTaskRetrieval:
    """An mteb retrieval task over the data of ``spec`` (``FORMAT:PATH``, read by that structret
    reader), main score nDCG@10. Documents are given to mteb as their ``text()``, so mteb and
    structret encode the same strings."""
    from datasets import Dataset as HFDataset  # datasets: ~0.9 s, loaded to build a task only

    dataset = load_dataset(spec, split=split, **(options or {}))
    judged = {q: docs for q, docs in dataset.qrels.items() if docs and q in dataset.queries}
    if not judged:
        raise StructretError(f"{spec} (split={split}) has no judged queries: nothing for mteb to evaluate.")
    task_name = name or f"structret-{Path(spec.partition(':')[2].rstrip('/')).name or 'local'}"
    corpus = HFDataset.from_list([{"id": d, "text": r.text(), "title": ""} for d, r in dataset.corpus.items()])
    queries = HFDataset.from_list([{"id": q, "text": dataset.queries[q].text} for q in judged])
    relevant = {q: {d: int(level) for d, level in docs.items()} for q, docs in judged.items()}

    class LocalRetrieval(AbsTaskRetrieval):
        # CoIR scores with BEIR's ignore_identical_ids (structret's coir-ranking protocol too)
        ignore_identical_ids = dataset.task == COIR_RANKING
        metadata = TaskMetadata(
            name=task_name,
            description=f"{spec}, split {split}, read by structret's '{spec.partition(':')[0]}' reader.",
            reference=None,
            dataset={"path": f"local/{task_name}", "revision": "local"},
            type="Retrieval",
            category="t2t",
            modalities=["text"],
            eval_splits=[split],
            eval_langs=["eng-Latn"],
            main_score="ndcg_at_10",
            date=None,
            domains=None,
            task_subtypes=None,
            license=None,
            annotations_creators=None,
            dialect=None,
            sample_creation=None,
            bibtex_citation="",
        )

        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            self.dataset = {"default": {split: {"corpus": corpus, "queries": queries,
                                                "relevant_docs": relevant, "top_ranked": None}}}
            self.data_loaded = True

    return LocalRetrieval()
