"""``static``: a token table, no transformer. A text's vector is the mean of its tokens' rows.

The model folder is model2vec's layout, which semble's potion models and model2vec's ``distill``
write and sentence-transformers' ``StaticEmbedding`` reads: ``tokenizer.json`` (a Hugging Face
``tokenizers`` file), ``model.safetensors`` holding ``embeddings`` ``[vocab, dim]`` (and, from newer
model2vec, ``weights`` ``[rows]`` per-token scales and ``mapping`` token id -> row), ``config.json``
(``normalize``). Encoding needs numpy, tokenizers and safetensors only: no torch import, no
forward pass, so a project of thousands of units encodes in well under a second.

The same object trains (``structret train --backbone static --model FOLDER``): the trainer's
members (``tokenize``, ``embed``, ``training_module``, ...) import torch on first use and train
the table as an ``nn.Embedding``; ``save_pretrained`` writes the folder again. ``distill`` makes
a table from a transformer backbone (each vocabulary token's vector, PCA, frequency weights).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from structret.errors import ModelLoadError
from structret.plugin import resolve_options
from structret_backbones import options as opts

log = logging.getLogger("structret.backbones")

TOKENIZER_FILE, WEIGHTS_FILE, CONFIG_FILE = "tokenizer.json", "model.safetensors", "config.json"
# Characters kept per token of max_length before tokenizing: tokenizing a 2 MB minified line to
# keep its first 512 tokens would cost more than the whole rest of a project. Code averages
# 3-4 characters per WordPiece token; 8 leaves room for long identifiers.
CHARS_PER_TOKEN = 8
# Texts summed at once: table rows of one chunk are [tokens, dim] in memory (256 texts x 512
# tokens x 256 dims x 4 bytes = 128 MB at worst).
CHUNK = 256


class StaticEncoder:
    """A static embedding model (model2vec layout) as a Backbone, trainable by structret's trainer.

    ``encode`` tokenizes without special tokens, drops the unknown token, keeps the first
    ``max_length`` tokens and averages their rows (a text with none gets the zero vector), then
    scales to unit length when ``normalize``. Training updates the rows; vectors read the
    current rows, so a trained table encodes what it learned without saving first.
    """

    plugin_name = "static"
    pooling = "mean"
    lm_model = None

    def __init__(self, model: str | os.PathLike | None = None, options: opts.Static | None = None, **given: Any):
        options = resolve_options(opts.Static, options, given, what=f"backbone '{self.plugin_name}'")
        folder = model_folder(model)
        self.source = str(folder)
        self.name = os.fspath(model) if model is not None else str(folder)
        self.tokenizer, table, config = read_folder(folder)
        self.config = config
        self.normalize = bool(config.get("normalize", True)) if options.normalize is None else options.normalize
        self.max_length = options.max_length
        self.dim = int(table.shape[1])
        self.capabilities = frozenset({"encoder"})
        self._numpy = table
        self._module: Any = None  # the torch table, made when training first asks for it
        self.device_name = options.device
        self._device: Any = None
        unk = _unknown_token(self.tokenizer)
        self.tokenize = StaticTokenize(self, options.query_prefix, options.document_prefix, unk)

    # --- encoding (numpy) ---------------------------------------------------------------------

    @property
    def table(self) -> np.ndarray:
        """The current rows ``[vocab, dim]`` (float32): the trained ones once training has begun."""
        if self._module is None:
            return self._numpy
        return self._module.weight.detach().float().cpu().numpy()

    def encode(self, texts: Sequence[str], *, kind: str = "document", batch_size: int = 32,
               show_progress: bool = False) -> np.ndarray:
        """float32 ``[len(texts), dim]``, row i for texts[i]; ``batch_size`` is not needed by a table."""
        texts = list(texts)
        table = self.table
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        bar = _progress(len(texts), show_progress)
        for start in range(0, len(texts), CHUNK):
            ids = self.tokenize.ids(texts[start:start + CHUNK], kind=kind)
            lengths = np.fromiter((len(row) for row in ids), dtype=np.int64, count=len(ids))
            filled = np.flatnonzero(lengths)
            if len(filled):
                flat = np.fromiter((i for row in ids for i in row), dtype=np.int64, count=int(lengths.sum()))
                offsets = np.concatenate(([0], np.cumsum(lengths[filled])[:-1]))
                sums = np.add.reduceat(table[flat], offsets, axis=0)
                out[start + filled] = sums / lengths[filled, None]
            if bar is not None:
                bar.update(len(ids))
        if bar is not None:
            bar.close()
        if self.normalize:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            np.divide(out, norms, out=out, where=norms > 0)
        return out

    def fingerprint(self) -> str:
        """SHA-256 of the rows (as they are now), the tokenizer and the settings encode uses."""
        digest = hashlib.sha256()
        settings = {"class": type(self).__qualname__, "dim": self.dim, "normalize": self.normalize,
                    "max_length": self.max_length, "prefixes": self.tokenize.prefixes, "chars": CHARS_PER_TOKEN}
        digest.update(json.dumps(settings, sort_keys=True).encode())
        spec = json.loads(self.tokenizer.to_str())
        spec.pop("truncation", None), spec.pop("padding", None)
        digest.update(json.dumps(spec, sort_keys=True).encode())
        digest.update(np.ascontiguousarray(self.table, dtype=np.float32).tobytes())
        return digest.hexdigest()

    def settings(self) -> str:
        return f"static table {self.table.shape[0]}x{self.dim}, max_length={self.max_length}"

    @property
    def text_prefixes(self) -> dict[str, str]:
        return dict(self.tokenize.prefixes)

    # --- training (torch, imported on first use) ------------------------------------------------

    @property
    def device(self) -> Any:
        if self._device is None:
            import torch

            auto = "cuda" if torch.cuda.is_available() else "cpu"
            self._device = torch.device(auto if self.device_name == "auto" else self.device_name)
        return self._device

    @device.setter
    def device(self, value: Any) -> None:
        self._device = value
        if self._module is not None:
            self._module.to(value)

    @property
    def training_module(self) -> Any:
        """The table as ``torch.nn.Embedding`` (every trained parameter); made once, on this device."""
        if self._module is None:
            import torch

            rows = torch.from_numpy(self._numpy.copy())
            self._module = torch.nn.Embedding(rows.shape[0], rows.shape[1], _weight=rows)  # trainable: requires grad
            self._module.to(self.device)
        return self._module

    def embed(self, batch: Any, *, kind: str = "document") -> Any:
        """Vectors with gradients for a batch of ``tokenize``: the mean of the rows under the mask."""
        import torch.nn.functional as F

        module = self.training_module
        ids, mask = batch["input_ids"], batch["attention_mask"]
        rows = module(ids.to(module.weight.device))
        mask = mask.to(rows.device, rows.dtype).unsqueeze(-1)
        vectors = (rows * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return F.normalize(vectors, dim=-1) if self.normalize else vectors

    def train_forward(self, batch: Any, labels: Any = None) -> tuple[Any, Any]:
        if labels is not None:
            raise ModelLoadError("the static backbone predicts no tokens: it trains with contrastive objectives "
                                 "(sda) only, not masked or span objectives.")
        return self.embed(batch), None

    def save_pretrained(self, directory: str | os.PathLike) -> None:
        """The model2vec folder: tokenizer.json, model.safetensors (embeddings, float32), config.json."""
        write_folder(Path(directory), self.tokenizer, self.table,
                     {**self.config, "normalize": self.normalize, "hidden_dim": self.dim})


class StaticTokenize:
    """The static backbone's tokenization: prefixes, no special tokens, no unknown token, cut at max_length."""

    def __init__(self, backbone: StaticEncoder, query_prefix: str, document_prefix: str, unk: int | None):
        self.backbone = backbone
        self.prefixes = {"query": query_prefix, "document": document_prefix}
        self.unk = unk

    def ids(self, texts: Sequence[str], *, kind: str = "document", max_length: int | None = None) -> list[list[int]]:
        if kind not in self.prefixes:
            raise ModelLoadError(f"kind={kind!r} is not supported; use 'query' or 'document'.")
        limit = max_length or self.backbone.max_length
        cut, prefix = limit * CHARS_PER_TOKEN, self.prefixes[kind]
        encoded = self.backbone.tokenizer.encode_batch_fast([prefix + t[:cut] for t in texts],
                                                            add_special_tokens=False)
        unk = self.unk
        return [[i for i in e.ids if i != unk][:limit] for e in encoded]

    def __call__(self, texts: Sequence[str], *, kind: str = "document", max_length: int | None = None) -> dict:
        import torch

        ids = self.ids(texts, kind=kind, max_length=max_length)
        width = max([len(row) for row in ids] + [1])
        input_ids = torch.zeros((len(ids), width), dtype=torch.long)
        mask = torch.zeros((len(ids), width), dtype=torch.long)
        for i, row in enumerate(ids):
            input_ids[i, :len(row)] = torch.tensor(row, dtype=torch.long)
            mask[i, :len(row)] = 1
        return {"input_ids": input_ids, "attention_mask": mask}


