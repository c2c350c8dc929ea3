"""LoRA and QLoRA: adapt a trained model by training a low-rank update of some of its linear layers.

    targets.py   which layers `lora.target_modules` / `target_modules_pattern` name (GPT-2's, or Llama's
                 names translated where GPT-2 has a counterpart)
    adapter.py   add_adapters (QLoRA: the base in 4-bit blocks first), adapter_state, merge_adapters
    peft.py      the adapter in PEFT's layout (adapter_model.safetensors + adapter_config.json)

The layers are in minitrain/nn/lora.py (LoRALinear) and minitrain/nn/quantized.py (Linear4Bit); the 4-bit
blocks in minitrain/quant/blockwise.py.
"""

from minitrain.lora.adapter import (
    LoraSettings,
    adapter_names,
    adapter_names_in,
    adapter_state,
    add_adapters,
    base_weight_bytes,
    check_base,
    load_adapter_state,
    merge_adapters,
    merged_state,
    settings_of,
    state_digest,
    with_base,
)
from minitrain.lora.targets import linear_paths, resolve_targets

__all__ = [
    "LoraSettings", "adapter_names", "adapter_names_in", "adapter_state", "add_adapters", "base_weight_bytes",
    "check_base", "linear_paths", "load_adapter_state", "merge_adapters", "merged_state", "resolve_targets",
    "settings_of", "state_digest", "with_base",
]  # fmt: skip
