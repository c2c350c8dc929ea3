"""`Module` and `Parameter`: how a model holds its weights, names them and hands them to an optimizer.

A model is a tree of modules. Assigning a `Parameter` or a `Module` to an attribute registers it, in the order
of assignment, so a module knows its weights and its children without a list kept by hand:

    class Affine(Module):
        def __init__(self, n, rng):
            super().__init__()
            self.weight = Parameter(rng.normal(0, 1, (n, n)))      # registered as "weight"
            self.norm = LayerNorm(n)                               # a child: its parameters are "norm.weight", ...

        def forward(self, x):
            return self.norm(x @ self.weight)

`named_parameters()` walks the tree depth-first in that order and joins the attribute names with dots, which is
how `transformer.h.0.attn.c_attn.weight` gets its name. `state_dict()` / `load_state_dict()` copy weights out and
in by those names; `freeze(["transformer.wte.*"])` stops gradients by name; `pack_parameters()` moves every
weight into one flat `ParameterBuffer` (minitrain/autograd/parameters.py) so the optimizer updates them in one pass.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NamedTuple

import numpy as np

from minitrain.autograd.parameters import ParameterBuffer
from minitrain.autograd.tensor import Tensor, device_move, no_grad
from minitrain.common.errors import ArgumentError, UserError


def name_matches(name: str, pattern: str) -> bool:
    """A parameter's dotted name is named by `pattern` as a LoRA target names a layer (`module_matches`), through
    the name itself or the path of any module it lives in: "transformer.h.0" or "layers.0" is every parameter of
    block 0, not of block 10; "embed_tokens" the embedding's; "transformer.h.*.attn.*" a glob (`*` crosses dots)."""
    parts = name.split(".")
    return any(module_matches(".".join(parts[:end]), pattern) for end in range(len(parts), 0, -1))


def module_matches(path: str, name: str) -> bool:
    """A module's dotted path is named by `name` (LoRA targets, quantization excludes): equal to it, ending with
    "." + it (PEFT's rule: "c_attn" names every block's c_attn), or matching it as a glob ("transformer.h.0.*")."""
    return path == name or path.endswith("." + name) or fnmatch.fnmatchcase(path, name)


class Parameter(Tensor):
    """A leaf `Tensor` that a `Module` registers as one of its weights; it requires grad unless frozen."""

    __slots__ = ()

    def __init__(self, data: object, requires_grad: bool = True, dtype: np.dtype | None = None) -> None:
        super().__init__(data, requires_grad=requires_grad, dtype=dtype)

    def __repr__(self) -> str:
        frozen = "" if self.requires_grad else ", frozen"
        return f"Parameter(shape={list(self.shape)}, dtype={self.dtype}{frozen})"


class Parameters(list):
    """`model.parameters()`: a list that also holds the names (`named`) and the flat buffer once packed (`buffer`),
    so `AdamW(model.parameters())` is `AdamW(model.named_parameters(), buffer=model.buffer)`."""

    def __init__(self, named: list[tuple[str, Parameter]], buffer: ParameterBuffer | None) -> None:
        super().__init__(p for _, p in named)
        self.named, self.buffer = named, buffer


# What `load_state_dict` returns, as PyTorch's does: the names it did not find, and those it did not use.
class IncompatibleKeys(NamedTuple):
    missing_keys: list[str]
    unexpected_keys: list[str]


