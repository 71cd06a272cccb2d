"""What every Hugging Face backbone shares: loading with errors a user can act on, and the encode loop.

Loading is local first: a model already in the Hugging Face cache (or a local directory)
never touches the network, so a cached model works on a machine without internet and
nothing is re-downloaded behind the user's back. Only when the files are missing do we
ask the hub, and if that fails the error says where we looked and how to get the files.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from structret.plugin import precision
from structret.plugin import PAD_TO, WINDOW, budget, token_batches
from structret.errors import ModelLoadError, StructretError
from structret_backbones.options import Encoder

# texts tokenized at once when encoding: enough to sort well, small enough to hold
_WINDOW = WINDOW  # module-level so tests can shrink it

# "name" or "org/name", as the hub spells repository ids
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")

# "auto" (the default) means the precision that measured fastest on this model and CPU, its
# vectors within cosine 0.999 of fp32's (structret.precision: a flag saying bf16 exists is not
# enough; without it bf16 is emulated and ~18x slower, docs/performance.md). "bf16" is autocast,
# "bf16-weights" encodes with a bfloat16 copy of the weights (training keeps the fp32 ones).
DTYPES = {None: None, "auto": None, "fp32": None, "float32": None, "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
          "bf16-weights": None}
CPU_BF16_ENV = precision.CPU_BF16_ENV


def model_shape(config: Any) -> str:
    """What a precision timing depends on in a model: its architecture and sizes, not its weights."""
    sizes = ("hidden_size", "d_model", "num_hidden_layers", "num_layers", "num_attention_heads", "num_heads",
             "intermediate_size", "d_ff")
    found = [f"{name}={getattr(config, name)}" for name in sizes if isinstance(getattr(config, name, None), int)]
    return f"{getattr(config, 'model_type', '?')} {' '.join(found)}"


class BackboneOptionError(StructretError, ValueError):
    """An option given to a backbone has a value it cannot use."""


def _offline() -> bool:
    # read the environment now, not at import: huggingface_hub caches it at import time
    flags = (os.environ.get("HF_HUB_OFFLINE"), os.environ.get("TRANSFORMERS_OFFLINE"))
    return any((v or "").strip().lower() in {"1", "true", "yes", "on"} for v in flags)


def _cache_dir() -> str:
    hub_cache = os.environ.get("HF_HUB_CACHE")
    if hub_cache:
        return f"HF_HUB_CACHE={hub_cache}"
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return f"{os.path.join(home, 'hub')} (HF_HOME={home})"


def resolve_source(model: str | os.PathLike | None, backbone: str) -> tuple[str, bool]:
    """``(source, is_local)``: an absolute directory, or a hub id to look up in the cache."""
    if model is None or str(model).strip() == "":
        raise ModelLoadError(
            f"the {backbone} backbone needs a model: pass a Hugging Face id or a local "
            f"directory with --model ID_OR_PATH (in Python: model='...')."
        )
    text = os.fspath(model)
    path = Path(text).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelLoadError(
                f"{path} has no config.json, so it is not a saved Hugging Face model. Pass the "
                f"directory written by save_pretrained (it holds config.json, model.safetensors "
                f"and the tokenizer files)."
            )
        return str(path.resolve()), True
    if path.exists():
        raise ModelLoadError(
            f"{path} is a file; --model wants the directory that holds config.json and "
            f"model.safetensors (for {path.name}: --model {path.parent})."
        )
    if text.startswith((".", "~", "/")) or "\\" in text or not _HUB_ID.match(text):
        raise ModelLoadError(f"model directory {path.resolve()} does not exist. Check the path given to --model.")
    return text, False


def _cause_names(exc: BaseException | None) -> set[str]:
    names, seen = set(), set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        names.add(type(exc).__name__)
        exc = exc.__cause__ or exc.__context__
    return names


def _load_error(source: str, what: str, exc: BaseException, *, is_local: bool, tried_hub: bool) -> ModelLoadError:
    """Say what failed and what to do, from the exception transformers raised."""
    names, first_line = _cause_names(exc), (str(exc).splitlines() or [""])[0]
    if "trust_remote_code" in str(exc):
        return ModelLoadError(
            f"{source} ships its own Python code. structret does not run it unless asked: "
            f"if you trust its authors, pass --backbone-option trust_remote_code=true to 'structret train' "
            f"(trust_remote_code=True in Python)."
        )
    if what == "weights" and "safetensors" in str(exc):
        return ModelLoadError(
            f"{source} has no model.safetensors. structret loads safetensors weights only, "
            f"never pickled .bin files; convert the checkpoint (load it with transformers and "
            f"save_pretrained it) and pass that directory with --model."
        )
    if is_local:
        return ModelLoadError(f"could not load the {what} from {source}: {first_line}")
    if "GatedRepoError" in names:
        return ModelLoadError(
            f"'{source}' is gated on the Hugging Face hub: accept its license on "
            f"https://huggingface.co/{source}, then log in with `hf auth login`."
        )
    if "RepositoryNotFoundError" in names:
        return ModelLoadError(
            f"there is no model '{source}' on the Hugging Face hub (or it is private: log in "
            f"with `hf auth login`). Check the spelling, or pass a local directory with --model /path/to/dir."
        )
    if tried_hub:
        hub = f"the Hugging Face hub could not be reached ({first_line})"
    else:
        hub = "the hub was not asked because offline mode is on (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE)"
    return ModelLoadError(
        f"could not load model '{source}' ({what}): it is not in the local Hugging Face cache "
        f"({_cache_dir()}) and {hub}. To fix: on a machine with network run `hf download {source}` "
        f"and copy its Hugging Face cache directory here (or point HF_HOME at a copy), or pass a "
        f"local directory with --model /path/to/dir."
    )


def from_pretrained(
    loader: Any, source: str, is_local: bool, what: str, **kwargs: Any
) -> Any:
    """Call ``loader.from_pretrained`` cache-first, turning every failure into a ModelLoadError."""
    try:
        return loader.from_pretrained(source, local_files_only=True, **kwargs)
    except (OSError, ValueError) as exc:
        if is_local or _offline() or "trust_remote_code" in str(exc):
            raise _load_error(source, what, exc, is_local=is_local, tried_hub=False) from exc
    try:
        return loader.from_pretrained(source, **kwargs)
    except (OSError, ValueError) as exc:
        raise _load_error(source, what, exc, is_local=False, tried_hub=True) from exc


def load_model_and_tokenizer(
    model: str | os.PathLike | None,
    *,
    backbone: str,
    trust_remote_code: bool = False,
    check_config: Callable[[Any, str], None] | None = None,
) -> tuple[Any, Any, str]:
    """``(model, tokenizer, name)``; ``name`` is the hub id or the absolute directory."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    source, is_local = resolve_source(model, backbone)
    remote = {"trust_remote_code": trust_remote_code}
    config = from_pretrained(AutoConfig, source, is_local, "config", **remote)
    if check_config is not None:
        check_config(config, source)
    tokenizer = from_pretrained(AutoTokenizer, source, is_local, "tokenizer", **remote)
    # transformers 5 quietly builds an empty-vocabulary tokenizer when the files are missing
    if len(tokenizer.get_vocab()) <= len(set(tokenizer.all_special_tokens)):
        raise ModelLoadError(
            f"{source} has no tokenizer files (tokenizer.json, vocab.txt, spiece.model ...). "
            f"Save the tokenizer next to the model (tokenizer.save_pretrained(dir))."
        )
    net = from_pretrained(AutoModel, source, is_local, "weights", config=config, use_safetensors=True, **remote)
    return net.eval(), tokenizer, source


