"""A run as a sentence-transformers folder, checked to give the run's own vectors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import numpy as np

from structret.contracts import HasTextPrefixes
from structret.exporting.card import model_card
from structret.exporting.checks import SAMPLE_DOCUMENTS, SAMPLE_QUERIES, FP32_COSINE, cosines
from structret.exporting.errors import ExportError

USAGE = """\
```python
from sentence_transformers import SentenceTransformer

model = SentenceTransformer("{out}")
queries = model.encode_query(["read a config file"])
documents = model.encode_document(["def read_config(path): ..."])
scores = model.similarity(queries, documents)
```
"""


def write_sentence_transformers(model: Any, run: Path, out: Path, *, shown: Path | None = None,
                                echo: Callable[[str], None] = print) -> None:
    """The folder in ``out``, checked; ``shown``: where it will be (the model card names it)."""
    b = model.backbone
    out.mkdir(parents=True, exist_ok=True)
    # the backbone writes the weights, tokenizer, modules.json, pooling and max_seq_length itself
    b.save_pretrained(out)
    (out / "lm_head.safetensors").unlink(missing_ok=True)  # a training head: no part of the encoder
    config = {"prompts": {k: v for k, v in ((b.text_prefixes if isinstance(b, HasTextPrefixes) else None) or {}).items() if v},
              "default_prompt_name": None,
              "similarity_fn_name": "cosine" if b.normalize else "dot"}
    (out / "config_sentence_transformers.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    q, d = check_sentence_transformers(model, out)
    checks = [f"sentence-transformers {_version()} loads this folder; cosine to structret's own vectors on "
              f"{len(SAMPLE_QUERIES)} queries and {len(SAMPLE_DOCUMENTS)} documents: min {min(q.min(), d.min()):.6f}"]
    for line in checks:
        echo(line)
    (out / "README.md").write_text(model_card(model, run, fmt="sentence-transformers",
                                              usage=USAGE.format(out=shown or out), checks=checks),
                                     encoding="utf-8")


def check_sentence_transformers(model: Any, out: Path) -> tuple[np.ndarray, np.ndarray]:
    """Cosines between SentenceTransformer(out) and ``model`` on sample texts; ExportError below FP32_COSINE."""
    # sentence_transformers: the export extra, loaded to check the folder only
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(out), device="cpu")
    q = cosines(st.encode_query(SAMPLE_QUERIES, convert_to_numpy=True), model.encode_query(SAMPLE_QUERIES))
    d = cosines(st.encode_document(SAMPLE_DOCUMENTS, convert_to_numpy=True), model.encode_document(SAMPLE_DOCUMENTS))
    worst = min(q.min(), d.min())
    if worst < FP32_COSINE:
        raise ExportError(f"SentenceTransformer loads the exported folder but gives vectors that differ from the "
                          f"run's (cosine {worst:.6f} < {FP32_COSINE}), so nothing was written. Report this with "
                          f"the run's backbone.")
    return q, d


def _version() -> str:
    import sentence_transformers  # sentence_transformers: the export extra, loaded for its version only

    return sentence_transformers.__version__
