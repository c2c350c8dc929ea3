"""Per-parameter settings: the default weight-decay rule plus optional overrides by name pattern.

Every parameter gets two numbers, its learning-rate scale and its weight decay:

    lr_scale     = 1.0
    weight_decay = the optimizer's weight_decay if ndim >= 2 else 0.0     (matrices decay, biases/LN do not)

A list of override rules can change them for parameters whose name matches a shell-style pattern (fnmatch):

    [{"pattern": "transformer.h.*.attn.*", "lr_scale": 0.5, "weight_decay": 0.0}]

The first rule that matches a parameter wins; a rule sets only the keys it names. A rule whose pattern matches
no parameter is an error (a typo there would otherwise silently change nothing).

PyTorch's spellings of the parameters become names and rules too (`named_and_rules`): `model.parameters()`, bare
tensors, and param groups `[{"params": [...], "lr": 1e-4, "weight_decay": 0.0}, ...]`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any, NamedTuple

from minitrain.autograd.parameters import ParameterBuffer, gets_weight_decay
from minitrain.autograd.tensor import Tensor
from minitrain.common.errors import ArgumentError

RULE_KEYS = ("pattern", "lr_scale", "weight_decay")
TORCH_GROUP_KEYS = ("params", "lr", "weight_decay")


class Setting(NamedTuple):
    """What one parameter's update uses: lr = optimizer.lr · lr_scale, and its own weight decay."""

    lr_scale: float
    weight_decay: float


def resolve_settings(shapes: Mapping[str, tuple[int, ...]], weight_decay: float,
                     rules: Sequence[Mapping[str, object]] | None = None) -> dict[str, Setting]:
    """Map each parameter name to its `Setting`, applying the default decay rule and then the override rules."""
    rules = list(rules or [])
    for i, rule in enumerate(rules):
        _check_rule(i, rule)
    settings = {}
    used = [False] * len(rules)
    for name, shape in shapes.items():
        setting = Setting(1.0, weight_decay if gets_weight_decay(shape) else 0.0)
        for i, rule in enumerate(rules):
            if fnmatchcase(name, str(rule["pattern"])):
                used[i] = True
                setting = Setting(float(rule.get("lr_scale", setting.lr_scale)),
                                  float(rule.get("weight_decay", setting.weight_decay)))
                break
        settings[name] = setting
    for i, rule in enumerate(rules):
        if not used[i]:
            raise ArgumentError(f"optimizer.groups[{i}].pattern: '{rule['pattern']}' matches no parameter")
    return settings


def _check_rule(i: int, rule: Mapping[str, object]) -> None:
    where = f"optimizer.groups[{i}]"
    if not isinstance(rule, Mapping):
        raise ArgumentError(f"{where}: expected a mapping with keys {', '.join(RULE_KEYS)}")
    for key in rule:
        if key not in RULE_KEYS:
            raise ArgumentError(f"{where}.{key}: unknown key (valid: {', '.join(RULE_KEYS)})")
    if not isinstance(rule.get("pattern"), str):
        raise ArgumentError(f"{where}.pattern: required, a name pattern such as 'transformer.h.*.attn.*'")
    for key in ("lr_scale", "weight_decay"):
        value = rule.get(key, 0.0)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ArgumentError(f"{where}.{key}: must be a number >= 0, got {value!r}")


def named_and_rules(
    params: Iterable[Any], lr: float
) -> tuple[list[tuple[str, Tensor]], list[dict[str, object]], ParameterBuffer | None]:
    """(name, parameter) pairs, PyTorch's param groups as rules, and the flat buffer, of what an optimizer was given:
    (name, parameter) pairs as they are; `model.parameters()` with the names and buffer it holds (nn.module.Parameters);
    bare tensors, or groups of them, named "0", "1", ... as PyTorch's optimizer state numbers them, with a group's
    lr as lr_scale = its lr / `lr` and its weight_decay for all its parameters. Frozen ones given bare are left out:
    PyTorch skips a parameter without a gradient, where minitrain would still decay it."""
    if isinstance(params, Tensor):
        raise ArgumentError("optimizer: give it a list of parameters, not one tensor (as PyTorch asks too)")
    if hasattr(params, "named"):
        return [(n, p) for n, p in params.named if p.requires_grad], [], params.buffer
    params = list(params)
    if all(isinstance(item, tuple) for item in params):
        return params, [], None
    named, rules, count = [], [], 0
    for i, group in enumerate(params if isinstance(params[0], Mapping) else [{"params": params}]):
        unknown = sorted(set(group) - set(TORCH_GROUP_KEYS)) if isinstance(group, Mapping) else ["(not a dict)"]
        if unknown or "params" not in group:
            raise ArgumentError(f"optimizer param group {i}: {unknown or 'no params'}: a group is a dict with 'params' "
                                "and may set 'lr' and 'weight_decay'; set every other setting on the optimizer")
        given = [group["params"]] if isinstance(group["params"], Tensor) else list(group["params"])
        mine = [(str(count + k), p) for k, p in enumerate(given) if p.requires_grad]
        count += len(given)
        setting = {"lr_scale": group["lr"] / lr} if "lr" in group else {}
        setting |= {"weight_decay": group["weight_decay"]} if "weight_decay" in group else {}
        named += mine
        rules += [{"pattern": name, **setting} for name, _ in mine if setting]
    if len({id(p) for _, p in named}) < len(named):
        raise ArgumentError("optimizer: a parameter is given twice (PyTorch refuses this too)")
    return named, rules, None