def usable_max_length(max_length: int, tokenizer: Any, source: str) -> int:
    """``max_length`` capped at what the model's position embeddings allow."""
    if max_length < 1:
        raise BackboneOptionError(f"max_length must be at least 1, got {max_length}.")
    limit = getattr(tokenizer, "model_max_length", None)
    # tokenizers without a known limit report a huge sentinel (about 1e30)
    if isinstance(limit, int) and 0 < limit < 1_000_000 and max_length > limit:
        warnings.warn(f"max_length={max_length} is more than {source} supports; using {limit}.", stacklevel=3)
        return limit
    return max_length


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Average of the token vectors, padding excluded (in fp32 even under bf16 autocast)."""
    mask = attention_mask.unsqueeze(-1).to(torch.float32)
    summed = (hidden.to(torch.float32) * mask).sum(dim=1)
    return summed / mask.sum(dim=1).clamp(min=1e-9)


class LengthChunks:
    """A padded training batch cut into chunks of rows of like length, each trimmed to its own
    longest row: a forward of each chunk costs what its real tokens cost, not the batch's longest
    text (on code, about half of a batch's padded tokens are padding). ``restore`` puts per-row
    results back in the batch's order, so the loss sees the whole batch as one.

    Right padding only (every tensor of the batch shaped [rows, length, ...] is cut at the chunk's
    length); ``of`` gives None for a batch it would not change."""

    def __init__(self, batch: Any, chunks: list[tuple[torch.Tensor, int]]):
        rows, width = batch["attention_mask"].shape
        self.batches = [{key: _rows(value, picked, length, rows, width) for key, value in batch.items()}
                        for picked, length in chunks]
        self._order = torch.cat([picked for picked, _ in chunks]).argsort()

    @classmethod
    def of(cls, batch: Any, tokens: int) -> "LengthChunks | None":
        mask = batch.get("attention_mask") if tokens else None
        if mask is None or mask.dim() != 2 or mask.shape[0] < 2 or bool(mask[:, 0].eq(0).any()):
            return None  # nothing to cut, or padded on the left
        lengths = mask.sum(dim=1)
        order = torch.argsort(lengths, descending=True, stable=True)
        longest = lengths[order].tolist()
        chunks = [(order[first:last], min(mask.shape[1], -(-max(longest[first], 1) // PAD_TO) * PAD_TO))
                  for first, last in token_batches(longest, tokens)]
        if len(chunks) == 1:
            return None  # one chunk is the batch itself, already padded to its longest row
        return cls(batch, chunks)

    def restore(self, parts: Sequence[torch.Tensor]) -> torch.Tensor:
        """The chunks' per-row results (in chunk order) as rows of the whole batch, in its order."""
        return torch.cat(list(parts))[self._order.to(parts[0].device)]


def _rows(value: Any, picked: torch.Tensor, length: int, rows: int, width: int) -> Any:
    if not isinstance(value, torch.Tensor) or value.dim() == 0 or value.shape[0] != rows:
        return value
    value = value[picked.to(value.device)]
    return value[:, :length] if value.dim() >= 2 and value.shape[1] == width else value


class PrefixedTokenizer:
    """Prefixes per kind, truncation and padding, shared by every backbone here.

    ``tokenizer(texts, kind=...)`` gives a padded tensor batch for ``embed`` (training
    uses this); ``ids`` and ``pad`` are its two halves, which ``encode`` calls apart.
    """

    def __init__(self, tokenizer: Any, max_length: int, query_prefix: str, document_prefix: str):
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.prefixes = {"query": query_prefix, "document": document_prefix}

    def ids(self, texts: Sequence[str], *, kind: str = "document",
            max_length: int | None = None) -> dict[str, list[list[int]]]:
        """Token ids (and masks) per text, truncated (at ``max_length`` when given), not padded."""
        if kind not in self.prefixes:
            raise BackboneOptionError(f"kind={kind!r} is not supported; use 'query' or 'document'.")
        prefix = self.prefixes[kind]
        encoded = self.tokenizer([prefix + text for text in texts], truncation=True,
                                 max_length=max_length or self.max_length)
        return dict(encoded)

    def pad(self, features: dict[str, list[list[int]]]) -> Any:
        return self.tokenizer.pad(features, padding=True, pad_to_multiple_of=PAD_TO, return_tensors="pt")

    def __call__(self, texts: Sequence[str], *, kind: str = "document", max_length: int | None = None) -> Any:
        return self.pad(self.ids(texts, kind=kind, max_length=max_length))


def autocast(dtype: str | None, device: torch.device) -> contextlib.AbstractContextManager:
    cast = DTYPES[dtype]
    if cast is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=cast)


