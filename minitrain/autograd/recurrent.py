"""One recurrent layer over a whole sequence as one tape node: the LSTM's and the GRU's steps forward, and their
backward through time (BPTT) in reverse, side by side. PyTorch's gate order and weight layout.

The input's part of every gate, a = x·W_ihᵀ + b_ih (T, B, G·H), is one `linear` for all steps before the loop (its
tape node gives x, W_ih and b_ih their gradients from da); what runs step by step is the part of the state,
b = h·W_hhᵀ + b_hh. Composed of elementary tape ops, each step would record some fifteen nodes; here a step is a
handful of NumPy calls, and the tape holds one node per layer. The step's products, (B, H)·(H, G·H), are small:
they run on one BLAS thread (`one_thread_below`: on the shared 2-core machine, at load average 32, a training
step of experiments/17-rnn-lm's LSTM took 2.2 s on two threads and 89 ms on one).

Shape letters: T steps, B batch, H hidden size, G gates (LSTM 4: i, f, g, o; GRU 3: r, z, n).
"""

from __future__ import annotations

import numpy as np

from minitrain.autograd.functional import stable_sigmoid as sigmoid
from minitrain.autograd.tensor import Tensor
from minitrain.common.runtime import one_thread_below


def _bias(b_hh: Tensor | None, dtype: np.dtype, rows: int) -> np.ndarray:
    return np.zeros(rows, dtype) if b_hh is None else b_hh.data


def _accumulate_state_grads(w_hh: Tensor, b_hh: Tensor | None, d_w: np.ndarray, d_b: np.ndarray) -> None:
    w_hh._accumulate(d_w)
    if b_hh is not None:
        b_hh._accumulate(d_b)


def lstm_sequence(a: Tensor, w_hh: Tensor, b_hh: Tensor | None, h0: Tensor, c0: Tensor) -> Tensor:
    """The LSTM over T steps -> [h | c] (T, B, 2H), the state after every step.  a (T, B, 4H), W_hh (4H, H),
    b_hh (4H,) or None, h0 and c0 (B, H).

        gates = a_t + h·W_hhᵀ + b_hh;  i, f, o = σ(.), g = tanh(.) of its four parts
        c_t = f·c_{t−1} + i·g;  h_t = o·tanh(c_t)

    Backward, from t = T down, with dh and dc the gradients reaching h_t and c_t (from the output and from step
    t + 1): dc += dh·o·(1 − tanh²c_t); d(gates) = [dc·g·i(1 − i), dc·c_{t−1}·f(1 − f), dc·i·(1 − g²),
    dh·tanh c_t·o(1 − o)]; da_t = d(gates); dW_hh += d(gates)ᵀ·h_{t−1}; the step before gets
    dh = d(gates)·W_hh and dc = dc·f."""
    time, batch, rows = a.shape
    hidden = rows // 4
    w, bias = w_hh.data, _bias(b_hh, a.dtype, rows)
    states = np.empty((time, batch, 2 * hidden), a.dtype)  # [h | c] after each step
    gates = np.empty((time, batch, rows), a.dtype)  # i, f, g, o after their σ / tanh
    h, c = h0.data, c0.data
    for t in range(time):
        with one_thread_below(batch * hidden * rows):
            pre = a.data[t] + h @ w.T + bias
        gates[t] = sigmoid(pre)
        gates[t, :, 2 * hidden : 3 * hidden] = np.tanh(pre[:, 2 * hidden : 3 * hidden])
        i, f, g, o = np.split(gates[t], 4, axis=1)
        c = f * c + i * g
        h = o * np.tanh(c)
        states[t, :, :hidden], states[t, :, hidden:] = h, c

    def backward(grad: np.ndarray) -> None:
        da, d_w, d_b = np.empty_like(a.data), np.zeros_like(w), np.zeros(rows, a.dtype)
        dh_next, dc_next = np.zeros_like(h0.data), np.zeros_like(c0.data)
        for t in reversed(range(time)):
            i, f, g, o = np.split(gates[t], 4, axis=1)
            h_prev, c_prev = (h0.data, c0.data) if t == 0 else (states[t - 1, :, :hidden], states[t - 1, :, hidden:])
            tanh_c = np.tanh(states[t, :, hidden:])
            dh = grad[t, :, :hidden] + dh_next
            dc = grad[t, :, hidden:] + dc_next + dh * o * (1 - tanh_c * tanh_c)
            d_gates = np.concatenate([dc * g * i * (1 - i), dc * c_prev * f * (1 - f), dc * i * (1 - g * g),
                                      dh * tanh_c * o * (1 - o)], axis=1)  # (B, 4H)
            da[t] = d_gates
            with one_thread_below(batch * hidden * rows):
                d_w += d_gates.T @ h_prev
                dh_next, dc_next = d_gates @ w, dc * f
            d_b += d_gates.sum(axis=0)
        a._accumulate(da)
        _accumulate_state_grads(w_hh, b_hh, d_w, d_b)
        h0._accumulate(dh_next)
        c0._accumulate(dc_next)

    parents = (a, w_hh, h0, c0) if b_hh is None else (a, w_hh, b_hh, h0, c0)
    return Tensor._from_op(states, parents, backward)


