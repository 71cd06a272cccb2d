"""Models by name: a registered backbone, a run of ``structret train``, or a hub id / model folder."""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Iterable, NamedTuple, Sequence

from structret import defaults
from structret.artifacts import CHECKSUMS_FILE, META_FILE, rebuild_hint, verify_checksums
from structret.contracts import Backbone
from structret.errors import ArtifactError, ModelLoadError, PluginError, StructretError
from structret.linearization import TextFormat
from structret.records import Query
from structret.registry import get_registry

KINDS = ("query", "document")


class Model:
    """A backbone plugin plus how it reads records (the text format a trained run used).

    ``encode_query`` / ``encode_document`` follow sentence-transformers: a list gives a
    float32 matrix ``[n, dim]``, a single string (or record) a vector ``[dim]``.
    """

    def __init__(self, backbone: Backbone, *, backbone_name: str, model: str | os.PathLike | None = None,
                 options: dict[str, Any] | None = None, text_format: Any = None, recipe: dict | None = None,
                 entities: dict[str, str] | None = None):
        self.backbone = backbone  # the plugin object
        self.backbone_name = backbone_name  # the registered name: minilm, hf-encoder, t5, ...
        # the weights given instead of the backbone's default (a path or hub id), or None; a path as text,
        # since it is written to every index's structret.json
        self.model = os.fspath(model) if model is not None else None
        self.options = dict(options or {})  # what went to the backbone factory besides model=
        self.text_format = text_format if text_format is not None else TextFormat()
        # the resolved recipe of the 'structret train' run the weights come from ({} otherwise)
        self.recipe = dict(recipe or {})
        # language ('' for none) -> the extractor whose entities the run learned to predict ({}: none recorded)
        self.entities = dict(entities or {})

    @property
    def name(self) -> str:
        """The model id or path the vectors come from, as index metadata records it."""
        return self.backbone.name

    @property
    def dim(self) -> int:
        return int(self.backbone.dim)

    def text(self, item: Any, kind: str) -> str:
        """What the backbone reads for ``item``: a record in the model's text format; a
        document string as it is; a query string through the text format (as search does)."""
        if kind == "query":
            return self.text_format.query(item)
        return item if isinstance(item, str) else self.text_format.document(item)

    def encode(self, texts: str | Any | Sequence[Any], kind: str = "document", *, batch_size: int = 32,
               show_progress: bool = False):
        """float32 ``[n, dim]`` for a list of strings or records (``[dim]`` for a single one)."""
        if kind not in KINDS:
            raise StructretError(f"kind={kind!r}: encode 'query' or 'document' texts.")
        single = isinstance(texts, str) or not isinstance(texts, Iterable) or isinstance(texts, Query)
        items = [texts] if single else list(texts)
        vectors = self.backbone.encode([self.text(x, kind) for x in items], kind=kind, batch_size=batch_size,
                                       show_progress=show_progress)
        return vectors[0] if single else vectors

    def encode_query(self, texts, *, batch_size: int = 32, show_progress: bool = False):
        """Queries (strings or ``Query`` records) as vectors."""
        return self.encode(texts, "query", batch_size=batch_size, show_progress=show_progress)

    def encode_document(self, texts, *, batch_size: int = 32, show_progress: bool = False):
        """Documents (strings, or records formatted with the model's text format) as vectors."""
        return self.encode(texts, "document", batch_size=batch_size, show_progress=show_progress)

    def option_strings(self) -> list[str]:
        """The factory options as sorted ``key=value`` strings, as embeddings metadata keys them."""
        def show(value):
            return str(value).lower() if isinstance(value, bool) else str(value)
        return sorted(f"{key}={show(value)}" for key, value in self.options.items())

    def __repr__(self) -> str:
        fmt = f", text_format={self.text_format.name!r}" if self.text_format.name else ""
        return f"Model({self.name!r}, backbone={self.backbone_name!r}, dim={self.dim}{fmt})"


