"""T5-family models (T5, CodeT5, ...) pooled at the first decoder position.

The text goes through the encoder; the decoder then runs a single step from its start
token, attending to the whole encoded text, and its last hidden state at that position
is the vector. This is how OpenMatch's T5 dense retriever (used by SANTA) reads T5, so
checkpoints trained that way are encoded the same here.
"""

from __future__ import annotations

import os
from typing import Any, Literal, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from structret.errors import ModelLoadError
from structret_backbones._loading import (
    DTYPES,
    PrefixedTokenizer,
    check_choice,
    encode_texts,
    load_model_and_tokenizer,
    usable_max_length,
)

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


class T5Encoder:
    """A T5-family encoder-decoder as a Backbone; the vector is the decoder's first position."""

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
        check_choice("dtype", dtype, tuple(DTYPES))
        self.model, self.tokenizer, self.name = load_model_and_tokenizer(
            model, backbone="t5", trust_remote_code=trust_remote_code, check_config=_encoder_decoder
        )
        self.device = torch.device(device)
        self.model.to(self.device)
        self.dim: int = self.model.config.d_model
        self.capabilities = frozenset({"encoder", "seq2seq"})
        self.normalize = normalize
        self.dtype = dtype
        self.decoder_start_token_id: int = _start_token(self.model.config)
        self.max_length = usable_max_length(max_length, self.tokenizer, self.name)
        self.tokenize = PrefixedTokenizer(self.tokenizer, self.max_length, query_prefix, document_prefix)

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
        vectors = out.last_hidden_state[:, 0]
        return F.normalize(vectors.float(), dim=-1) if self.normalize else vectors

    def encode(
        self,
        texts: Sequence[str],
        *,
        kind: Literal["query", "document"] = "document",
        batch_size: int = 32,
        show_progress: bool = False,
    ) -> np.ndarray:
        """float32 [len(texts), dim], row i for texts[i]."""
        self.model.eval()
        return encode_texts(
            texts,
            tokenizer=self.tokenize,
            kind=kind,
            embed=self.embed,
            dim=self.dim,
            batch_size=batch_size,
            device=self.device,
            dtype=self.dtype,
            show_progress=show_progress,
        )

    def __repr__(self) -> str:
        return f"T5Encoder({self.name!r}, normalize={self.normalize}, dim={self.dim})"


def t5_base(model: str | os.PathLike | None = None, **options: Any) -> T5Encoder:
    return T5Encoder(model or T5_BASE_ID, **options)


def codet5_base(model: str | os.PathLike | None = None, **options: Any) -> T5Encoder:
    """CodeT5-base; its RoBERTa-style BPE tokenizer is picked up from the checkpoint."""
    return T5Encoder(model or CODET5_BASE_ID, **options)
