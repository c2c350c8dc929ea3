"""Containers: modules that hold other modules, so a stack or a table of layers registers every parameter.

A plain Python list of layers would hide them from `named_parameters()` (the module would not know they are its
children); these containers register each one under its index or key, which becomes part of the dotted name:
`h.0.attn.c_attn.weight`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from minitrain.nn.module import Module


class ModuleList(Module):
    """A list of modules, named "0", "1", ...; the owner decides how to call them (e.g. a loop over blocks)."""

    def __init__(self, modules: Iterable[Module] = ()) -> None:
        super().__init__()
        for module in modules:
            self.append(module)

    def append(self, module: Module) -> ModuleList:
        setattr(self, str(len(self._modules)), module)
        return self

    def __getitem__(self, i: int) -> Module:
        return list(self._modules.values())[i]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())


class ModuleDict(Module):
    """Modules by name, reachable as attributes (`transformer.wte`) or items (`transformer["wte"]`)."""

    def __init__(self, modules: Mapping[str, Module] | None = None, **named: Module) -> None:
        super().__init__()
        for name, module in {**(modules or {}), **named}.items():
            setattr(self, name, module)

    def __getitem__(self, name: str) -> Module:
        return self._modules[name]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def items(self) -> Iterator[tuple[str, Module]]:
        return iter(self._modules.items())


class Sequential(ModuleList):
    """y = layer_n(... layer_1(layer_0(x))): the layers applied in order; they are named "0", "1", ..."""

    def __init__(self, *layers: Module) -> None:
        super().__init__(layers)

    def forward(self, x: Any) -> Any:
        for layer in self._modules.values():
            x = layer(x)
        return x
