"""What every optimizer shares, so that an optimizer's file holds only its rule (tests/extending/lion.py is a whole
one): its hyper-parameters, as annotated class attributes with their defaults (every optimizer has lr and
weight_decay), `state_names` (its state buffers, each starting at 0; or it overrides `_state_init`) and one method,

    _update(data, grad, state, lr, weight_decay)        all arrays 1-D float32, updated in place,

which applies its rule to a *segment*: a 1-D run of parameters that share one lr and one weight decay. Every
subclass is made a dataclass, so its hyper-parameters are its constructor's keywords, in order, after the
parameters and before `*, groups=None, buffer=None, betas=None` (PyTorch's `(beta1, beta2)`); each `float` one is
checked (`BOUNDS`, else [0, ∞)) and stored as a float, each `bool` one as a bool.

Two layouts, same results:
- Parameters in their own arrays (`(name, tensor)` pairs, or PyTorch's spellings: `groups.named_and_rules`): each
  parameter is its own segment.
- Parameters living in one `ParameterBuffer` (pass `buffer=`): consecutive parameters with the same settings
  are merged into ONE segment, a slice of the flat arrays. With the default settings that is two segments,
  the decay group and the no-decay group, so an optimizer step is two calls, whatever the number of
  parameters. (Optimizers whose rule needs per-parameter norms, like LAMB, set `per_parameter = True`.)

State buffers are flat too: one float32 array per buffer name, laid out like the parameters, so a segment's
state is a slice of it. `state_dict()` hands them out per parameter, named `<buffer>.<parameter name>`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, InitVar, dataclass, fields
from math import inf
from typing import Any, ClassVar, Protocol

import numpy as np

from minitrain.autograd.parameters import ParameterBuffer
from minitrain.common.errors import ArgumentError, UserError
from minitrain.optim.groups import Setting, named_and_rules, resolve_settings

# The hyper-parameters whose range is not [0, ∞), by name: (low, high, open_low, open_high).
BOUNDS = {
    "lr": (0.0, inf, True, False),
    "beta1": (0.0, 1.0, False, True),
    "beta2": (0.0, 1.0, False, True),
    "alpha": (0.0, 1.0, False, True),
    "dampening": (0.0, 1.0, False, False),
}


class Parameter(Protocol):
    """What an optimizer needs of a parameter (minitrain's `Tensor` has both)."""

    data: np.ndarray
    grad: np.ndarray | None


@dataclass
class _Segment:
    """A run of parameters updated by one `_update` call."""

    setting: Setting
    state: dict[str, np.ndarray]  # 1-D views into the flat state arrays
    flat: tuple[np.ndarray, np.ndarray] | None  # buffer layout: 1-D views of (data, grad)
    param: tuple[str, Parameter] | None  # own-array layout: the one parameter

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(data, grad) as 1-D arrays that share memory with the parameter."""
        if self.flat is not None:
            return self.flat
        name, p = self.param
        if not p.data.flags.c_contiguous:
            raise RuntimeError(f"parameter {name}: data must be C-contiguous to be updated in place")
        data = p.data.reshape(-1)
        # No gradient (the parameter did not reach the loss): a zero gradient, as after zero_grad().
        grad = np.zeros_like(data) if p.grad is None else p.grad.reshape(-1)
        return data, grad


@dataclass(eq=False, repr=False)
class Optimizer:
    """Base class: `step()`, `zero_grad()`, `lr` / `set_lr()`, `state_dict()` / `load_state_dict()`."""

    name: ClassVar[str]  # the `type` in configs and state dicts, e.g. "adamw"
    per_parameter: ClassVar[bool] = False  # True: never merge parameters into one segment
    full_batch: ClassVar[bool] = False  # True: step(closure) searches along a direction (optim/full_batch.py)
    state_names: ClassVar[tuple[str, ...]] = ()  # the state buffers, each starting at 0 (see `_state_init`)
    named_params: InitVar[Iterable[tuple[str, Parameter]]]
    _: KW_ONLY
    groups: InitVar[Sequence[Mapping[str, object]] | None] = None
    buffer: ParameterBuffer | None = None
    betas: InitVar[tuple[float, float] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dataclass(eq=False, repr=False)(cls)  # its annotated attributes become its constructor's keywords

    def __post_init__(self, named_params: Iterable[tuple[str, Parameter]],
                      groups: Sequence[Mapping[str, object]] | None, betas: tuple[float, float] | None) -> None:
        if betas is not None:
            if not hasattr(self, "beta1"):
                raise ArgumentError(f"optimizer.betas: {self.name} has no betas")
            self.beta1, self.beta2 = betas
        for field in fields(self):
            kind, value = getattr(field.type, "__name__", field.type), getattr(self, field.name)
            if kind == "float":
                check_range(field.name, value, *BOUNDS.get(field.name, ()))
                setattr(self, field.name, float(value))
            elif kind == "bool":
                setattr(self, field.name, bool(value))
        self.params, torch_rules, found_buffer = named_and_rules(named_params, self.lr)
        self.buffer = found_buffer if self.buffer is None else self.buffer
        self.step_count = 0  # number of step() calls so far; the step being taken is step_count after += 1
        shapes = {name: tuple(p.data.shape) for name, p in self.params}
        if len(shapes) != len(self.params):
            raise ValueError("optimizer: duplicate parameter names")
        settings = resolve_settings(shapes, self.weight_decay, [*torch_rules, *(groups or [])])

        buffer = self.buffer
        if buffer is None:
            order, offset, slices = [name for name, _ in self.params], 0, {}
            for name in order:
                slices[name] = slice(offset, offset + int(np.prod(shapes[name])))
                offset += slices[name].stop - slices[name].start
        else:
            self._check_buffer(buffer)
            order, offset = buffer.names, buffer.trainable_size
            slices = {name: buffer.slice_of(name) for name in order}
        self._shapes, self._slices = shapes, slices
        self.state = {key: np.full(offset, value, dtype=np.float32) for key, value in self._state_init().items()}
        self._segments = self._build_segments(order, settings)

    # --------------------------------------------------------------------------------------------- layout
    def _check_buffer(self, buffer: ParameterBuffer) -> None:
        names = {name for name, _ in self.params}
        frozen = sorted(names & set(buffer.frozen_names))
        if frozen:
            raise ValueError(f"optimizer: {frozen} are frozen; give the optimizer model.trainable_parameters()")
        if names != set(buffer.names):
            raise ValueError(f"optimizer: parameters and ParameterBuffer differ: only in params "
                             f"{sorted(names - set(buffer.names))}, only in buffer {sorted(set(buffer.names) - names)}")
        for name, p in self.params:
            self._check_bound(name, p, buffer)

    @staticmethod
    def _check_bound(name: str, p: Parameter, buffer: ParameterBuffer) -> None:
        # The flat update writes buffer.data and reads buffer.grad; if a tensor's data or grad were rebound
        # to another array, training would silently stop touching it. Identity checks are cheap.
        if not getattr(p, "requires_grad", True):
            raise RuntimeError(f"parameter {name} was frozen after the optimizer was built: freeze first, then pack "
                               "the parameters and build the optimizer from the trainable ones")
        view = buffer.views(name)
        if p.data is not view.data or p.grad is not view.grad:
            raise RuntimeError(f"parameter {name}: its data/grad is no longer the ParameterBuffer's view; copy into it "
                               "(p.data[...] = x) instead of rebinding it")

    def _build_segments(self, order: list[str], settings: dict[str, Setting]) -> list[_Segment]:
        params = dict(self.params)
        runs: list[tuple[Setting, list[str]]] = []
        for name in order:
            mergeable = self.buffer is not None and not self.per_parameter
            if mergeable and runs and runs[-1][0] == settings[name]:
                runs[-1][1].append(name)
            else:
                runs.append((settings[name], [name]))
        segments = []
        for setting, names in runs:
            sl = slice(self._slices[names[0]].start, self._slices[names[-1]].stop)
            state = {key: array[sl] for key, array in self.state.items()}
            if self.buffer is not None:
                segments.append(_Segment(setting, state, (self.buffer.data[sl], self.buffer.grad[sl]), None))
            else:
                segments.append(_Segment(setting, state, None, (names[0], params[names[0]])))
        return segments

    # ---------------------------------------------------------------------------------------------- steps
    def _state_init(self) -> dict[str, float]:
        """Each state buffer's name and initial value. Called once the hyper-parameters are checked and stored, so an
        optimizer whose buffers depend on a setting, or whose settings constrain one another (SGD), overrides it."""
        return dict.fromkeys(self.state_names, 0.0)

    def _update(
        self, data: np.ndarray, grad: np.ndarray, state: dict[str, np.ndarray], lr: float, weight_decay: float
    ) -> None:
        raise NotImplementedError

    def step(self) -> None:
        """Apply one update to every parameter from its current `.grad`."""
        if self.buffer is not None:
            for name, p in self.params:
                self._check_bound(name, p, self.buffer)
        self.step_count += 1
        for segment in self._segments:
            data, grad = segment.arrays()
            self._update(data, grad, segment.state, self.lr * segment.setting.lr_scale, segment.setting.weight_decay)

    def zero_grad(self) -> None:
        """Set every gradient to 0 in place (one pass over the flat gradient when there is a buffer)."""
        if self.buffer is not None:
            self.buffer.zero_grad()
            return
        for _, p in self.params:
            if p.grad is not None:
                p.grad.fill(0)

    def set_lr(self, lr: float) -> None:
        """Set the base learning rate (a scheduler calls this before each step); groups scale it."""
        self.lr = float(lr)

    @property
    def param_groups(self) -> None:  # PyTorch's way to change the lr by hand
        raise AttributeError("optimizer.param_groups: minitrain's lr is one number, `optimizer.set_lr(lr)`; each "
                             "group keeps its ratio to it (docs/pytorch-users.md)")

    # ------------------------------------------------------------------------------------------ state I/O
    def state_dict(self, copy: bool = True) -> dict[str, Any]:
        """`{"type", "step", "lr"}` (JSON-serialisable) plus `"buffers"`: `{"<buffer>.<param>": array}` (copies;
        `copy=False`: views of the live state)."""
        buffers = {
            f"{key}.{name}": (np.copy if copy else np.asarray)(array[self._slices[name]].reshape(self._shapes[name]))
            for key, array in self.state.items()
            for name, _ in self.params
        }
        return {"type": self.name, "step": self.step_count, "lr": self.lr, "buffers": buffers}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore from `state_dict()` output; checks everything first, so a bad state changes nothing."""
        for key in ("type", "step", "lr", "buffers"):
            if key not in state:
                raise UserError(f"optimizer state: missing '{key}'")
        if state["type"] != self.name:
            raise UserError(f"optimizer state: saved by '{state['type']}', cannot load into '{self.name}'")
        buffers = state["buffers"]
        expected = {f"{key}.{name}": (key, name) for key in self.state for name, _ in self.params}
        unexpected = sorted(set(buffers) - set(expected))
        if unexpected:
            raise UserError(f"optimizer state: unexpected buffer(s) {', '.join(unexpected)}")
        for full_name, (_, name) in expected.items():
            if full_name not in buffers:
                raise UserError(f"optimizer state: missing buffer '{full_name}'")
            shape = tuple(np.shape(buffers[full_name]))
            if shape != self._shapes[name]:
                expected_shape = list(self._shapes[name])
                raise UserError(f"optimizer state: buffer '{full_name}' has shape {list(shape)}, expected "
                                f"{expected_shape}")
        for full_name, (key, name) in expected.items():
            self.state[key][self._slices[name]] = np.asarray(buffers[full_name], dtype=np.float32).reshape(-1)
        self.step_count = int(state["step"])
        self.lr = float(state["lr"])


def with_l2(grad: np.ndarray, data: np.ndarray, weight_decay: float) -> np.ndarray:
    """g + wd·p: weight decay as an L2 penalty folded into the gradient (Adam, SGD, RMSprop, Adagrad).

    Returns a new array when wd > 0 and `grad` itself otherwise; never writes the caller's gradient.
    """
    return grad + weight_decay * data if weight_decay else grad


def check_range(key: str, value: float, low: float = 0.0, high: float = inf, open_low: bool = False,
                open_high: bool = False) -> None:
    """ValueError naming `optimizer.<key>` unless `value` is a number in [low, high] (open ends excluded)."""
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    if not is_number or value < low or value > high or (open_low and value == low) or (open_high and value == high):
        interval = f"{'(' if open_low else '['}{low}, {high}{')' if open_high else ']'}"
        raise ArgumentError(f"optimizer.{key}: must be in {interval}, got {value!r}")
