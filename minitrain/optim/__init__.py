"""Optimizers with the semantics of `torch.optim`, on flat state buffers: one concept per module.

adamw.AdamW   adam.Adam   sgd.SGD   rmsprop.RMSprop   adagrad.Adagrad   lamb.Lamb
lbfgs.LBFGS   cg.ConjugateGradient   (full-batch: step(closure); full_batch, line_search)
base.Optimizer (shared machinery), groups (per-parameter settings), factory (the registry, build_optimizer),
schedule (learning-rate schedules and their registry), clip (gradient clipping by norm and by value)
"""

from minitrain.optim.adagrad import Adagrad
from minitrain.optim.adam import Adam
from minitrain.optim.adamw import AdamW
from minitrain.optim.cg import ConjugateGradient
from minitrain.optim.factory import OPTIMIZERS, build_optimizer
from minitrain.optim.lamb import Lamb
from minitrain.optim.lbfgs import LBFGS
from minitrain.optim.optimizer import Optimizer
from minitrain.optim.rmsprop import RMSprop
from minitrain.optim.sgd import SGD

__all__ = [
    "LBFGS",
    "OPTIMIZERS",
    "SGD",
    "Adagrad",
    "Adam",
    "AdamW",
    "ConjugateGradient",
    "Lamb",
    "Optimizer",
    "RMSprop",
    "build_optimizer",
]
