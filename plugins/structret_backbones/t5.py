"""T5-family models (T5, CodeT5, ...) pooled at the first decoder position.

The text goes through the encoder; the decoder then runs a single step from its start
token, attending to the whole encoded text, and its last hidden state at that position
is the vector. This is how OpenMatch's T5 dense retriever (used by SANTA) reads T5, so
checkpoints trained that way are encoded the same here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from structret.errors import ModelLoadError
from structret.plugin import resolve_options
from structret_backbones import options as opts
from structret_backbones._loading import TrainableMixin, TransformerBackbone

T5_BASE_ID = "google-t5/t5-base"
CODET5_BASE_ID = "Salesforce/codet5-base"


def _encoder_decoder(config: Any, source: str) -> None:
    if not getattr(config, "is_encoder_decoder", False):
        raise ModelLoadError(
            f"{source} is an encoder-only ({config.model_type}) model, but the t5 backbone pools at "
            f"the first decoder position and needs an encoder-decoder. Use the hf-encoder backbone for it."
        )
    if _start_token(config) is None:
        raise ModelLoadError(
            f"{source}: its config.json sets neither decoder_start_token_id nor pad_token_id, so "
            f"there is no token to start the decoder with. Add decoder_start_token_id to config.json."
        )


def _start_token(config: Any) -> int | None:
    start = getattr(config, "decoder_start_token_id", None)
    return start if start is not None else getattr(config, "pad_token_id", None)


class T5Encoder(TrainableMixin, TransformerBackbone):
    """A T5-family encoder-decoder as a Backbone; the vector is the decoder's first position."""

    plugin_name = "t5"
    pooling = "first-decoder-position"  # recorded in a trained model's structret.json

    def __init__(self, model: str | os.PathLike | None = None, options: opts.T5Encoder | None = None, **given: Any):
        # the registry hands the validated options; Python code may give single ones as keywords
        # (T5Encoder(path, max_length=512)), checked by the same model
        options = resolve_options(opts.T5Encoder, options, given, what=f"backbone '{self.plugin_name}'")
        super().__init__(model, options, check_config=_encoder_decoder)
        self.dim: int = self.model.config.d_model
        self.capabilities = frozenset({"encoder", "seq2seq"})
        start = _start_token(self.model.config)
        assert start is not None  # check_config (_encoder_decoder) refused a config without one
        self.decoder_start_token_id: int = start

    def embed(self, batch: Any, *, kind: str = "document") -> torch.Tensor:
        """Decoder state at position 0 [batch, dim] for a tokenized batch; keeps gradients."""
        input_ids = batch["input_ids"]
        start = torch.full((input_ids.shape[0], 1), self.decoder_start_token_id, dtype=torch.long, device=input_ids.device)
        out = self._net()(
            input_ids=input_ids,
            attention_mask=batch["attention_mask"],
            decoder_input_ids=start,
            use_cache=False,
        )
        return self._finish(out.last_hidden_state[:, 0])

    # --- training: the seq2seq LM around this very encoder-decoder ------------------------

    lm_auto_class = "AutoModelForSeq2SeqLM"

    def _base_prefixes(self) -> tuple[str, ...]:
        return tuple(f"{name}." for name, _ in self.model.named_children())

    def _attach(self, lm: Any) -> None:
        for name, module in self.model.named_children():  # shared, encoder, decoder
            if not hasattr(lm, name):
                raise ModelLoadError(
                    f"{self.name}: {type(lm).__name__} has no '{name}' module, so its LM head cannot share "
                    f"this model's weights; the t5 backbone trains T5-family models only."
                )
            setattr(lm, name, module)

    def _lm_forward(self, batch: Any, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # Teacher forcing starts the decoder at the same start token embed() uses, and the
        # decoder is causal: position 0 sees only that token and the encoded passage, so its
        # state IS the passage vector, whatever the labels are.
        start = labels.new_full((labels.shape[0], 1), self.decoder_start_token_id)
        pad = self.model.config.pad_token_id if self.model.config.pad_token_id is not None else 0
        shifted = torch.cat([start, labels[:, :-1]], dim=1)
        decoder_input_ids = shifted.masked_fill(shifted == -100, pad)  # ignored label slots
        out = self.lm_model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            decoder_input_ids=decoder_input_ids,
            labels=labels,
            output_hidden_states=True,
            use_cache=False,
        )
        return self._finish(out.decoder_hidden_states[-1][:, 0]), out.loss

    def save_pretrained(self, directory: str | os.PathLike) -> None:
        """A plain Hugging Face checkpoint (safetensors) + tokenizer. With a trained LM head it
        is the whole seq2seq model, which this backbone (and AutoModel) still loads."""
        (self.lm_model if self.lm_model is not None else self.model).save_pretrained(Path(directory))
        self.tokenizer.save_pretrained(Path(directory))

    def __repr__(self) -> str:
        return f"T5Encoder({self.name!r}, normalize={self.normalize}, dim={self.dim})"


def t5_base(model: str | os.PathLike | None = None, options: opts.T5Encoder | None = None, **given: Any) -> T5Encoder:
    return T5Encoder(model or T5_BASE_ID, resolve_options(opts.T5Encoder, options, given, what="backbone 't5-base'"))


def codet5_base(model: str | os.PathLike | None = None, options: opts.T5Encoder | None = None,
                **given: Any) -> T5Encoder:
    """CodeT5-base; its RoBERTa-style BPE tokenizer is picked up from the checkpoint."""
    return T5Encoder(model or CODET5_BASE_ID, resolve_options(opts.T5Encoder, options, given,
                                                              what="backbone 'codet5-base'"))