def gru_sequence(a: Tensor, w_hh: Tensor, b_hh: Tensor | None, h0: Tensor) -> Tensor:
    """The GRU over T steps -> h (T, B, H), the state after every step.  a (T, B, 3H), W_hh (3H, H), b_hh (3H,) or
    None, h0 (B, H).

        b = h·W_hhᵀ + b_hh;  r = σ(a_r + b_r), z = σ(a_z + b_z), n = tanh(a_n + r·b_n)
        h_t = (1 − z)·n + z·h_{t−1}

    Backward, from t = T down, with dh the gradient reaching h_t: dz = dh·(h_{t−1} − n), dn = dh·(1 − z)·(1 − n²),
    dr = dn·b_n; da_t = [dr·r(1 − r), dz·z(1 − z), dn], db_t = [the same first two, dn·r]; dW_hh += db_tᵀ·h_{t−1};
    the step before gets dh·z + db_t·W_hh."""
    time, batch, rows = a.shape
    hidden = rows // 3
    w, bias = w_hh.data, _bias(b_hh, a.dtype, rows)
    states = np.empty((time, batch, hidden), a.dtype)
    saved = np.empty((time, batch, 4 * hidden), a.dtype)  # r, z, n and b_n of each step
    h = h0.data
    for t in range(time):
        with one_thread_below(batch * hidden * rows):
            b = h @ w.T + bias
        a_r, a_z, a_n = np.split(a.data[t], 3, axis=1)
        b_r, b_z, b_n = np.split(b, 3, axis=1)
        r, z = sigmoid(a_r + b_r), sigmoid(a_z + b_z)
        n = np.tanh(a_n + r * b_n)
        h = n + z * (h - n)
        states[t] = h
        saved[t] = np.concatenate([r, z, n, b_n], axis=1)

    def backward(grad: np.ndarray) -> None:
        da, d_w, d_b = np.empty_like(a.data), np.zeros_like(w), np.zeros(rows, a.dtype)
        dh_next = np.zeros_like(h0.data)
        for t in reversed(range(time)):
            r, z, n, b_n = np.split(saved[t], 4, axis=1)
            h_prev = h0.data if t == 0 else states[t - 1]
            dh = grad[t] + dh_next
            dn = dh * (1 - z) * (1 - n * n)
            dr, dz = dn * b_n * r * (1 - r), dh * (h_prev - n) * z * (1 - z)
            da[t] = np.concatenate([dr, dz, dn], axis=1)
            db = np.concatenate([dr, dz, dn * r], axis=1)  # (B, 3H)
            with one_thread_below(batch * hidden * rows):
                d_w += db.T @ h_prev
                dh_next = dh * z + db @ w
            d_b += db.sum(axis=0)
        a._accumulate(da)
        _accumulate_state_grads(w_hh, b_hh, d_w, d_b)
        h0._accumulate(dh_next)

    parents = (a, w_hh, h0) if b_hh is None else (a, w_hh, b_hh, h0)
    return Tensor._from_op(states, parents, backward)
