"""Adding LoRA adapters to a built model, saving and loading just the adapters, and merging them into the base.

    model = build_model(config); model.load_state_dict(base_weights)
    add_adapters(model, LoraSettings(rank=4, alpha=8, targets=["transformer.h.0.attn.c_attn", ...]), rng=rng)
    ... train: only the adapters (and the biases `bias` names) require grad ...
    adapter_state(model)          the tensors a LoRA run saves: every lora_A and lora_B, and the trained biases
    merge_adapters(model)         every LoRALinear becomes a Linear holding W + (alpha/rank)·A·B
    merged_state(base, adapter, settings, linear_paths)   the same weights from the arrays, building no model

With `quantize_base` (QLoRA) every linear layer of the base, adapted or not, is first replaced by a frozen
`Linear4Bit`; merging dequantizes it, so the merged model computes what the adapted one did.

The settings, with the base the run started from, are kept in `model.config["lora"]`, which every model file and
checkpoint records: a file whose model config has "lora" holds an adapted model, and says how to rebuild it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from minitrain.common.errors import UserError
from minitrain.lora.targets import linear_paths
from minitrain.nn import Linear, Module
from minitrain.nn.lora import LoRALinear
from minitrain.nn.quantized import Linear4Bit
from minitrain.quant.blockwise import quantize_4bit

BIAS_MODES = ("none", "all", "lora_only")


@dataclass(frozen=True)
class LoraSettings:
    """One adaptation: rank, alpha, dropout, which layers (module paths), which biases train, A's init, QLoRA;
    and the base it adapts (`base`: how the run named it; `base_digest`: `state_digest` of its weights)."""

    rank: int
    alpha: float
    targets: tuple[str, ...]
    dropout: float = 0.0
    bias: str = "none"
    init_weights: str = "kaiming"
    quantize_base: bool = False
    quant_type: str = "nf4"
    double_quantize: bool = False
    base: str | None = None
    base_digest: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)  # unknown keys of a newer file, kept

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["targets"] = list(self.targets)
        return {**data.pop("extra"), **data}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LoraSettings:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k != "extra"}
        known["targets"] = tuple(known.get("targets", ()))
        return cls(**known, extra={k: v for k, v in data.items() if k not in cls.__dataclass_fields__})

    @property
    def scaling(self) -> float:
        return self.alpha / self.rank


def state_digest(state: Mapping[str, np.ndarray]) -> str:
    """sha256 (16 hex digits) of a state dict's names, shapes and float32 values: the same weights, whatever file
    (model file, export folder, Hub) they came from, give the same digest."""
    h = hashlib.sha256()
    for name in sorted(state):
        array = np.ascontiguousarray(state[name], dtype=np.float32)
        h.update(f"{name}:{list(array.shape)};".encode())
        h.update(array.tobytes())
    return h.hexdigest()[:16]


def settings_of(model: Module) -> LoraSettings | None:
    """The LoRA settings a model (or a model config) records, None for a plain model."""
    config = model if isinstance(model, Mapping) else getattr(model, "config", {})
    lora = config.get("lora")
    return LoraSettings.from_dict(lora) if isinstance(lora, Mapping) else None


def add_adapters(model: Module, settings: LoraSettings, rng: np.random.Generator) -> Module:
    """Adapt `model` in place (and return it): freeze every weight, quantize the linear layers when
    `settings.quantize_base`, wrap each target in a LoRALinear (A drawn from `rng`, in model order), unfreeze
    the biases `settings.bias` names, and record the settings in model.config["lora"]."""
    if settings_of(model) is not None:
        raise UserError("this model already has LoRA adapters: merge them first (minitrain merge-adapters)")
    paths = linear_paths(model)
    unknown = sorted(set(settings.targets) - set(paths))
    if unknown or not settings.targets:
        raise UserError(f"LoRA targets {unknown or '(none)'} are not linear layers of this model (they are "
                        f"{', '.join(paths) or 'none'})", 2)
    if settings.bias not in BIAS_MODES:
        raise UserError(f"lora.bias must be one of {', '.join(BIAS_MODES)}, got {settings.bias!r}", 2)
    model.requires_grad_(False)
    for path in paths:
        layer = model.get_submodule(path)
        if settings.quantize_base:
            layer = Linear4Bit(layer, settings.quant_type, settings.double_quantize)
            model.set_submodule(path, layer)
        if path in settings.targets:
            model.set_submodule(path, LoRALinear(layer, settings.rank, settings.alpha, settings.dropout, rng=rng,
                                                 init=settings.init_weights))
    model.config = {**getattr(model, "config", {}), "lora": settings.as_dict()}  # any Module: a user's has none
    trained = set(adapter_names(model))
    for name, p in model.named_parameters():
        p.requires_grad = name in trained
    return model


def adapter_names(model: Module) -> list[str]:
    """The parameters an adapter holds, in model order (`adapter_names_in` of the model's parameter names)."""
    settings = settings_of(model)
    return [] if settings is None else adapter_names_in([name for name, _ in model.named_parameters()], settings)


def adapter_names_in(names: Iterable[str], settings: LoraSettings) -> list[str]:
    """Of an adapted model's parameter names, the adapter's: each target's lora_A and lora_B, and the biases the
    `bias` setting trains (all: every `*.bias`, as PEFT; lora_only: the adapted layers'; none: no bias)."""
    adapted = tuple(f"{path}." for path in settings.targets)
    chosen = []
    for name in names:
        own = name.startswith(adapted)
        if (own and name.rsplit(".", 1)[-1] in ("lora_A", "lora_B")) or (name.endswith(".bias") and (
                settings.bias == "all" or (settings.bias == "lora_only" and own))):
            chosen.append(name)
    return chosen


def adapter_state(model: Module) -> dict[str, np.ndarray]:
    """name -> a copy of every adapter tensor (`adapter_names`): what a LoRA run's model file holds."""
    params = dict(model.named_parameters())
    return {name: params[name].data.copy() for name in adapter_names(model)}


def load_adapter_state(model: Module, tensors: Mapping[str, np.ndarray], source: str) -> None:
    """Copy an adapter's tensors into an adapted model; a missing, unexpected or mis-shaped tensor is one error."""
    expected = {name: p for name, p in model.named_parameters() if name in adapter_names(model)}
    problems = [f"missing tensor '{n}'" for n in expected if n not in tensors]
    problems += [f"unexpected tensor '{n}'" for n in tensors if n not in expected]
    problems += [f"tensor '{n}' has shape {list(a.shape)}, the adapter expects {list(expected[n].shape)}"
                 for n, a in tensors.items() if n in expected and a.shape != expected[n].shape]
    if problems:
        raise UserError(f"{source}: does not fit its LoRA settings: " + "; ".join(problems))
    for name, array in tensors.items():
        expected[name].data[...] = array


def merge_adapters(model: Module) -> Module:
    """Fold every adapter into its layer, in place: a LoRALinear becomes a Linear with W + (alpha/rank)·A·B and
    its (possibly trained) bias, a 4-bit base layer a Linear with its dequantized weight. Returns the plain model
    (model.config without "lora"); it computes what the adapted model did, up to float rounding."""
    for path, module in list(model.named_modules()):
        if isinstance(module, LoRALinear):
            weight = _float_weight(module.base_layer) + module.delta_weight()
            model.set_submodule(path, Linear.from_arrays(weight, _bias(module.base_layer), module.activation))
        elif isinstance(module, Linear4Bit) and not path.endswith(".base_layer"):
            model.set_submodule(path, Linear.from_arrays(module.weight.dequantize(), _bias(module), module.activation))
    model.config = {k: v for k, v in model.config.items() if k != "lora"}
    model.__dict__.pop("buffer", None)  # a packed buffer would still hold the adapters; pack again to train
    model.requires_grad_(True)
    return model


def merged_state(base: Mapping[str, np.ndarray], adapter: Mapping[str, np.ndarray], settings: LoraSettings,
                 linear_paths: Sequence[str]) -> dict[str, np.ndarray]:
    """The state dict `merge_adapters` leaves, from the arrays alone: `base` the base's weights (its names and
    order), `adapter` a LoRA run's tensors (`adapter_state`), `linear_paths` the model's linear layers. A target's
    weight becomes W + (alpha/rank)·A·B (W (in, out), A (in, r), B (r, out), float32 as the layers compute), every
    linear weight first its dequantized 4-bit blocks under QLoRA, and a bias the adapter trained replaces the
    base's: the same bytes as building the adapted model and merging it."""
    state = {name: np.asarray(array, dtype=np.float32) for name, array in base.items()}
    if settings.quantize_base:
        for path in linear_paths:
            weight = f"{path}.weight"
            state[weight] = quantize_4bit(state[weight], settings.quant_type, settings.double_quantize).dequantize()
    for name, array in adapter.items():
        if not name.endswith((".lora_A", ".lora_B")):
            state[name.replace(".base_layer.", ".")] = np.asarray(array, dtype=np.float32)
    for path in settings.targets:
        a, b = (np.asarray(adapter[f"{path}.lora_{x}"], dtype=np.float32) for x in "AB")
        state[f"{path}.weight"] = state[f"{path}.weight"] + (settings.scaling * (a @ b)).astype(np.float32)
    return state


def _float_weight(layer: Linear | Linear4Bit) -> np.ndarray:
    return layer.weight.dequantize() if isinstance(layer, Linear4Bit) else layer.weight.data


def _bias(layer: Linear | Linear4Bit) -> np.ndarray | None:
    return None if layer.bias is None else layer.bias.data.copy()


def base_weight_bytes(model: Module) -> int:
    """Bytes the linear layers' weights take as held: float arrays, or 4-bit codes with their scales."""
    return sum(module.weight.data.nbytes if isinstance(module, Linear) else module.weight.nbytes
               for _, module in model.named_modules() if isinstance(module, Linear | Linear4Bit))


def check_base(settings: LoraSettings, base_state: Mapping[str, np.ndarray], where: str, base: str) -> None:
    """UserError unless `base_state` holds the weights the adapter was trained on (the `base_digest` it records)."""
    digest = state_digest(base_state)
    if settings.base_digest is not None and digest != settings.base_digest:
        raise UserError(f"{where}: its base {base} holds other weights than the adapter was trained on (digest "
                        f"{digest}, the adapter records {settings.base_digest})", 2)


def with_base(settings: LoraSettings, base: str | None, base_state: Mapping[str, np.ndarray]) -> LoraSettings:
    """The settings with the base they adapt recorded (its name and `state_digest`)."""
    return replace(settings, base=base, base_digest=state_digest(base_state))
