"""MADRAL's aspect slots on a Hugging Face encoder (``hf-encoder --option aspect_slots=section,role``).

Kong et al. (KDD 2022, "Multi-Aspect Dense Retrieval") give the encoder one extra learned
embedding per aspect, train each to predict its aspect's value (``aspect-predict``), and fuse
them into the text vector. Here:

* **Slots are tokens.** ``[ASPECT:name]`` is added to the tokenizer as a special token (never
  split) and written right after the first token of every text, queries and documents alike
  (one shared encoder): ``[CLS] [ASPECT:section] [ASPECT:role] text ... [SEP]``. They go in
  as the start of the backbone's text prefix, so everything that honours the prefix (encoding,
  training batches, the MLM and MEP objectives' own rows) carries them and counts them toward
  ``max_length``; ``embed`` checks they are in place and says which batch lacks them.
* **A new slot starts as its name's words**: the mean input embedding of the word pieces of
  the aspect name (``category_1`` -> "category 1"), as ``init_token_embeddings`` does for
  ATTEMPT's indicators. Each slot then starts distinct and meaningful; starting every slot
  at the mean embedding would make them identical but for their positions.
* **Aspect states**: the slots' last hidden states, ``backbone.last_aspect_states``
  [batch, k, dim] after each document forward (``aspect-predict`` reads them).
* **Pooling** leaves the slots out: ``cls`` reads the first token (which attends to them),
  ``mean`` averages the text's tokens without the slot positions.
* **Fusion**: ``vector = pooled + sum_i w_i * aspect_i`` with ``w = softmax(W pooled + b)``,
  ``W`` [k, dim] and ``b`` zero-initialised, then normalised if the backbone normalises. An
  untrained fusion is the pooled vector plus the mean of the aspect states: the aspects count
  from the start. (A zero gate on the sum would keep the pretrained space exactly, but at
  ATTEMPT's fine-tuning rate of 5e-6 it would hardly move, and MADRAL's aspects would
  never reach the vector.)

The slot names are saved in the model's ``config.json`` under ``structret_aspects`` and the
fusion weights in ``aspect_fusion.safetensors`` beside the weights, so a saved model loads
back with the same slots and the same vectors.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import torch
from torch import nn

from structret.errors import ModelLoadError

if TYPE_CHECKING:
    from transformers import PreTrainedModel

ASPECT_CONFIG = "structret_aspects"  # config.json key: {"aspect_slots": [names]}
FUSION_FILE = "aspect_fusion.safetensors"
FUSION_MODULE = "structret_aspect_fusion"  # its name on the encoder: trained, moved and synced with it
_NAME_SEPARATORS = re.compile(r"[\W_]+")


def slot_token(aspect: str) -> str:
    """The special token of one aspect slot: ``[ASPECT:section]``."""
    return f"[ASPECT:{aspect}]"


def slot_names(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """``"section, role"`` or ``["section", "role"]`` -> ``("section", "role")``; None -> ()."""
    if value is None:
        return ()
    parts = value.split(",") if isinstance(value, str) else list(value)
    names = tuple(str(p).strip() for p in parts if str(p).strip())
    if len(set(names)) != len(names):
        raise ModelLoadError(f"aspect_slots {', '.join(names)} names an aspect twice; give each once.")
    return names


class AspectFusion(nn.Module):
    """``pooled + sum_i softmax(W pooled + b)_i aspect_i``, ``W`` and ``b`` starting at zero."""

    def __init__(self, dim: int, slots: int):
        super().__init__()
        self.weights = nn.Linear(dim, slots)
        with torch.no_grad():
            self.weights.weight.zero_()
            self.weights.bias.zero_()

    def forward(self, pooled: torch.Tensor, aspects: torch.Tensor) -> torch.Tensor:
        pooled, aspects = pooled.float(), aspects.float()
        w = torch.softmax(self.weights(pooled), dim=-1)
        return pooled + (w.unsqueeze(-1) * aspects).sum(dim=1)


def install(backbone: Any, names: Sequence[str], fusion_file: Path | None = None) -> None:
    """Give ``backbone`` (an HFEncoder) the slots ``names``: tokens (new ones start as their
    name's words), the fusion module on its encoder, the names in its config; fusion weights
    from ``fusion_file`` when given (a saved model's)."""
    tokens = [slot_token(n) for n in names]
    new = {t for t in tokens if t not in backbone.tokenizer.get_vocab()}
    backbone.add_special_tokens(tokens)
    backbone.init_token_embeddings({slot_token(n): _NAME_SEPARATORS.sub(" ", n).strip() or n
                                    for n in names if slot_token(n) in new})
    fusion = AspectFusion(backbone.dim, len(names)).to(backbone.device)
    if fusion_file is not None:
        if not fusion_file.is_file():
            raise ModelLoadError(f"{fusion_file.parent} has aspect slots ({', '.join(names)}) in its config.json "
                                 f"but no {FUSION_FILE}; copy the whole model folder.")
        from safetensors.torch import load_file

        saved = load_file(str(fusion_file))
        try:
            fusion.load_state_dict(saved)
        except RuntimeError as exc:
            raise ModelLoadError(f"{fusion_file} does not fit {len(names)} aspect slots of size "
                                 f"{backbone.dim}: {str(exc).splitlines()[0]}") from None
    backbone.model.add_module(FUSION_MODULE, fusion)
    setattr(backbone.model.config, ASPECT_CONFIG, {"aspect_slots": list(names)})
    backbone.aspect_fusion = fusion
    backbone.aspect_slot_ids = torch.tensor(backbone.tokenizer.convert_tokens_to_ids(tokens))


def prefix_text(names: Sequence[str]) -> str:
    """What goes before every text's own prefix: the slot tokens, in order."""
    return "".join(slot_token(n) for n in names)


def split_states(hidden: torch.Tensor, input_ids: torch.Tensor, slot_ids: torch.Tensor,
                 where: str) -> torch.Tensor:
    """The slots' states [batch, k, dim] (positions 1..k); raises if a row lacks its slots there."""
    k = len(slot_ids)
    found = input_ids[:, 1:1 + k]
    if found.shape[1] != k or not bool((found == slot_ids.to(found.device)).all()):
        raise ModelLoadError(
            f"{where}: a batch reached the encoder without its aspect slot tokens right after the first "
            f"token; it was tokenized without the backbone's text prefix (backbone.tokenize adds them)."
        )
    return hidden[:, 1:1 + k]


def text_mask(attention_mask: torch.Tensor, slots: int) -> torch.Tensor:
    """The attention mask without the slot positions: what mean pooling averages."""
    mask = attention_mask.clone()
    mask[:, 1:1 + slots] = 0
    return mask


def save_fusion(fusion: nn.Module, directory: Path) -> None:
    from safetensors.torch import save_file

    save_file({k: v.detach().contiguous().cpu() for k, v in fusion.state_dict().items()},
              str(directory / FUSION_FILE))


class without_fusion:
    """Context: the encoder without its fusion module, so ``save_pretrained`` writes a plain
    Hugging Face checkpoint (the fusion goes to its own file)."""

    def __init__(self, model: PreTrainedModel):
        self.model = model
        self.fusion: nn.Module | None = None

    def __enter__(self) -> PreTrainedModel:
        self.fusion = self.model._modules.pop(FUSION_MODULE, None)
        return self.model

    def __exit__(self, *exc: Any) -> None:
        if self.fusion is not None:
            self.model.add_module(FUSION_MODULE, self.fusion)