def load_model(name_or_path: str, *, verify: bool = True, **options: Any) -> Model:
    """A model to encode with.

    ``name_or_path`` is a registered backbone (``minilm``; ``model=`` then overrides its
    weights), a run directory or checkpoint of ``structret train`` (its backbone, final
    weights and text format), or a Hugging Face hub id / local model folder (a T5-family
    config gives the ``t5`` backbone, anything else ``hf-encoder``), or a folder of
    ``structret export --format onnx`` (encoded by onnxruntime without torch; ``variant="int8"``
    for its quantized graph). ``options`` go to the
    backbone factory (``dtype="fp32"``, ``max_length=128``, ...). ``verify=False`` loads a
    run whose files do not match its checksums.json (a warning says so).

    Raises PluginError for an unknown name or option, ArtifactError for a damaged run,
    ModelLoadError when the weights cannot be loaded.
    """
    from structret.onnx_encoder import is_onnx_export

    if is_onnx_export(name_or_path):  # 'structret export --format onnx': onnxruntime, no torch
        return load_onnx_model(name_or_path, **options)
    registry = get_registry()
    model = options.pop("model", None)
    if registry.has("backbone", name_or_path):
        return open_model(name_or_path, model, options, verify=verify)
    if model is not None:
        registry.get("backbone", name_or_path)  # model= goes with a backbone name: say which ones exist
    looks_like_path = Path(name_or_path).exists() or "/" in str(name_or_path)
    if not looks_like_path:
        try:
            registry.get("backbone", name_or_path)
        except PluginError as exc:
            raise PluginError(f"{exc} A run directory of 'structret train', a model folder or a hub id "
                              f"(org/name) also works.") from None
    return open_model(None, str(name_or_path), options, verify=verify)


def load_onnx_model(directory: str | os.PathLike, *, variant: str = "fp32", threads: int | str | None = None,
                    **unknown: Any) -> Model:
    """A Model over a folder of ``structret export --format onnx``: onnxruntime and tokenizers, no torch."""
    from structret.onnx_encoder import OnnxEncoder

    if unknown:
        raise ModelLoadError(f"{directory} is an ONNX export, which takes variant='fp32'|'int8' and threads=N, "
                             f"not {', '.join(sorted(unknown))}; its other settings were fixed when it was exported.")
    if isinstance(threads, str):  # --model-option threads=4
        if not threads.strip().isdigit():
            raise ModelLoadError(f"threads={threads!r}: give a whole number of threads for onnxruntime.")
        threads = int(threads)
    encoder = OnnxEncoder(directory, variant=variant, threads=threads)
    # the export refuses runs with a text format, so records are read as their own text()
    return Model(encoder, backbone_name="onnx", model=str(directory), options={"variant": variant},
                 text_format=TextFormat(), recipe=encoder.meta.get("recipe") or {}, entities=encoder.meta.get("entities"))


class TrainedModel(NamedTuple):
    """A model ``structret train`` wrote, as its structret.json records it."""

    backbone: str  # the registered backbone name
    directory: str  # the model's own folder (a run's final/, or a checkpoint)
    recipe: dict  # the run's resolved recipe
    entities: dict  # language ('' for none) -> the extractor whose entities it learned (objectives' entity_extractors)


