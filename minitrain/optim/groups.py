"""Per-parameter settings: the default weight-decay rule plus optional overrides by name pattern.

Every parameter gets two numbers, its learning-rate scale and its weight decay:

    lr_scale     = 1.0
    weight_decay = the optimizer's weight_decay if ndim >= 2 else 0.0     (matrices decay, biases/LN do not)

A list of override rules can change them for parameters whose name matches a shell-style pattern (fnmatch):

    [{"pattern": "transformer.h.*.attn.*", "lr_scale": 0.5, "weight_decay": 0.0}]

The first rule that matches a parameter wins; a rule sets only the keys it names. A rule whose pattern matches
no parameter is an error (a typo there would otherwise silently change nothing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import NamedTuple

from minitrain.autograd.parameters import gets_weight_decay
from minitrain.common.errors import ArgumentError

RULE_KEYS = ("pattern", "lr_scale", "weight_decay")


class Setting(NamedTuple):
    """What one parameter's update uses: lr = optimizer.lr · lr_scale, and its own weight decay."""

    lr_scale: float
    weight_decay: float


def resolve_settings(
    shapes: Mapping[str, tuple[int, ...]],
    weight_decay: float,
    rules: Sequence[Mapping[str, object]] | None = None,
) -> dict[str, Setting]:
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
                setting = Setting(
                    float(rule.get("lr_scale", setting.lr_scale)),
                    float(rule.get("weight_decay", setting.weight_decay)),
                )
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
