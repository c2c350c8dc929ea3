"""`build_optimizer(type, named_params, **keys)`: the one place a config's optimizer section becomes an object.

Keys are each optimizer's own keyword arguments (e.g. adamw: lr, beta1, beta2, eps, weight_decay, groups,
buffer). An unknown type or a key the chosen optimizer does not take is a UserError naming it.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import import_module

from minitrain.common.registry import check_choice, keyword_defaults
from minitrain.optim.optimizer import Optimizer, Parameter

# One line per optimizer: its module of minitrain/optim/ and class; the class's `name` is its `optimizer.type`.
OPTIMIZER_CLASSES = (
    "adamw.AdamW",
    "adam.Adam",
    "sgd.SGD",
    "rmsprop.RMSprop",
    "adagrad.Adagrad",
    "lamb.Lamb",
)


def _load(path: str) -> type[Optimizer]:
    module, name = path.split(".")
    return getattr(import_module(f"minitrain.optim.{module}"), name)


OPTIMIZERS: dict[str, type[Optimizer]] = {cls.name: cls for cls in map(_load, OPTIMIZER_CLASSES)}


def optimizer_keys(type: str) -> list[str]:
    """The keyword arguments optimizer `type` accepts (besides the parameters)."""
    return list(keyword_defaults(OPTIMIZERS[type], skip=("named_params",)))


def build_optimizer(type: str, named_params: Iterable[tuple[str, Parameter]], **keys: object) -> Optimizer:
    """Construct optimizer `type` (a name of `OPTIMIZERS`: "adamw", "sgd", ...) with `keys`."""
    check_choice("optimizer", "optimizer", OPTIMIZERS, type, keys, skip=("named_params",))
    return OPTIMIZERS[type](named_params, **keys)
