"""structret's public Python API: what the CLI does, callable from a notebook (docs/api.md).

    model = structret.load_model("minilm")
    index = structret.build_index(model, "codesearchnet:corpus.jsonl.gz", split="test")
    hits = index.search(model, "read a config file", k=5)

torch and transformers are imported only when a model is loaded or trained.
"""

from structret.api.datasets import load_dataset
from structret.api.encoding import EncodeResult, encode_dataset
from structret.api.indexes import Hit, SearchIndex, build_index, index_embeddings, load_index
from structret.api.sources import SourceIndexResult, index_source
from structret.api.updates import UpdateResult, update_index
from structret.api.models import Model, load_model, new_model, open_model
from structret.api.runs import Run, evaluate, train, tune_fusion
from structret.artifacts import verify_tree
from structret.figures import plot_figures

__all__ = [
    "EncodeResult", "Hit", "Model", "Run", "SearchIndex", "build_index", "encode_dataset", "evaluate",
    "index_embeddings", "index_source", "load_dataset", "load_index", "load_model", "new_model", "open_model",
    "plot_figures", "train", "tune_fusion", "SourceIndexResult", "UpdateResult", "update_index", "verify_tree",
]
