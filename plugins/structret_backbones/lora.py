"""LoRA adapters on a Hugging Face encoder, through ``peft``: inject, save, load, merge.

The adapter is injected into the encoder in place (``peft.inject_adapter_in_model``), so the
model stays the transformers model every other part of the backbone knows (its config, its
embeddings, the masked-LM head that wraps it); only the adapted linear layers change class.
Injection leaves only the adapter trainable, so the trainer's optimizer sees nothing else.

On disk a model with an adapter is the plain base checkpoint (``model.safetensors`` under
the base's own tensor names, loadable without peft) plus ``lora/``: ``adapter_config.json``
and ``adapter_model.safetensors`` as peft writes them (``PeftModel.from_pretrained(base,
DIR/"lora")`` reads it too). It lives in a subfolder because transformers treats an
``adapter_config.json`` beside ``config.json`` as a hub adapter and goes looking for its base.
A checkpoint of a LoRA run therefore also holds the frozen base weights: self-contained, at
the price of one base copy per checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import torch

from structret.errors import ModelLoadError

if TYPE_CHECKING:
    from transformers import PreTrainedModel

FOLDER = "lora"
CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"
_BASE = ".base_layer"  # what injection inserts into an adapted layer's tensor names


def require_peft() -> Any:
    try:
        import peft
    except ImportError:
        raise ModelLoadError("lora_r > 0 (or a model saved with a LoRA adapter) needs peft, which is not installed: "
                             "pip install 'structret[lora]' (or pip install peft).") from None
    return peft


def saved_settings(directory: str | Path) -> dict[str, Any] | None:
    """The adapter settings a saved model holds (``{"r", "alpha", "dropout", "targets"}``), None without one."""
    file = Path(directory) / FOLDER / CONFIG_FILE
    if not file.is_file():
        return None
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ModelLoadError(f"{file}: not valid JSON ({exc}); the model's adapter is damaged.") from None
    targets = config.get("target_modules")
    return {"r": int(config["r"]), "alpha": float(config["lora_alpha"]), "dropout": float(config["lora_dropout"]),
            "targets": sorted(targets) if isinstance(targets, list) else targets}


def default_targets(model: PreTrainedModel) -> list[str]:
    """peft's default LoRA targets for this architecture (BERT, RoBERTa, ...: query and value)."""
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as DEFAULTS

    model_type = model.config.model_type
    if model_type not in DEFAULTS:
        linear = sorted({name.rsplit(".", 1)[-1] for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)})
        raise ModelLoadError(f"peft has no default LoRA targets for {model_type} models; name them with "
                             f"lora_targets (this model's linear layers: {', '.join(linear)}).")
    return sorted(DEFAULTS[model_type])


def settings(r: int, alpha: float | None, dropout: float | None, targets: Sequence[str] | None,
             model: PreTrainedModel) -> dict[str, Any]:
    """The adapter settings for the given options (unset alpha = 2 r, dropout = 0, targets = peft's)."""
    return {"r": int(r), "alpha": float(alpha if alpha is not None else 2 * r),
            "dropout": float(dropout or 0.0), "targets": sorted(targets) if targets else default_targets(model)}


def inject(model: torch.nn.Module, lora: dict[str, Any]) -> None:
    """Put a fresh adapter (``lora_B`` = 0: the model's vectors do not change) into ``model``;
    everything else in it stops being trainable."""
    peft = require_peft()
    config = peft.LoraConfig(r=lora["r"], lora_alpha=lora["alpha"], lora_dropout=lora["dropout"],
                             target_modules=list(lora["targets"]), bias="none")
    try:
        peft.inject_adapter_in_model(config, model)
    except ValueError as exc:  # peft: "Target modules {...} not found in the base model"
        raise ModelLoadError(f"lora_targets={','.join(lora['targets'])}: {str(exc).splitlines()[0]}") from None


def load(model: torch.nn.Module, directory: str | Path) -> None:
    """The saved adapter's weights into the adapter ``inject`` made from the same settings."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    file = Path(directory) / FOLDER / WEIGHTS_FILE
    if not file.is_file():
        raise ModelLoadError(f"{file} is missing: the model's adapter is incomplete; copy the whole model folder.")
    result: Any = set_peft_model_state_dict(model, load_file(str(file)))  # torch's _IncompatibleKeys; peft: namedtuple
    missing = [k for k in result.missing_keys if ".lora_" in k]
    if missing or result.unexpected_keys:
        raise ModelLoadError(f"{file} does not fit {Path(directory) / FOLDER / CONFIG_FILE} (missing {missing[:2]}, "
                             f"unexpected {list(result.unexpected_keys)[:2]}); the adapter is damaged.")


def base_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """``model``'s weights under the base's own names, the adapter left out: a plain checkpoint."""
    return {name.replace(_BASE, ""): tensor for name, tensor in model.state_dict().items() if ".lora_" not in name}


def save(model: torch.nn.Module, directory: str | Path, lora: dict[str, Any], base: str) -> None:
    """``directory/lora``: the adapter's weights and config in peft's format."""
    import peft
    from peft import get_peft_model_state_dict
    from safetensors.torch import save_file

    folder = Path(directory) / FOLDER
    folder.mkdir(exist_ok=True)
    tensors = get_peft_model_state_dict(model)
    save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(folder / WEIGHTS_FILE))
    config = peft.LoraConfig(r=lora["r"], lora_alpha=lora["alpha"], lora_dropout=lora["dropout"],
                             target_modules=list(lora["targets"]), bias="none", base_model_name_or_path=base)
    config.save_pretrained(str(folder))


def merge(model: torch.nn.Module) -> None:
    """Fold the adapter into the base weights and put the plain layers back (peft's merge_and_unload,
    in place): the model then computes the same vectors without peft."""
    from peft.tuners.lora import LoraLayer

    adapted = [(name, m) for name, m in model.named_modules() if isinstance(m, LoraLayer)]
    for name, layer in adapted:
        layer.merge(safe_merge=True)  # safe: refuses (ValueError) rather than writing nan/inf weights
        parent, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, child, layer.get_base_layer())
    for p in model.parameters():  # a merged model is trained whole, like any plain one
        p.requires_grad_(True)
