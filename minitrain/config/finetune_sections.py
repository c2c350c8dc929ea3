"""The `lora:` and `quantize:` sections: LoRA / QLoRA fine-tuning (minitrain/lora/) and weight quantization after,
or trained for, training (minitrain/quant/). Cross-field rules about them live in rules.py."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from minitrain.common.errors import UserError
from minitrain.common.strict import Count, PositiveInt, Section
from minitrain.lora import LoraSettings, resolve_targets
from minitrain.models.registry import linear_module_paths
from minitrain.nn.module import module_matches
from minitrain.quant.scheme import BITS, GRANULARITIES, METHODS, OBSERVER_METHODS, SCHEMES, Scheme


class LoraConfig(Section):
    """LoRA fine-tuning of model.init_from (minitrain/lora/): the base stays frozen, and a low-rank update
    (alpha/rank)·A·B is trained for each linear layer the targets name; with quantize_base (QLoRA) the frozen
    base is held in 4-bit blocks. The final model file holds only the adapters."""

    enabled: bool = False
    rank: PositiveInt = 16
    alpha: float = Field(32.0, gt=0, description="the update is scaled by alpha / rank")
    dropout: float = Field(0.05, ge=0.0, lt=1.0, description="dropout on the adapters' input")
    target_modules: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=lambda: ["c_attn"], description="linear layers by name or path suffix (c_attn, attn.c_proj, "
                                                          "c_fc, mlp.c_proj, or q/k/v_proj, o_proj, up/down_proj)")
    target_modules_pattern: str | None = Field(None, min_length=1, description="regex a whole layer path matches")
    bias: Literal["none", "all", "lora_only"] = Field("none", description="biases trained with the adapters")
    init_weights: Literal["gaussian", "xavier", "kaiming"] = Field("kaiming", description="A's init (B is 0)")
    quantize_base: bool = Field(False, description="QLoRA: the frozen base's linear weights in 4-bit blocks")
    quantize_bits: Literal[4] = 4
    quant_type: Literal["nf4", "fp4"] = "nf4"
    double_quantize: bool = Field(False, description="quantize the blocks' absmax scales again, to 8 bits")

    def settings(self, linear_paths: list[str]) -> LoraSettings:
        """The adaptation of a model whose linear layers are `linear_paths` (the rules checked the targets)."""
        targets, problems = resolve_targets(self.target_modules, self.target_modules_pattern, linear_paths)
        if problems:
            raise UserError(f"lora: {'; '.join(problems.values())}", 2)
        return LoraSettings(rank=self.rank, alpha=self.alpha, targets=tuple(targets), dropout=self.dropout,
                            bias=self.bias, init_weights=self.init_weights, quantize_base=self.quantize_base,
                            quant_type=self.quant_type, double_quantize=self.double_quantize)


class QatConfig(Section):
    """Quantization-aware training: fake-quantize the linear weights in every forward pass."""

    enabled: bool = False
    observer: Literal["minmax", "histogram", "percentile"] = Field(
        "minmax", description="how each unit's range is read from the weights (histogram: least rounding error)")


class CalibrationConfig(Section):
    """How post-training quantization chooses each unit's range, and the data it may use."""

    samples: Count = Field(0, description="training records whose inputs weigh the mse method's error")
    method: Literal[tuple(METHODS)] = "minmax"
    percentile: float = Field(99.99, gt=50, le=100, description="percentile method (and observer)")


class QuantizeConfig(Section):
    """Quantize the linear layers' weights after training (minitrain/quant/), optionally trained for it (qat)."""

    enabled: bool = False
    bits: Literal[tuple(BITS)] = 8
    scheme: Literal[tuple(SCHEMES)] = "symmetric"
    granularity: Literal[tuple(GRANULARITIES)] = "per_channel"
    group_size: PositiveInt = Field(128, description="per_group: inputs per scale; must divide each layer's inputs")
    qat: QatConfig = Field(default_factory=QatConfig)
    calibration: CalibrationConfig = Field(default_factory=CalibrationConfig)
    exclude: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, description="linear layers kept in float (names as lora.target_modules)")

    def linear_exclude(self, architecture: dict) -> list[str]:
        """The exclude entries that name linear layers: what quantization reads (the others name layers that stay
        float anyway, an embedding or a tied lm_head; `validate` says so)."""
        paths = linear_module_paths(architecture)
        return [name for name in self.exclude if any(module_matches(p, name) for p in paths)]

    def scheme_for(self, training: bool = False) -> Scheme:
        """The quantization scheme: ranges by calibration.method, or (`training`: QAT, and the quantization after
        it, which must store the weights QAT computed with) by qat.observer."""
        method = OBSERVER_METHODS[self.qat.observer] if training else self.calibration.method
        return Scheme(self.bits, self.scheme, self.granularity, self.group_size, method, self.calibration.percentile)