# --- the folder ---------------------------------------------------------------------------------


def model_folder(model: str | os.PathLike | None) -> Path:
    """The local folder of a static model: ``model`` itself, or a hub id's snapshot in the cache."""
    if model is None or str(model).strip() == "":
        raise ModelLoadError("the static backbone needs a model folder (model2vec layout: tokenizer.json, "
                             "model.safetensors, config.json): --model PATH, or make one from a transformer "
                             "with 'structret distill --model minilm OUT'.")
    path = Path(model).expanduser()
    if path.is_dir():
        missing = [f for f in (TOKENIZER_FILE, WEIGHTS_FILE) if not (path / f).is_file()]
        if missing:
            raise ModelLoadError(f"{path} has no {' or '.join(missing)}, so it is not a static model folder "
                                 f"(model2vec layout: tokenizer.json, model.safetensors, config.json).")
        return path.resolve()
    if path.exists() or str(model).startswith((".", "/", "~")):
        raise ModelLoadError(f"{path}: no such model folder. Give the folder that holds tokenizer.json and "
                             f"model.safetensors.")
    try:
        from huggingface_hub import snapshot_download

        offline = any((os.environ.get(v) or "").lower() in {"1", "true", "yes", "on"}
                      for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
        return Path(snapshot_download(str(model), allow_patterns=[TOKENIZER_FILE, WEIGHTS_FILE, CONFIG_FILE],
                                      local_files_only=offline))
    except Exception as exc:  # the hub's own errors name neither the backbone nor what to do
        raise ModelLoadError(f"static model {model!r} is neither a local folder nor reachable on the Hugging Face "
                             f"hub ({type(exc).__name__}). Give --model PATH of a model2vec folder.") from None


def read_folder(folder: Path) -> tuple[Any, np.ndarray, dict]:
    """``(tokenizer, rows [vocab, dim] float32, config)`` of a model2vec folder, with clear errors."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
    except Exception as exc:
        raise ModelLoadError(f"{folder / TOKENIZER_FILE} cannot be read as a tokenizers file: {exc}") from None
    tokenizer.no_truncation()
    tokenizer.no_padding()
    try:
        tensors = load_file(str(folder / WEIGHTS_FILE))
    except (SafetensorError, OSError, ValueError) as exc:
        raise ModelLoadError(f"{folder / WEIGHTS_FILE} cannot be read as safetensors: {exc}") from None
    if "embeddings" not in tensors or tensors["embeddings"].ndim != 2:
        raise ModelLoadError(f"{folder / WEIGHTS_FILE} holds {sorted(tensors)}, not a 2-d 'embeddings' table "
                             f"(model2vec layout).")
    table = tensors["embeddings"].astype(np.float32)
    if "weights" in tensors:  # newer model2vec: a scale per row, applied here once
        table = table * tensors["weights"].astype(np.float32)[:, None]
    if "mapping" in tensors:  # newer model2vec: several tokens share a row
        table = table[tensors["mapping"].astype(np.int64)]
    vocab = tokenizer.get_vocab_size()
    if table.shape[0] < vocab:
        raise ModelLoadError(f"{folder}: the table has {table.shape[0]} rows but the tokenizer {vocab} tokens; the "
                             f"two files are from different models.")
    config: dict = {}
    if (folder / CONFIG_FILE).is_file():
        try:
            config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ModelLoadError(f"{folder / CONFIG_FILE} is not JSON: {exc}") from None
    return tokenizer, np.ascontiguousarray(table), config if isinstance(config, dict) else {}


def write_folder(directory: Path, tokenizer: Any, table: np.ndarray, config: dict) -> None:
    """Write a model2vec folder (what ``read_folder``, model2vec and sentence-transformers read)."""
    from safetensors.numpy import save_file

    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / TOKENIZER_FILE))
    save_file({"embeddings": np.ascontiguousarray(table, dtype=np.float32)}, str(directory / WEIGHTS_FILE))
    config = {"model_type": "model2vec", "architectures": ["StaticModel"], **config}
    (directory / CONFIG_FILE).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _unknown_token(tokenizer: Any) -> int | None:
    """The id of the tokenizer's unknown token (a row that says nothing about a text), if any."""
    spec = json.loads(tokenizer.to_str()).get("model", {})
    unk = spec.get("unk_token")
    if isinstance(unk, str):
        return tokenizer.token_to_id(unk)
    if isinstance(spec.get("unk_id"), int):  # Unigram
        return int(spec["unk_id"])
    return None


def _progress(total: int, show: bool) -> Any:
    if not show or total < CHUNK:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="encoding", unit="text")