class Module:
    """Base class of every layer and model: override `forward`, call the module like a function."""

    training: bool

    def __init__(self) -> None:
        # object.__setattr__: these three are the registry itself, not things to register.
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "training", True)

    def __setattr__(self, name: str, value: Any) -> None:
        registry = self.__dict__
        if "_parameters" not in registry:
            raise AttributeError(f"{type(self).__name__}: call super().__init__() before assigning attributes")
        # Re-assigning a name replaces what it held, in the same place of the order (a dict keeps a key's position).
        if isinstance(value, Parameter):
            self._modules.pop(name, None)
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._parameters.pop(name, None)
            self._modules[name] = value
        else:
            self._parameters.pop(name, None)
            self._modules.pop(name, None)
        object.__setattr__(self, name, value)  # plain attribute access stays plain (fast in forward)

    def __delattr__(self, name: str) -> None:
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        object.__delattr__(self, name)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    cuda, to, cpu = device_move("cuda"), device_move("to"), device_move("cpu")  # PyTorch's: say minitrain's way

    # ----------------------------------------------------------------------------------------------- the tree
    def named_children(self) -> Iterator[tuple[str, Module]]:
        yield from self._modules.items()

    def children(self) -> Iterator[Module]:
        yield from self._modules.values()

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """This module (named `prefix`) and every module below it, depth-first in registration order."""
        yield prefix, self
        for name, child in self._modules.items():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    def get_submodule(self, path: str) -> Module:
        """The module at a dotted path ("transformer.h.0.attn.c_attn"; "" is this module)."""
        module = self
        for name in path.split(".") if path else ():
            if name not in module._modules:
                raise AttributeError(f"{type(self).__name__} has no submodule {path!r} ({name!r} is missing)")
            module = module._modules[name]
        return module

    def set_submodule(self, path: str, module: Module) -> None:
        """Put `module` at a dotted path in place of the one there (how LoRA wraps a layer of a built model)."""
        parent_path, _, name = path.rpartition(".")
        parent = self.get_submodule(parent_path)
        if name not in parent._modules:
            raise AttributeError(f"{type(self).__name__} has no submodule {path!r}")
        setattr(parent, name, module)

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Parameter]]:
        """(dotted name, parameter) for every parameter of the tree, in registration order; a parameter shared
        by two modules is listed once, under its first name."""
        seen: set[int] = set()
        for module_name, module in self.named_modules(prefix):
            for name, p in module._parameters.items():
                if id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{module_name}.{name}" if module_name else name), p

    def parameters(self) -> Parameters:
        return Parameters(list(self.named_parameters()), self.__dict__.get("buffer"))

    def trainable_parameters(self) -> list[tuple[str, Parameter]]:
        """(name, parameter) for the parameters that are not frozen: what an optimizer should update."""
        return [(name, p) for name, p in self.named_parameters() if p.requires_grad]

    def num_parameters(self, trainable_only: bool = False) -> int:
        return sum(p.size for _, p in self.named_parameters() if p.requires_grad or not trainable_only)

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """Call `fn` on every module of the tree (children first, as torch.nn.Module.apply); returns self."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # ----------------------------------------------------------------------------------------------- modes
    def train(self, mode: bool = True) -> Module:
        """Training mode (dropout active) for this module and every module below it; returns self."""
        for module in self.modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self) -> Module:
        """Evaluation mode: dropout off. `minitrain.models.minigpt.inference(model)` also turns off the tape."""
        return self.train(False)

    # ----------------------------------------------------------------------------------------- gradients
    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Freeze (False) or unfreeze (True) every parameter of the tree; returns self. Do it before
        `pack_parameters()` and before building the optimizer, which only update what requires grad."""
        for _, p in self.named_parameters():
            p.requires_grad = requires_grad
            if not requires_grad:
                p.grad = None
        return self

    def freeze(self, patterns: str | Iterable[str]) -> list[str]:
        """Freeze every parameter whose dotted name matches one of `patterns` (`name_matches`: a glob such as
        "transformer.h.*.attn.*", a module path such as "transformer.wte", or its end, "wte"); returns the frozen
        names. A pattern that matches no parameter is a ValueError naming it: a typo must not leave a model
        unfrozen."""
        patterns = [patterns] if isinstance(patterns, str) else list(patterns)
        named = list(self.named_parameters())
        unmatched = [pattern for pattern in patterns if not any(name_matches(n, pattern) for n, _ in named)]
        if unmatched:
            example = named[0][0] if named else "(this module has no parameters)"
            raise ArgumentError(f"freeze: {', '.join(map(repr, unmatched))} matches no parameter (names look like "
                             f"{example!r})")
        frozen = [name for name, _ in named if any(name_matches(name, pattern) for pattern in patterns)]
        for name, p in named:
            if name in frozen:
                p.requires_grad, p.grad = False, None
        return frozen

    def zero_grad(self) -> None:
        """Set every gradient to 0 (one pass over the flat gradient once the parameters are packed)."""
        buffer = self.__dict__.get("buffer")
        if buffer is not None:
            buffer.zero_grad()
            return
        for _, p in self.named_parameters():
            if p.grad is not None:
                p.grad.fill(0)

    def pack_parameters(self) -> ParameterBuffer:
        """Move every parameter into one flat `ParameterBuffer` (trainable ones first, frozen ones after) and
        make each parameter's data, and its gradient, a view into it; the buffer is also kept as `self.buffer`.

        Call it once the model is built and frozen as wanted; calling it again re-packs (the values are kept).
        Then zeroing, the gradient norm and AdamW are single passes over the flat arrays.
        """
        self.buffer = ParameterBuffer.pack(self.named_parameters())
        return self.buffer

    # ---------------------------------------------------------------------------------------------- state
    def state_dict(self, copy: bool = True) -> dict[str, np.ndarray]:
        """name -> a copy of every parameter (frozen ones included; `copy=False`: its own array), in order."""
        return {name: p.data.copy() if copy else p.data for name, p in self.named_parameters()}

    def load_state_dict(self, state_dict: Mapping[str, np.ndarray], strict: bool = True, *,
                        source: str = "state dict") -> IncompatibleKeys:
        """Copy every tensor in, in place (packed parameters stay views of the flat buffer); returns the missing and
        unexpected names, as PyTorch does.

        A mis-shaped tensor, or with `strict` a missing or unexpected one, is one UserError that lists them all;
        nothing is copied then.
        """
        params = dict(self.named_parameters())
        keys = IncompatibleKeys([n for n in params if n not in state_dict], [n for n in state_dict if n not in params])
        problems = [f"missing tensor '{n}'" for n in keys.missing_keys] if strict else []
        problems += [f"unexpected tensor '{n}'" for n in keys.unexpected_keys] if strict else []
        problems += [
            f"tensor '{n}' has shape {list(np.shape(a))}, the model expects {list(params[n].shape)}"
            for n, a in state_dict.items() if n in params and np.shape(a) != params[n].shape
        ]  # fmt: skip
        if problems:
            raise UserError(f"{source} does not fit this {type(self).__name__}: " + "; ".join(problems))
        for name, array in state_dict.items():
            if name in params:
                params[name].data[...] = array
        return keys

    # ---------------------------------------------------------------------------------------------- repr
    def extra_repr(self) -> str:
        """The settings shown between the parentheses of this module's line in `repr(model)`."""
        return ""

    def __repr__(self) -> str:
        """The tree, one module per line, with each module's own parameters (shape, count, frozen) and, on the
        first line, the totals."""
        total, trainable = self.num_parameters(), self.num_parameters(trainable_only=True)
        head = f"{self._line()}  # {total:,} parameters" + (f", {trainable:,} trainable" if trainable < total else "")
        return "\n".join([head, *self._tree_lines("  ")])

    def _line(self) -> str:
        own = [f"{name} {list(p.shape)}" + ("" if p.requires_grad else " frozen")
               for name, p in self._parameters.items()]  # fmt: skip
        count = sum(p.size for p in self._parameters.values())
        return f"{type(self).__name__}({self.extra_repr()})" + (f"  {', '.join(own)}: {count:,}" if own else "")

    def _tree_lines(self, indent: str) -> list[str]:
        lines = []
        for name, child in self._modules.items():
            lines.append(f"{indent}({name}): {child._line()}")
            lines += child._tree_lines(indent + "  ")
        return lines


@contextmanager
def inference(model: Module) -> Iterator[None]:
    """`with inference(model):` eval mode (no dropout) and no tape for the block; the model's mode is restored
    after it, even on an error. Evaluation, exact match and sampling all run the model this way."""
    was_training = model.training
    model.eval()
    try:
        with no_grad():
            yield
    finally:
        if was_training:
            model.train()
