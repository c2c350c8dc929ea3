"""`LSTM` and `GRU`: a state carried along a sequence, updated at each step from the step's input and itself.
PyTorch's parameters, names, gate order and return values, so a torch state dict loads unchanged. Each layer is
one `linear` for the input's part of every gate at every step, then one tape op that runs the steps and, in its
backward, back through time (minitrain/autograd/recurrent.py).

Per layer l, with x_t the layer's input at step t and h the state before it (W_ih (G·H, I), W_hh (G·H, H)):

    a = x_t·W_ihᵀ + b_ih        (for all t at once: one matmul)        b = h·W_hhᵀ + b_hh
    LSTM, G = 4 (i, f, g, o):   i, f, o = σ(a + b) parts, g = tanh(a + b) part,  c' = f·c + i·g,  h' = o·tanh(c')
    GRU, G = 3 (r, z, n):       r = σ(a_r + b_r), z = σ(a_z + b_z), n = tanh(a_n + r·b_n),  h' = (1 − z)·n + z·h
"""

from __future__ import annotations

import math

import numpy as np

from minitrain.autograd import functional as F
from minitrain.autograd.ops import concat, split
from minitrain.autograd.random import or_default
from minitrain.autograd.recurrent import gru_sequence, lstm_sequence
from minitrain.autograd.tensor import Tensor
from minitrain.nn.module import Module, Parameter

State = tuple[Tensor, ...]  # the LSTM's (h, c), the GRU's (h,): each (B, H)


class _Recurrent(Module):
    """The stack of layers both share: x (T, B, I), or (B, T, I) with batch_first -> output (the last layer's h at
    every step, the same layout as x) and the final state of every layer, (L, B, H) each.

    Init, as PyTorch's: every weight and bias ~ U(−1/√H, 1/√H), drawn from `rng` (the training RNG; the default
    generator when not given)."""

    gates: int
    states: int

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, *, rng: np.random.Generator | None = None, dtype: type = np.float32
                 ) -> None:
        super().__init__()
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first = bias, batch_first
        rng, bound = or_default(rng), 1.0 / math.sqrt(hidden_size)
        rows = self.gates * hidden_size
        for layer in range(num_layers):
            shapes = {"weight_ih": (rows, input_size if layer == 0 else hidden_size), "weight_hh": (rows, hidden_size)}
            if bias:
                shapes |= {"bias_ih": (rows,), "bias_hh": (rows,)}
            for name, shape in shapes.items():
                setattr(self, f"{name}_l{layer}", Parameter(rng.uniform(-bound, bound, shape), dtype=dtype))

    def layer(self, a: Tensor, w_hh: Tensor, b_hh: Tensor | None, state: State) -> tuple[Tensor, State]:
        """One layer over the sequence: a (T, B, G·H) the input's part of the gates -> (h at every step (T, B, H),
        the final state)."""
        raise NotImplementedError

    def run(self, x: Tensor, state: list[State] | None) -> tuple[Tensor, list[State]]:
        if x.ndim != 3 or x.shape[-1] != self.input_size:
            raise ValueError(f"{type(self).__name__}: input of shape {x.shape} is not (T, B, {self.input_size}) "
                             f"(or (B, T, {self.input_size}) with batch_first)")
        seq = x.transpose(1, 0, 2) if self.batch_first else x  # (T, B, I)
        zeros = tuple(Tensor(np.zeros((seq.shape[1], self.hidden_size), x.dtype)) for _ in range(self.states))
        finals = []
        for layer in range(self.num_layers):
            p = {name: getattr(self, f"{name}_l{layer}", None) for name in ("weight_ih", "weight_hh", "bias_ih",
                                                                           "bias_hh")}
            a = F.linear(seq, p["weight_ih"].T, p["bias_ih"])  # (T, B, G·H): every step's input part at once
            seq, final = self.layer(a, p["weight_hh"], p["bias_hh"], zeros if state is None else state[layer])
            finals.append(final)  # seq (T, B, H): the next layer's input
        return (seq.transpose(1, 0, 2) if self.batch_first else seq), finals

    @staticmethod
    def stacked(finals: list[State], which: int) -> Tensor:
        """The final state `which` of every layer, (L, B, H)."""
        return concat([state[which].unsqueeze(0) for state in finals], axis=0)

    @staticmethod
    def unstacked(*tensors: Tensor) -> list[State]:
        """(L, B, H) tensors (h0, and c0 for an LSTM) -> each layer's state."""
        return [tuple(t[layer] for t in tensors) for layer in range(tensors[0].shape[0])]

    def extra_repr(self) -> str:
        options = [f"num_layers={self.num_layers}"] * (self.num_layers != 1) + ["bias=False"] * (not self.bias)
        return ", ".join([f"{self.input_size} → {self.hidden_size}", *options, *["batch_first=True"] *
                          self.batch_first])


class LSTM(_Recurrent):
    """Long short-term memory: gates i (input), f (forget), g (cell candidate), o (output), in that order in the
    rows of W_ih and W_hh.  `output, (h_n, c_n) = lstm(x, (h_0, c_0))`; the initial state defaults to zeros."""

    gates, states = 4, 2

    def layer(self, a: Tensor, w_hh: Tensor, b_hh: Tensor | None, state: State) -> tuple[Tensor, State]:
        h, c = split(lstm_sequence(a, w_hh, b_hh, *state), 2, axis=-1)  # (T, B, H) each
        return h, (h[-1], c[-1])

    def forward(self, x: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        output, finals = self.run(x, None if hx is None else self.unstacked(*hx))
        return output, (self.stacked(finals, 0), self.stacked(finals, 1))


class GRU(_Recurrent):
    """Gated recurrent unit: gates r (reset), z (update), n (new), in that order; the reset gate scales the hidden
    part of n after its bias (PyTorch's n = tanh(W_in·x + b_in + r·(W_hn·h + b_hn))).  `output, h_n = gru(x, h_0)`."""

    gates, states = 3, 1

    def layer(self, a: Tensor, w_hh: Tensor, b_hh: Tensor | None, state: State) -> tuple[Tensor, State]:
        h = gru_sequence(a, w_hh, b_hh, *state)
        return h, (h[-1],)

    def forward(self, x: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:
        output, finals = self.run(x, None if hx is None else self.unstacked(hx))
        return output, self.stacked(finals, 0)