# --- distillation -------------------------------------------------------------------------------


def distill(backbone: Any, out: str | os.PathLike, *, dims: int | None = 256,
            corpus: Iterable[str] | None = None, sif: float = 1e-3, batch_size: int = 512) -> dict[str, Any]:
    """Write a static model made from the transformer ``backbone`` to ``out``; return what was done.

    Each vocabulary token alone between the model's special tokens goes through the transformer
    and is pooled as the backbone pools; the rows are reduced to ``dims`` by PCA (None: kept) and
    scaled by a SIF weight ``sif / (sif + p(token))``, frequent tokens (``self``, ``(``, ``the``)
    counting less. ``p`` is counted on ``corpus`` (texts, e.g. the training documents) where given,
    else taken from the token's rank in the vocabulary (Zipf), which is all a tokenizer says.
    """
    import torch

    hf = backbone.tokenizer
    vocab = hf.backend_tokenizer.get_vocab_size() if hasattr(hf, "backend_tokenizer") else len(hf)
    start = [hf.cls_token_id] if hf.cls_token_id is not None else ([hf.bos_token_id] if hf.bos_token_id is not None else [])
    end = [hf.sep_token_id] if hf.sep_token_id is not None else ([hf.eos_token_id] if hf.eos_token_id is not None else [])
    module = backbone.training_module if hasattr(backbone, "training_module") else backbone.model
    module.eval()
    rows = []
    with torch.inference_mode():
        for first in range(0, vocab, batch_size):
            ids = torch.tensor([start + [i] + end for i in range(first, min(vocab, first + batch_size))])
            batch = {"input_ids": ids.to(backbone.device), "attention_mask": torch.ones_like(ids).to(backbone.device)}
            if "token_type_ids" in getattr(backbone, "_inputs", ()):
                batch["token_type_ids"] = torch.zeros_like(ids).to(backbone.device)
            rows.append(backbone.embed(batch, kind="document").float().cpu().numpy())
    table = np.concatenate(rows).astype(np.float64)
    explained = 1.0
    if dims is not None and dims < table.shape[1]:
        centred = table - table.mean(0)
        _, singular, components = np.linalg.svd(centred, full_matrices=False)
        table = centred @ components[:dims].T
        explained = float((singular[:dims] ** 2).sum() / (singular ** 2).sum())
    backend = hf.backend_tokenizer
    counts = np.zeros(vocab, dtype=np.float64)
    counted = 0
    if corpus is not None:
        for chunk in _chunks(corpus, 1024):
            for encoding in backend.encode_batch_fast(chunk, add_special_tokens=False):
                np.add.at(counts, np.asarray(encoding.ids, dtype=np.int64), 1)
            counted += len(chunk)
    if counted:
        p = (counts + 1.0) / (counts.sum() + vocab)  # add-one: a token never seen is rare, not impossible
    else:
        p = 1.0 / np.arange(2, vocab + 2, dtype=np.float64)
        p /= p.sum()
    table *= (sif / (sif + p))[:, None]
    import copy

    tokenizer = copy.deepcopy(backend)
    tokenizer.no_truncation()
    tokenizer.no_padding()
    write_folder(Path(out), tokenizer, table.astype(np.float32),
                 {"normalize": True, "hidden_dim": int(table.shape[1]), "structret": {
                     "distilled_from": getattr(backbone, "name", ""), "pca_dims": dims, "sif": sif,
                     "frequencies": f"{counted} texts" if counted else "vocabulary rank (Zipf)"}})
    return {"tokens": vocab, "dim": int(table.shape[1]), "explained_variance": round(explained, 4),
            "frequency_texts": counted}


def _chunks(items: Iterable[str], size: int) -> Iterable[list[str]]:
    chunk: list[str] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