def encode_texts(
    texts: Sequence[str],
    *,
    tokenizer: PrefixedTokenizer,
    kind: str,
    embed: Callable[..., torch.Tensor],
    dim: int,
    batch_size: int,
    device: torch.device,
    dtype: str | None,
    show_progress: bool,
) -> np.ndarray:
    """Encode in batches of similar length and return rows in the input order.

    Padding is most of the waste on CPU. Texts are ordered by character length (free),
    then tokenized a window at a time and re-sorted by token count inside the window:
    on real code that cuts padding from ~27% to ~8% of the tokens, and each text is
    still tokenized only once, with memory bounded by the window. Longest first, so
    running out of memory happens at once rather than at the end. ``batch_size`` counts
    texts of the longest length (``max_length``): a batch holds up to ``batch_size *
    max_length`` tokens (on CPU at most ``CPU_TOKENS``), so shorter texts go more to a batch
    (structret.batching).
    """
    if isinstance(texts, str):
        raise BackboneOptionError("encode() takes a list of texts, not a single string: use encode([text]).")
    if batch_size < 1:
        raise BackboneOptionError(f"batch_size must be at least 1, got {batch_size}.")
    if kind not in tokenizer.prefixes:
        raise BackboneOptionError(f"kind={kind!r} is not supported; use 'query' or 'document'.")
    texts = list(texts)
    out = np.empty((len(texts), dim), dtype=np.float32)
    by_chars = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    window = max(_WINDOW, batch_size)
    with (
        torch.inference_mode(),
        autocast(dtype, device),
        tqdm(total=len(texts), desc="encoding queries" if kind == "query" else "encoding documents", unit="text", disable=not show_progress) as bar,
    ):
        for start in range(0, len(texts), window):
            rows = by_chars[start : start + window]
            features = tokenizer.ids([texts[i] for i in rows], kind=kind)
            by_tokens = sorted(range(len(rows)), key=lambda j: -len(features["input_ids"][j]))
            lengths = [len(features["input_ids"][j]) for j in by_tokens]
            for first, last in token_batches(lengths, budget(batch_size, tokenizer.max_length, device.type)):
                batch = by_tokens[first:last]
                padded = tokenizer.pad({key: [values[j] for j in batch] for key, values in features.items()})
                out[[rows[j] for j in batch]] = embed(padded.to(device), kind=kind).float().cpu().numpy()
                bar.update(len(batch))
    return out



