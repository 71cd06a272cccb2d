"""T5-family models (T5, CodeT5, ...) pooled at the first decoder position.

The text goes through the encoder; the decoder then runs a single step from its start
token, attending to the whole encoded text, and its last hidden state at that position
is the vector. This is how OpenMatch's T5 dense retriever (used by SANTA) reads T5, so
checkpoints trained that way are encoded the same here.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from structret.errors import ModelLoadError
from structret_backbones._loading import TransformerBackbone

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


class T5Encoder(TransformerBackbone):
    """A T5-family encoder-decoder as a Backbone; the vector is the decoder's first position."""

    plugin_name = "t5"

    def __init__(
        self,
        model: str | os.PathLike | None = None,
        *,
        normalize: bool = False,
        max_length: int = 256,
        query_prefix: str = "",
        document_prefix: str = "",
        device: str = "cpu",
        dtype: str | None = None,
        trust_remote_code: bool = False,
    ):
        super().__init__(
            model, normalize=normalize, max_length=max_length, query_prefix=query_prefix,
            document_prefix=document_prefix, device=device, dtype=dtype,
            trust_remote_code=trust_remote_code, check_config=_encoder_decoder,
        )
        self.dim: int = self.model.config.d_model
        self.capabilities = frozenset({"encoder", "seq2seq"})
        self.decoder_start_token_id: int = _start_token(self.model.config)

    def embed(self, batch: Any) -> torch.Tensor:
        """Decoder state at position 0 [batch, dim] for a tokenized batch; keeps gradients."""
        input_ids = batch["input_ids"]
        start = torch.full((input_ids.shape[0], 1), self.decoder_start_token_id, dtype=torch.long, device=input_ids.device)
        out = self.model(
            input_ids=input_ids,
            attention_mask=batch["attention_mask"],
            decoder_input_ids=start,
            use_cache=False,
        )
        return self._finish(out.last_hidden_state[:, 0])

    def __repr__(self) -> str:
        return f"T5Encoder({self.name!r}, normalize={self.normalize}, dim={self.dim})"


def t5_base(model: str | os.PathLike | None = None, **options: Any) -> T5Encoder:
    return T5Encoder(model or T5_BASE_ID, **options)


def codet5_base(model: str | os.PathLike | None = None, **options: Any) -> T5Encoder:
    """CodeT5-base; its RoBERTa-style BPE tokenizer is picked up from the checkpoint."""
    return T5Encoder(model or CODET5_BASE_ID, **options)
