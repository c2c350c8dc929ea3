"""`build_optimizer(type, named_params, **keys)`: the one place a config's optimizer section becomes an object.

Keys are each optimizer's own keyword arguments (e.g. adamw: lr, beta1, beta2, eps, weight_decay, groups,
buffer). An unknown type or a key the chosen optimizer does not take is a UserError naming it.
"""

from __future__ import annotations

from collections.abc import Iterable

from minitrain.common.registry import Registry, check_choice, load
from minitrain.optim.optimizer import Optimizer, Parameter

# One line per optimizer: its module of minitrain/optim/ and class; the class's `name` is its `optimizer.type`.
OPTIMIZER_CLASSES = (
    "adamw.AdamW",
    "adam.Adam",
    "sgd.SGD",
    "rmsprop.RMSprop",
    "adagrad.Adagrad",
    "lamb.Lamb",
    "lbfgs.LBFGS",
    "cg.ConjugateGradient",
)
OPTIMIZERS: Registry[type[Optimizer]] = Registry("optimizer", [load(f"minitrain.optim.{c}") for c in OPTIMIZER_CLASSES])


def build_optimizer(type: str, named_params: Iterable[tuple[str, Parameter]], **keys: object) -> Optimizer:
    """Construct optimizer `type` (a name of `OPTIMIZERS`: "adamw", "sgd", ...) with `keys`."""
    check_choice("optimizer", OPTIMIZERS, type, keys, skip=("named_params",))
    return OPTIMIZERS[type](named_params, **keys)