class TransformerBackbone:
    """What every Hugging Face backbone here shares: loading with good errors, prefixes and
    truncation, optional normalisation, and the batched ``encode`` loop. Subclasses load
    through ``super().__init__`` and implement ``embed(batch)``."""

    plugin_name = ""
    dim: int  # set by each subclass from its loaded model

    def __init__(self, model: str | os.PathLike | None, options: Encoder, *, check_config: Callable[[Any, str], None]):
        """``options``: what every transformer backbone takes (structret_backbones.options.Encoder), validated."""
        self.model, self.tokenizer, self.name = load_model_and_tokenizer(
            model, backbone=self.plugin_name, trust_remote_code=options.trust_remote_code, check_config=check_config
        )
        # where the weights came from: factories may rename .name (minilm records the hub id),
        # but a head for training must be loaded from the same files
        self.source = self.name
        self.trust_remote_code = options.trust_remote_code
        self.device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if options.device == "auto"
                                   else options.device)
        self.model.to(self.device)
        self.normalize = options.normalize
        # "auto" is resolved on first use (the dtype property): the probe times this very model,
        # after subclasses have added their parts (LoRA, aspect slots, informed heads)
        self._dtype: str | None = options.dtype
        self._bf16_copy: tuple[Any, torch.nn.Module] | None = None  # (weights' identity, copy): bf16-weights
        # torch.compile for encode() and training forwards: measured 1.12x on MiniLM/CPU encoding after
        # ~35 s of compiling, so it pays only on large corpora or long runs and stays opt-in
        self.compile = options.compile
        self._compiled: dict[int, Any] = {}  # per module compiled (the model, or its bf16 copy)
        self._train_compiled: tuple[torch.nn.Module, Any] | None = None  # (model, compiled) while training
        self.max_length = usable_max_length(options.max_length, self.tokenizer, self.name)
        self.tokenize = PrefixedTokenizer(self.tokenizer, self.max_length, options.query_prefix, options.document_prefix)

    # the model with a token-predicting head (seq2seq LM or masked LM) sharing ``model``'s
    # weights; made by ``enable_lm`` for corruption objectives (MEP, span masking)
    lm_model: Any = None
    # weights the model holds but embed() never reads: left out of fingerprint()
    unread_weights: tuple[str, ...] = ()

    def embed(self, batch: Any, *, kind: str = "document") -> torch.Tensor:
        raise NotImplementedError

    @property
    def dtype(self) -> str | None:
        """The precision encode() runs in: None (fp32), "bf16" (autocast) or "bf16-weights"."""
        if self._dtype == "auto":
            self._dtype = self._auto_dtype()
        return self._dtype

    @dtype.setter
    def dtype(self, value: str | None) -> None:
        self._dtype = value

    def _auto_dtype(self) -> str | None:
        if self.device.type == "cuda":
            return "bf16" if torch.cuda.is_bf16_supported() else None
        if self.device.type != "cpu":
            return None
        chosen = precision.choose(self._probe, shape=model_shape(self.model.config), source=str(self.source))
        return None if chosen == "fp32" else chosen

    def _probe(self, dtype: str) -> torch.Tensor:
        """The probe texts' vectors encoded in ``dtype``, the way encode() would."""
        with self._encoding_model(dtype):
            return torch.from_numpy(encode_texts(
                list(precision.PROBE_TEXTS), tokenizer=self.tokenize, kind="document", embed=self.embed,
                dim=self.dim, batch_size=len(precision.PROBE_TEXTS), device=self.device, dtype=dtype,
                show_progress=False))

    def bf16_weights(self) -> torch.nn.Module:
        """A bfloat16 copy of ``model`` for encoding, made again whenever the weights change
        (each optimizer step or load bumps a parameter's version; resizing replaces it)."""
        identity = (id(self.model), tuple((p.data_ptr(), p._version) for p in self.model.parameters()))
        if self._bf16_copy is None or self._bf16_copy[0] != identity:
            self._bf16_copy = None  # the old copy's memory goes before the new one is made
            self._bf16_copy = (identity, copy.deepcopy(self.model).to(torch.bfloat16).eval())
        return self._bf16_copy[1]

    @contextlib.contextmanager
    def _encoding_model(self, dtype: str | None) -> Iterator[None]:
        """``self.model`` is, while encoding, the module that encodes: the bf16 copy, compiled if asked;
        embed() reads self.model, and training and saving see the plain fp32 model again after."""
        eager = self.model
        module = self.bf16_weights() if dtype == "bf16-weights" else eager
        if self.compile:
            if id(module) not in self._compiled:
                # dynamic: batches differ in length, and a graph per length would recompile forever
                self._compiled = {id(module): torch.compile(module, dynamic=True)}
            module = self._compiled[id(module)]
        self.model = module
        try:
            yield
        finally:
            self.model = eager

    def _net(self) -> Any:
        """The module a forward calls: ``model``, or while training with compile=True its compiled twin
        (encode swaps in a module compiled for encoding: _encoding_model)."""
        if not (self.compile and self.model.training):
            return self.model
        if self._train_compiled is None or self._train_compiled[0] is not self.model:
            # dynamic: chunks differ in rows and length, and a graph per shape would recompile forever
            self._train_compiled = (self.model, torch.compile(self.model, dynamic=True))
        return self._train_compiled[1]

    def _finish(self, vectors: torch.Tensor) -> torch.Tensor:
        return F.normalize(vectors.float(), dim=-1) if self.normalize else vectors

    def fingerprint(self) -> str:
        """SHA-256 of everything that decides this backbone's vectors: its weights (read now, so
        training since the last call shows), its tokenizer and the settings encode() uses."""
        import hashlib
        import json

        import transformers

        digest = hashlib.sha256()
        tokenizer = self.tokenizer
        backend = getattr(tokenizer, "backend_tokenizer", None)
        settings = {"class": type(self).__qualname__, "dim": self.dim, "dtype": self.dtype, "normalize": self.normalize,
                    "max_length": self.max_length, "pooling": getattr(self, "pooling", None),
                    "prefixes": self.tokenize.prefixes, "informed": getattr(self, "informed", None),
                    "aspect_slots": list(getattr(self, "aspect_slots", ())), "runtime": getattr(self, "runtime", "torch"),
                    "torch": torch.__version__,
                    "transformers": transformers.__version__, "tokenizer": type(tokenizer).__name__}
        lora = getattr(self, "lora", None)
        if lora:  # only then: models without an adapter keep their fingerprints
            settings["lora"] = lora
        digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
        if backend is not None:
            # the tokenizer's own state minus its truncation and padding, which every call sets: with them,
            # the same model fingerprinted before and after its first encode (or the dtype probe) differed
            spec = json.loads(backend.to_str())
            spec.pop("truncation", None), spec.pop("padding", None)
            digest.update(json.dumps(spec, sort_keys=True).encode())
        else:
            digest.update(json.dumps(sorted(tokenizer.get_vocab().items())).encode())
        for module in (self.model, getattr(self, "aspect_fusion", None)):
            if module is None:
                continue
            for name, tensor in module.state_dict().items():
                if name.startswith(self.unread_weights):
                    continue
                digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
                digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
        return digest.hexdigest()

    def encode(self, texts: Sequence[str], *, kind: str = "document", batch_size: int = 32,
               show_progress: bool = False) -> np.ndarray:
        """float32 [len(texts), dim], row i for texts[i]."""
        self.model.eval()
        dtype = self.dtype
        with self._encoding_model(dtype):
            return encode_texts(
                texts, tokenizer=self.tokenize, kind=kind, embed=self.embed, dim=self.dim,
                batch_size=batch_size, device=self.device, dtype=dtype, show_progress=show_progress,
            )


