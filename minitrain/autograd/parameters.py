"""One flat array for all of a model's parameters, and one for their gradients (the llm.c layout).

A model has a few dozen parameter arrays of different shapes. Keeping each in its own allocation means that
zeroing the gradients, measuring their global norm and running the optimizer are each a Python loop over a few
dozen small arrays. Instead, `ParameterBuffer` copies every parameter into ONE contiguous 1-D array `data` and
gives each parameter a shaped *view* into it (no copy: writing through the view writes the flat array). The
gradients get a second flat array `grad` with the same layout. Then

    zero_grad         = grad.fill(0)                      one pass
    global grad norm  = sqrt(grad · grad)                 one pass
    AdamW             = one fused kernel call per group   (decay group, no-decay group)

Layout: parameters that get weight decay (ndim >= 2: weight matrices and embeddings) come first, in the order
given, then the rest (biases, LayerNorm gains and shifts), then the frozen parameters, which are never trained.
So each group is one contiguous slice, `decay_slice` and `no_decay_slice`, and an optimizer can update a whole
group with one call. `grad` covers only the trainable part: frozen parameters have no gradient at all.

    data = [ wte | wpe | h.0.attn.c_attn.weight | ... || h.0.ln_1.weight | h.0.ln_1.bias | ... || frozen ... ]
           <------------- decay_slice -------------><------------ no_decay_slice -------------->
           <------------------------------ trainable_slice = grad's layout ------------------->

`ParameterBuffer.pack(model.named_parameters())` builds the buffer from a model's parameter tensors and makes
each tensor a view into it (what `nn.Module.pack_parameters()` calls).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np


def gets_weight_decay(shape: tuple[int, ...]) -> bool:
    """The default decay rule: matrices and embeddings (ndim >= 2) decay; biases and LayerNorm (1-D) do not.

    Decaying a bias or a LayerNorm gain pulls it towards 0, which only fights the normalisation; the
    matrices are where weight decay regularises. Optimizers use this same rule, so the buffer's groups and
    the optimizer's groups agree.
    """
    return len(shape) >= 2


class ParamView(NamedTuple):
    """The shaped views of one parameter into the flat buffers (grad is None for a frozen parameter)."""

    data: np.ndarray
    grad: np.ndarray | None


class ParameterBuffer:
    """All parameters in one flat array `data`, all gradients in one flat array `grad` (same layout).

    `ParameterBuffer(named_arrays, frozen=names)` copies each array in; afterwards the flat arrays are the only
    storage and `views(name)` gives a parameter's shaped data and grad views. `ParameterBuffer.pack(...)` does
    that for a model's parameter tensors and rebinds each tensor to its views, so that backward accumulates
    straight into the flat gradient.
    """

    def __init__(
        self, named_arrays: Sequence[tuple[str, np.ndarray]], dtype: type = np.float32, frozen: Collection[str] = ()
    ) -> None:
        names = [name for name, _ in named_arrays]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"duplicate parameter names: {duplicates}")
        # Stable partition: decay group first, then the rest, then the frozen, each in the order given.
        arrays = [(n, np.asarray(a)) for n, a in named_arrays]
        decay = [(n, a) for n, a in arrays if n not in frozen and gets_weight_decay(a.shape)]
        rest = [(n, a) for n, a in arrays if n not in frozen and not gets_weight_decay(a.shape)]
        still = [(n, a) for n, a in arrays if n in frozen]
        ordered = decay + rest + still

        self.names: list[str] = [name for name, _ in decay + rest]  # the trainable ones, in layout order
        self.frozen_names: list[str] = [name for name, _ in still]
        self.shapes: dict[str, tuple[int, ...]] = {name: a.shape for name, a in ordered}
        self._slices: dict[str, slice] = {}
        offset = 0
        for name, array in ordered:
            self._slices[name] = slice(offset, offset + array.size)
            offset += array.size
        n_decay = sum(a.size for _, a in decay)
        n_trainable = n_decay + sum(a.size for _, a in rest)

        self.data = np.empty(offset, dtype=dtype)
        self.grad = np.zeros(n_trainable, dtype=dtype)
        self.decay_slice = slice(0, n_decay)
        self.no_decay_slice = slice(n_decay, n_trainable)
        self.trainable_slice = slice(0, n_trainable)
        self._views = {
            name: ParamView(
                self.data[sl].reshape(self.shapes[name]),
                None if name in self.frozen_names else self.grad[sl].reshape(self.shapes[name]),
            )
            for name, sl in self._slices.items()
        }
        for name, array in ordered:
            self._views[name].data[...] = array

    @classmethod
    def pack(cls, named_tensors: Iterable[tuple[str, Any]]) -> ParameterBuffer:
        """A buffer holding these parameter tensors' current values (those with `requires_grad` False go to the
        frozen part), after which each tensor's `data` and `grad` ARE its views: backward accumulates straight
        into the flat gradient and the optimizer's flat update is what the tensors see."""
        named = list(named_tensors)
        dtypes = {t.data.dtype for _, t in named}
        if len(dtypes) > 1:
            raise ValueError(f"pack: parameters of several dtypes {sorted(map(str, dtypes))}; use one")
        dtype = dtypes.pop() if dtypes else np.dtype(np.float32)
        buffer = cls([(n, t.data) for n, t in named], dtype, frozen={n for n, t in named if not t.requires_grad})
        for name, tensor in named:
            tensor.data, tensor.grad = buffer.views(name)
        return buffer

    @property
    def size(self) -> int:
        """Total number of scalars (parameters) in the buffer, frozen ones included."""
        return self.data.size

    @property
    def trainable_size(self) -> int:
        """Number of trainable scalars: the length of `grad` and of an optimizer's state arrays."""
        return self.grad.size

    def views(self, name: str) -> ParamView:
        """The shaped (data, grad) views of parameter `name`; writes go straight to the flat arrays. A frozen
        parameter's grad is None."""
        return self._views[name]

    def slice_of(self, name: str) -> slice:
        """Where parameter `name` lives in the flat arrays: `data[slice_of(name)]` is it, flattened."""
        return self._slices[name]

    def zero_grad(self) -> None:
        """Set every gradient to 0 in one pass (the views see it, since they share the memory)."""
        self.grad.fill(0)
