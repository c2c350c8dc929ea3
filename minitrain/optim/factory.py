"""`build_optimizer(type, named_params, **keys)`: the one place a config's optimizer section becomes an object.

Keys are each optimizer's own keyword arguments (e.g. adamw: lr, beta1, beta2, eps, weight_decay, groups,
buffer). An unknown type or a key the chosen optimizer does not take is a UserError naming it.
"""

from __future__ import annotations

from collections.abc import Iterable

from minitrain.common.registry import check_choice, keyword_defaults
from minitrain.optim.adagrad import Adagrad
from minitrain.optim.adam import Adam
from minitrain.optim.adamw import AdamW
from minitrain.optim.base import Optimizer, Parameter
from minitrain.optim.lamb import Lamb
from minitrain.optim.rmsprop import RMSprop
from minitrain.optim.sgd import SGD

OPTIMIZERS: dict[str, type[Optimizer]] = {cls.name: cls for cls in (AdamW, Adam, SGD, RMSprop, Adagrad, Lamb)}


def optimizer_keys(type: str) -> list[str]:
    """The keyword arguments optimizer `type` accepts (besides the parameters)."""
    return list(keyword_defaults(OPTIMIZERS[type], skip=("named_params",)))


def build_optimizer(type: str, named_params: Iterable[tuple[str, Parameter]], **keys: object) -> Optimizer:
    """Construct optimizer `type` ("adamw", "adam", "sgd", "rmsprop", "adagrad", "lamb") with `keys`."""
    check_choice("optimizer", "optimizer", OPTIMIZERS, type, keys, skip=("named_params",))
    return OPTIMIZERS[type](named_params, **keys)