# --- training ----------------------------------------------------------------------------
#
# Training needs two things encoding does not: a token-predicting head that shares the
# encoder's weights (so one forward of a masked passage gives both its vector and its LM
# loss), and a save that writes a normal Hugging Face checkpoint loadable by the backbone.


class TrainableMixin:
    """``enable_lm``, ``train_forward`` and ``training_module`` for TransformerBackbone
    subclasses, which supply ``_base_prefixes``, ``_attach(lm)``, ``_lm_forward`` and
    ``save_pretrained(directory)``."""

    lm_auto_class = ""  # transformers Auto class of the head model, e.g. "AutoModelForMaskedLM"
    _warned_fresh_head = False
    lm_head_is_new = False  # set by enable_lm: the head's weights were not in the checkpoint

    if TYPE_CHECKING:  # what the TransformerBackbone it is mixed into supplies
        model: Any
        lm_model: Any
        source: str
        name: str
        trust_remote_code: bool
        device: torch.device

        def embed(self, batch: Any, *, kind: str = "document") -> torch.Tensor: ...

    @property
    def training_module(self) -> torch.nn.Module:
        """The module that owns every trainable parameter (``model``, plus the LM head if enabled)."""
        return self.lm_model if self.lm_model is not None else self.model

    def enable_lm(self) -> None:
        """Load the head model around ``self.model``'s own modules (idempotent).

        The head's weights come from the checkpoint when it has them; otherwise they start
        random (warned once), which corruption objectives then train.
        """
        if self.lm_model is not None:
            return
        import transformers
        from transformers.utils import logging as hf_logging

        loader = getattr(transformers, self.lm_auto_class)
        is_local = Path(self.source).is_dir()
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # its missing-key report; ours below says what it means here
        try:
            lm, info = from_pretrained(
                loader, self.source, is_local, "token-prediction head", config=self.model.config,
                use_safetensors=True, output_loading_info=True, trust_remote_code=self.trust_remote_code,
            )
        finally:
            hf_logging.set_verbosity(verbosity)
        tied = lm.get_output_embeddings().weight is lm.get_input_embeddings().weight
        self._attach(lm)
        if tied:  # the head's matrix was the input embedding; keep it the live one
            lm.get_output_embeddings().weight = self.model.get_input_embeddings().weight
        head_file = Path(self.source) / HEAD_FILE if is_local else None
        if head_file is not None and head_file.is_file():
            load_head(lm, head_file, self._base_prefixes())
        else:
            fresh = [k for k in info.get("missing_keys", ()) if not k.startswith(self._base_prefixes())]
            self.lm_head_is_new = bool(fresh)
            if fresh and not type(self)._warned_fresh_head:
                type(self)._warned_fresh_head = True
                warnings.warn(
                    f"{self.name} has no weights for its {self.lm_auto_class[len('AutoModelFor'):]} head "
                    f"({len(fresh)} tensors, e.g. {fresh[0]}); they start random (corruption objectives' "
                    f"lm_warmup = auto trains them alone first).",
                    stacklevel=2,
                )
        self.lm_model = lm.to(self.device)

    def lm_head_parameters(self) -> list[torch.nn.Parameter]:
        """The LM head's own parameters, after ``enable_lm``: those of the head model outside
        this backbone's base model, so not a tied output matrix (it is the input embedding)."""
        if self.lm_model is None:
            raise RuntimeError(f"{self.name}: enable_lm() first; there is no LM head yet")
        return [p for name, p in self.lm_model.named_parameters() if not name.startswith(self._base_prefixes())]

    def train_forward(self, batch: Any, labels: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(vectors, lm_loss)`` from ONE forward of ``batch``; ``lm_loss`` is None without labels.

        The vectors are exactly what ``embed`` gives for the same input, so a corrupted
        passage is encoded once for both the contrastive and the LM objective.
        """
        if labels is None:
            return self.embed(batch), None
        self.enable_lm()
        return self._lm_forward(batch, labels)

    def _base_prefixes(self) -> tuple[str, ...]:
        raise NotImplementedError

    def _attach(self, lm: Any) -> None:
        raise NotImplementedError

    def _lm_forward(self, batch: Any, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError


# head weights the base checkpoint cannot hold (masked-LM heads of encoder-only models)
HEAD_FILE = "lm_head.safetensors"


def _head_tensors(lm: torch.nn.Module, base_prefixes: tuple[str, ...]) -> dict[str, torch.Tensor]:
    # named_parameters keeps the first name of a tied tensor and base names come first, so
    # a decoder tied to the word embeddings belongs to the base and is not listed here
    named = list(lm.named_parameters()) + list(lm.named_buffers())
    return {name: t for name, t in named if not name.startswith(base_prefixes)}


def save_head(lm: torch.nn.Module, path: Path, base_prefixes: tuple[str, ...]) -> None:
    """The parameters (and buffers) of ``lm`` outside its base model, as safetensors."""
    from safetensors.torch import save_file

    save_file({n: t.detach().contiguous().cpu() for n, t in _head_tensors(lm, base_prefixes).items()}, str(path))


def load_head(lm: torch.nn.Module, path: Path, base_prefixes: tuple[str, ...]) -> None:
    from safetensors.torch import load_file

    saved = load_file(str(path))
    expected = _head_tensors(lm, base_prefixes)
    missing, unexpected = sorted(expected.keys() - saved.keys()), sorted(saved.keys() - expected.keys())
    if missing or unexpected:
        raise ModelLoadError(
            f"{path} does not fit this model's head (missing {missing[:3]}, unexpected {unexpected[:3]}); "
            f"it was saved for another architecture. Delete it to start the head afresh."
        )
    with torch.no_grad():
        for name, tensor in expected.items():
            tensor.copy_(saved[name])  # in place, so tied tensors stay tied