def trained_model(path: str, *, verify: bool = True) -> TrainedModel | None:
    """The model ``structret train`` wrote at ``path``: its run directory (the final model is
    used) or any checkpoint in it; None otherwise.

    The model's files must match its checksums.json (ArtifactError otherwise), unless
    ``verify`` is False, which says so on stderr.
    """
    directory = Path(path)
    final = directory / "final"
    if (final / META_FILE).is_file() or (final / CHECKSUMS_FILE).is_file():
        directory = final
    if not (directory / META_FILE).is_file() and not (directory / CHECKSUMS_FILE).is_file():
        return None  # a model directory that structret train did not write, or a hub id
    from structret.onnx_encoder import is_onnx_export

    if is_onnx_export(directory):
        return None  # structret export --format onnx: checksummed, but no run (open_model opens it)
    try:
        meta = json.loads((directory / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        meta = None  # missing or damaged: verify_checksums says which
    if isinstance(meta, dict) and not meta.get("backbone"):
        return None  # another structret artifact (an index, embeddings), not a model
    verify_checksums(directory, verify=verify)  # an incomplete or damaged copy of a model stops here, with a sentence
    if not isinstance(meta, dict):
        raise ArtifactError(f"{directory / META_FILE} is missing or damaged, so the backbone of the model in "
                            f"{directory} is unknown. {rebuild_hint(directory)}.")
    return TrainedModel(meta["backbone"], str(directory), meta.get("recipe") or {}, meta.get("entities") or {})


def open_model(backbone: str | None, model: str | TrainedModel | None = None, options: dict[str, Any] | None = None,
               *, verify: bool = True, weights_only: bool = False) -> Model:
    """``backbone`` (None: guessed from the model's config) with weights ``model``, which may be
    a run of ``structret train`` (its path, or the TrainedModel ``trained_model`` found, so a run
    checked once is not hashed again): then the run's backbone, weights and text format are used.
    ``weights_only``: a run gives only its weights, and ``backbone`` (required) and ``options``
    stay as given: training continues from a run with its own recipe's backbone.

    A folder of ``structret export --format onnx`` (or a model's ONNX copy) is opened as ``load_model``
    opens it, with onnxruntime and no torch, whatever ``backbone`` says: an index built with one records
    backbone ``onnx`` and the folder, and ``structret search`` reopens it here."""
    options = dict(options or {})
    if isinstance(model, (str, os.PathLike)) and not weights_only:
        from structret.onnx_encoder import is_onnx_export

        if is_onnx_export(model):
            verify_checksums(model, verify=verify)
            return load_onnx_model(model, **options)
    trained: TrainedModel | None
    if isinstance(model, TrainedModel):
        trained, model = model, model.directory
    else:
        trained = trained_model(model, verify=verify) if model else None
    recipe: dict[str, Any]
    weights: str | None
    entities: dict[str, str]
    text_format, recipe, entities = TextFormat(), {}, {}
    if trained is not None and weights_only:
        if backbone is None:
            raise StructretError("open_model(weights_only=True): name the backbone the weights go into.")
        weights = trained.directory
    elif trained is not None:
        backbone, weights, recipe, entities = trained
        text_format = TextFormat.of_recipe(recipe)
    else:
        weights = model
        if backbone is None:
            if model is None:  # else Path(None) fails below with a TypeError that says nothing useful
                raise StructretError("open_model: name a backbone, a model or both.")
            backbone = _family(model)
        elif model is not None and _family(str(model)) == defaults.STATIC:
            # a token table, whatever backbone was named (index's default, minilm): no transformer reads one
            backbone = defaults.STATIC
    made = get_registry().create("backbone", backbone, **options, **({"model": weights} if weights else {}))
    # model: what was asked for (the run, not its final/ folder), so an index can reopen it
    return Model(made, backbone_name=backbone, model=model, options=options, text_format=text_format, recipe=recipe,
                 entities=entities)


def _family(model: str) -> str:
    """``t5`` for a T5-family config (t5, mt5, codet5, ...), ``static`` for a model2vec folder, else
    ``hf-encoder``."""
    config = _config(model)
    kind = str(config.get("model_type", "")).lower()
    if kind == "model2vec":
        return defaults.STATIC
    architectures = config.get("architectures") or []
    t5 = "t5" in kind or any("T5" in str(a) for a in architectures)
    return defaults.SEQ2SEQ if t5 else defaults.ENCODER


def _config(model: str) -> dict:
    file = Path(model) / "config.json"
    if not file.is_file():
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(model, "config.json")
        except Exception:  # not a valid repo id: the backbone's loader says what is wrong
            cached = None
        if not isinstance(cached, str):
            return {}  # not cached: hf-encoder's loader fetches it or says where it looked
        file = Path(cached)
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # the backbone's loader reports the damaged config
    return config if isinstance(config, dict) else {}


def new_model(backbone: str, dataset: Any, out: str, options: dict[str, Any] | None = None) -> int:
    """Write a fresh ``backbone`` (one trained from scratch, such as informed-transformer) to
    ``out``, its tokenizer learned from ``dataset``'s documents and queries; return how many
    texts it learned from. A backbone that starts from pretrained weights raises PluginError."""
    check_from_scratch(backbone)
    texts = [r.text() for r in dataset.corpus.values()] + [q.text for q in dataset.queries.values()]
    model = get_registry().create("backbone", backbone, texts=texts, **(options or {}))
    model.save_pretrained(out)
    return len(texts)


def check_from_scratch(backbone: str) -> None:
    """PluginError unless ``backbone`` is one new_model can create (its factory takes texts)."""
    entry = get_registry().get("backbone", backbone)
    if "texts" not in inspect.signature(entry.load()).parameters:
        raise PluginError(
            f"backbone '{backbone}' starts from pretrained weights, so there is no fresh model to create; "
            f"pass it to 'structret train' directly (new-model is for backbones such as informed-transformer)."
        )


@dataclass(frozen=True)
class ModelChoice:
    """A model as a command names it (``--backbone``, ``--model``, ``--backbone-option``), opened only
    when something has to be encoded: a re-run that finds nothing changed never imports torch."""

    backbone: str | None = None
    model: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def open(self) -> Model:
        return open_model(self.backbone, self.model, self.options)

    def identity(self) -> dict[str, Any]:
        """What decides the vectors, as far as it can be read without loading: the names, the options,
        and for a local folder (a run) its path and the size and time of its checksums (a run trained
        again in place is another model)."""
        found: dict[str, Any] = {"backbone": self.backbone, "model": self.model,
                                 "options": {k: self.options[k] for k in sorted(self.options)}}
        if self.model and Path(self.model).expanduser().exists():
            folder = Path(self.model).expanduser().resolve()
            found["model"] = str(folder)
            sums = next((f for f in (folder / "final" / "checksums.json", folder / "checksums.json",
                                     folder / "config.json") if f.is_file()), None)
            if sums is not None:
                info = sums.stat()
                found["files"] = [str(sums), info.st_size, info.st_mtime_ns]
        return found
