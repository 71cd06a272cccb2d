"""The attention an encoder runs: transformers' SDPA, except where torch's CPU kernel is slow.

Measured on an AMX Xeon with torch 2.13 (docs/performance.md): the CPU flash-attention kernel
is faster in bf16 than in fp32 for a forward alone, but its forward-and-backward in bf16 takes
2-7x the fp32 time (MiniLM's shapes, 12 heads of 32). So under bf16 autocast, while gradients
are recorded on a CPU, attention runs in fp32 (its matrix products are a small part of
MiniLM's; the projections around it stay in bf16): a training step 1.25x faster. Encoding, GPUs
and fp32 training run transformers' SDPA as it is.
"""

from __future__ import annotations

from typing import Any

import torch

from structret.errors import ModelLoadError

IMPLEMENTATION = "structret_sdpa"


def sdpa(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
         attention_mask: torch.Tensor | None, **kwargs: Any) -> tuple[torch.Tensor, Any]:
    """transformers' SDPA attention, in fp32 when training on a CPU in bf16 (above)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if query.dtype != torch.bfloat16 or query.device.type != "cpu" or not torch.is_grad_enabled():
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    if attention_mask is not None and attention_mask.is_floating_point():
        attention_mask = attention_mask.float()  # SDPA wants a float mask in the query's dtype
    with torch.autocast("cpu", enabled=False):
        out, weights = sdpa_attention_forward(module, query.float(), key.float(), value.float(), attention_mask,
                                              **kwargs)
    return out.to(query.dtype), weights


def install(model: Any, attention: str) -> None:
    """Route ``model``'s attention as the backbone option ``attention`` says: ``auto`` through
    ``sdpa`` above, ``sdpa`` or ``eager`` through transformers' own (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    wanted = attention
    if attention == "auto":
        AttentionInterface.register(IMPLEMENTATION, sdpa)
        AttentionMaskInterface.register(IMPLEMENTATION, sdpa_mask)  # the boolean mask SDPA takes
        wanted = IMPLEMENTATION
    if model.config._attn_implementation == wanted:
        return
    try:
        model.set_attn_implementation(wanted)
    except (ValueError, AttributeError, ImportError) as exc:
        if attention != "auto":  # asked for by name: say why it cannot be had
            raise ModelLoadError(f"{type(model).__name__} cannot run attention={attention!r}: {exc}") from exc
        # auto on an architecture that takes no attention function: transformers' own choice stands
