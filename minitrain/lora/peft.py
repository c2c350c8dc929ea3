"""A LoRA adapter in PEFT's layout: the folder `peft.PeftModel.from_pretrained(base_model, FOLDER)` loads.

    FOLDER/adapter_model.safetensors   base_model.model.<layer>.lora_A.weight  (rank, in)  = our A (in, rank)ᵀ
                                       base_model.model.<layer>.lora_B.weight  (out, rank) = our B (rank, out)ᵀ
                                       base_model.model.<name>                 a trained bias, under our name
    FOLDER/adapter_config.json         r, lora_alpha, lora_dropout, target_modules (the adapted layers' paths),
                                       bias, fan_in_fan_out: true for GPT-2 (its Conv1D stores W as (in, out), as
                                       we do), false for a Llama (torch.nn.Linear, (out, in))

Our LoRALinear names its parts as PEFT's layer does (base_layer, lora_A, lora_B), so a name maps by a prefix and,
for the two factors, a `.weight` suffix and a transpose (torch.nn.Linear stores (out, in)). PEFT computes
y = base(x) + lora_B(lora_A(dropout(x))) · lora_alpha / r: the same update. The base model must be the one the
adapter was trained on (`base_model_name_or_path` names it by Hub id, or a local base by its absolute path: PEFT
takes any other name for a Hub id, whatever folder it runs in);
a QLoRA adapter was trained on the 4-bit base, so on the float base it is close to, not equal to, the adapted
model: its safetensors metadata says so (`quantized_base_note`; PEFT refuses keys it does not know in
adapter_config.json, so the note is not there). scripts/check_hf_export.py --lora loads such a folder with PEFT and
compares logits.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.numpy

from minitrain.common.io import atomic_write_bytes, atomic_write_json
from minitrain.lora.adapter import LoraSettings, adapter_state, settings_of
from minitrain.nn import Module

PREFIX = "base_model.model."
WEIGHTS_FILE = "adapter_model.safetensors"
CONFIG_FILE = "adapter_config.json"
FACTORS = ("lora_A", "lora_B")


def peft_key(name: str) -> str:
    """Our parameter name -> the key in adapter_model.safetensors."""
    return PREFIX + name + (".weight" if name.rsplit(".", 1)[-1] in FACTORS else "")


def peft_tensors(state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Our adapter tensors under PEFT's keys, the LoRA factors transposed, float32 and contiguous."""
    return {peft_key(name): np.ascontiguousarray(a.T if name.rsplit(".", 1)[-1] in FACTORS else a, dtype=np.float32)
            for name, a in state.items()}


def peft_config(settings: LoraSettings, fan_in_fan_out: bool = True) -> dict[str, Any]:
    """adapter_config.json for these settings. `init_lora_weights` only matters when PEFT creates new adapters
    (PEFT has no xavier: it is written as PEFT's default). `fan_in_fan_out`: whether the base's layers store W as
    (in, out) (GPT-2's Conv1D: true; a Llama's torch.nn.Linear: false). It only tells PEFT how to merge into the
    base weight; lora_A and lora_B are torch.nn.Linear either way, so the factors are transposed alike."""
    return {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": os.path.abspath(settings.base) if settings.base and os.path.exists(settings.base)
                                   else settings.base,
        "r": settings.rank,
        "lora_alpha": settings.alpha,
        "lora_dropout": settings.dropout,
        "target_modules": list(settings.targets),
        "bias": settings.bias,
        "fan_in_fan_out": fan_in_fan_out,
        "init_lora_weights": "gaussian" if settings.init_weights == "gaussian" else True,
        "inference_mode": True,
        "modules_to_save": None,
        "use_rslora": False,
        "use_dora": False,
    }


def quantized_base_note(settings: LoraSettings) -> str:
    """What a QLoRA adapter reproduces, in the words its metadata and its model card use."""
    return (f"trained on the base's linear weights held in 4-bit {settings.quant_type.upper()} blocks: it reproduces "
            f"the run only on minitrain's {settings.quant_type.upper()}-quantized base (dequantized); on the float "
            "base it is close to, not equal to, the trained model")


def write_peft_adapter(folder: str | Path, model: Module, fan_in_fan_out: bool = True) -> list[Path]:
    """Write an adapted model's adapter as FOLDER/adapter_model.safetensors + adapter_config.json."""
    settings = settings_of(model)
    if settings is None:
        raise ValueError("write_peft_adapter: the model has no LoRA adapters")
    return write_peft_folder(folder, adapter_state(model), settings, fan_in_fan_out)


def write_peft_folder(folder: str | Path, state: dict[str, np.ndarray], settings: LoraSettings,
                      fan_in_fan_out: bool = True) -> list[Path]:
    """The PEFT folder for adapter tensors (our names) and their settings; returns the two files."""
    folder = Path(folder)
    meta = {"format": "pt", "minitrain_quantized_base": str(settings.quantize_base).lower()}
    if settings.quantize_base:
        meta.update(minitrain_base_quantization=settings.quant_type, minitrain_note=quantized_base_note(settings))
    atomic_write_bytes(folder / WEIGHTS_FILE, safetensors.numpy.save(peft_tensors(state), metadata=meta))
    atomic_write_json(folder / CONFIG_FILE, peft_config(settings, fan_in_fan_out))
    return [folder / CONFIG_FILE, folder / WEIGHTS_FILE]
