"""Fused ops a transformer needs, each one tape node with its backward right below its forward.

Building these from the elementary Tensor ops would also be correct (tests check that), but would record many
nodes and temporaries per call; fusing them keeps the tape short and lets the hot ones run as numba kernels,
chosen in `minitrain.autograd.kernels` (`kernels.active`).

Shape letters: B batch, T time (sequence), C channels (d_model), H heads, D head size, V vocabulary, N rows.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from minitrain.autograd import kernels
from minitrain.autograd.ops import concat
from minitrain.autograd.tensor import TAPE, Tensor, unbroadcast
from minitrain.common.runtime import one_thread_below


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None, activation: str | None = None) -> Tensor:
    """y = x·W + b, or with activation="gelu" y = gelu(x·W + b) as one tape node (the MLP's first layer: the bias
    add and the GELU are one pass).  x (..., I), W (I, O), b (O,) -> y (..., O).

    Backward, with x and g flattened to rows (g first times gelu'): dx = g·Wᵀ, dW = xᵀ·g, db = Σ_rows g.
    Small products run on one BLAS thread (`one_thread_below`: a LoRA adapter's rank-8 products, say)."""
    n_in, n_out = weight.shape
    if x.shape[-1] != n_in:
        raise ValueError(f"linear: input of shape {x.shape} does not match weight of shape {weight.shape}")
    if activation not in (None, "gelu"):
        raise ValueError(f"linear: unknown activation {activation!r}; use None or 'gelu'")
    rows = x.data.reshape(-1, n_in)
    b = None if bias is None else bias.data
    macs = len(rows) * n_in * n_out
    with one_thread_below(macs):
        y = pre = rows @ weight.data  # for gelu: x·W without the bias, which the kernels add
    if activation == "gelu":
        y = kernels.active.gelu_forward(pre, b)
    elif b is not None:
        y += b

    def backward(g: np.ndarray) -> None:
        g_rows = g.reshape(-1, n_out)
        if activation == "gelu":
            g_rows = kernels.active.gelu_backward(pre, g_rows, b)
        with one_thread_below(macs):
            if x.requires_grad:
                x._accumulate((g_rows @ weight.data.T).reshape(x.shape))
            if weight.requires_grad:
                weight._accumulate_product(rows.T, g_rows)
        if bias is not None and bias.requires_grad:
            bias._accumulate_product(np.ones(len(g_rows), g_rows.dtype), g_rows)  # Σ_rows g by BLAS: 3x sum()

    parents = (x, weight) if bias is None else (x, weight, bias)
    return Tensor._from_op(y.reshape(*x.shape[:-1], n_out), parents, backward)


def gelu(x: Tensor) -> Tensor:
    """GELU, tanh approximation (GPT-2's "gelu_new"); math in kernels/gelu.py."""
    return Tensor._from_op(kernels.active.gelu_forward(x.data), (x,),
                           lambda g: x._accumulate(kernels.active.gelu_backward(x.data, g)))


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    """y = (x − μ)/√(σ² + eps)·w + b over the last axis.  x (..., C), w and b (C,); math in kernels/layernorm.py."""
    channels = x.shape[-1]
    rows = np.ascontiguousarray(x.data.reshape(-1, channels))
    y, mean, rstd = kernels.active.layernorm_forward(rows, weight.data, bias.data, eps)

    def backward(g: np.ndarray) -> None:
        dx, dw, db = kernels.active.layernorm_backward(g.reshape(-1, channels), rows, weight.data, mean, rstd)
        x._accumulate(dx.reshape(x.shape))
        weight._accumulate(dw)
        bias._accumulate(db)

    return Tensor._from_op(y.reshape(x.shape), (x, weight, bias), backward)


def sigmoid(x: Tensor) -> Tensor:
    """y = 1/(1 + e^(−x)), computed as e^x/(1 + e^x) for x < 0 so that no exp overflows;  dx = g·y·(1 − y)."""
    y = stable_sigmoid(x.data)
    return Tensor._from_op(y, (x,), lambda g: x._accumulate(g * y * (1 - y)))


def stable_sigmoid(x: np.ndarray) -> np.ndarray:
    """σ(x) in x's dtype from e^(−|x|) ∈ (0, 1], which never overflows: 1/(1 + e) for x ≥ 0, e/(1 + e) below."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype)


def softmax(x: Tensor, axis: int = -1, *, dim: int | None = None) -> Tensor:
    """`x.softmax(axis)` (or PyTorch's `dim`): the op lives on Tensor."""
    return x.softmax(axis, dim=dim)


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    """y = x − log Σ exp(x);  dx = g − softmax(x)·Σ g."""
    peak = x.data.max(axis=axis, keepdims=True)
    work = x.data - peak  # one array beside x: exp and then y are written into it (whole logits: 100s of MB)
    lse = peak + np.log(np.exp(work, out=work).sum(axis=axis, keepdims=True))
    y = np.subtract(x.data, lse, out=work)
    return Tensor._from_op(y, (x,), lambda g: x._accumulate(g - np.exp(y) * g.sum(axis=axis, keepdims=True)))


def cross_entropy(logits: Tensor, targets: np.ndarray | Tensor, mask: np.ndarray | None = None, *,
                  ignore_index: int | None = -100, reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """Mean of −log softmax(logits)[target] over the positions where mask is True (all positions if None).

    logits (..., V); targets (...) int (an array or a Tensor); mask (...) bool. Fused softmax + NLL; math in
    kernels/cross_entropy.py. PyTorch's keywords: a target equal to `ignore_index` counts nowhere (a False in mask);
    `reduction` "mean", "sum" or "none" (the loss per position (...), 0 where not counted); `label_smoothing` ε:
    (1 − ε)·nll + ε·mean_j(−log softmax(z)_j), the same mixture as torch's."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"cross_entropy: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    targets = targets.data.astype(np.int64) if isinstance(targets, Tensor) else targets  # floats held
    targets, mask, count = loss_rows(logits.shape, targets, mask, ignore_index, mean=reduction == "mean")
    if label_smoothing:
        hard = cross_entropy(logits, targets, mask, ignore_index=None, reduction="none")
        counted = mask.reshape(hard.shape)
        per = hard * (1 - label_smoothing) - log_softmax(logits).mean(axis=-1) * (label_smoothing * counted)
        return per if reduction == "none" else per.sum() * (1 / count if reduction == "mean" else 1)
    rows = np.ascontiguousarray(logits.data.reshape(-1, logits.shape[-1]))
    nll, lse = kernels.active.cross_entropy_forward(rows, targets, mask)
    divisor = count if reduction == "mean" else 1
    loss = nll.reshape(logits.shape[:-1]) if reduction == "none" else np.asarray(nll.sum(dtype=np.float64) / divisor,
                                                                                   dtype=logits.dtype)

    def backward(g: np.ndarray) -> None:
        dnll = mask * (np.reshape(g, -1) / divisor).astype(logits.dtype)
        logits._accumulate(kernels.active.cross_entropy_backward(rows, targets, lse, dnll).reshape(logits.shape))

    return Tensor._from_op(loss, (logits,), backward)


def loss_rows(shape: tuple[int, ...], targets: np.ndarray, mask: np.ndarray | None, ignore_index: int | None = None,
              mean: bool = True) -> tuple[np.ndarray, ...]:
    """(targets, mask, count) as flat rows for logits of `shape` (..., V), checked: the kernels do not bounds-check.
    A target equal to `ignore_index` is masked out (and read as 0); with `mean`, a mask that counts nothing is an
    error (a sum over no position is 0)."""
    vocab, targets = shape[-1], np.asarray(targets).reshape(-1)
    mask = np.ones(len(targets), dtype=bool) if mask is None else np.asarray(mask, dtype=bool).reshape(-1)
    if not len(targets) == len(mask) == int(np.prod(shape[:-1])):
        raise ValueError(f"cross_entropy: logits {shape}, {targets.size} targets, {mask.size} mask positions differ")
    if ignore_index is not None and (ignored := targets == ignore_index).any():
        mask, targets = mask & ~ignored, np.where(ignored, 0, targets)
    if targets.size and not 0 <= targets.min() <= targets.max() < vocab:
        raise ValueError(f"cross_entropy: target ids must be in [0, {vocab}), got {targets.min()}..{targets.max()}")
    count = int(mask.sum())
    if count == 0 and mean:
        raise ValueError("cross_entropy: the mask selects no position, so the mean is undefined")
    return targets, mask, count


# Logits per block of the head's loss: 4 Mi float32 (16 MiB), 4,096 vocabulary columns for 1,024 tokens.
CHUNK_LOGITS = 1 << 22


def linear_cross_entropy(
    x: Tensor, weight: Tensor, targets: np.ndarray, mask: np.ndarray | None = None, softcap: float | None = None
) -> Tensor:
    """cross_entropy(z, targets, mask) of the head's logits z = x·Wᵀ (or c·tanh(x·Wᵀ/c), softcap c), without ever
    holding all of z.  x (..., C), W (V, C) (the token embedding's layout), targets and mask (...) -> the mean; a
    target of -100 counts nowhere, as cross_entropy's default ignore_index.

    Both passes walk the vocabulary in blocks of columns, CHUNK_LOGITS logits each, every row at once (the rows
    stay in cache while W streams through once: blocks of a few rows would stream W once per block).
    Forward (head_nll): the kernel's lse_b of each row over block b, and z_t from the block holding the target;
    lse = log Σ_b exp(lse_b), nll = lse − z_t, and the mean nll.sum(float64) / count, as cross_entropy's. Backward:
    z_b recomputed, dz_b = dnll·(exp(z_b − lse) − onehot) by the kernel, dx += dz_b·W_b, and dW_b = dz_bᵀ·x
    written once per block (no (V, C) sum of partial products), only when W requires a gradient. A frozen W (a
    LoRA's tied embedding) needs dx alone: the forward takes it while each block's logits are at hand, so its
    backward computes no product at all (head_nll's with_dx)."""
    vocab, channels = weight.shape
    rows = np.ascontiguousarray(x.data.reshape(-1, channels))
    targets, mask, count = loss_rows((*x.shape[:-1], vocab), targets, mask, ignore_index=-100)
    dx_in_forward = TAPE.recording and x.requires_grad and not weight.requires_grad
    nll, lse, dx_of_sum = head_nll(rows, weight.data, targets, mask, softcap, with_dx=dx_in_forward)
    loss = np.asarray(nll.sum(dtype=np.float64) / count, dtype=x.dtype)

    def backward(g: np.ndarray) -> None:
        if dx_of_sum is not None:  # the gradient of Σ nll, scaled as the mean's
            x._accumulate((dx_of_sum * (g / count).astype(x.dtype)).reshape(x.shape))
            return
        dnll = mask * (g / count).astype(x.dtype)
        dx = np.zeros_like(rows) if x.requires_grad else None
        into_grad = _leaf_grad(weight) is not None  # each dW_b added to its rows of W's grad: no (V, C) temporary
        dw = weight.grad if into_grad else np.empty(weight.shape, weight.dtype) if weight.requires_grad else None
        for start, block in _vocabulary_blocks(weight.data, len(rows)):
            z, tanh = _head_logits(rows, block, softcap)
            dz = _head_gradient(z, tanh, targets - start, lse, dnll, softcap)
            if dx is not None:
                dx += dz @ block
            if into_grad and dw[start : start + len(block)].any():
                dw[start : start + len(block)] += dz.T @ rows
            elif dw is not None:  # 0 + p = p: BLAS never returns −0
                np.matmul(dz.T, rows, out=dw[start : start + len(block)])
        if dx is not None:
            x._accumulate(dx.reshape(x.shape))
        if dw is not None and not into_grad:
            weight._accumulate(dw)

    return Tensor._from_op(loss, (x, weight), backward)


def head_nll(
    rows: np.ndarray, weight: np.ndarray, targets: np.ndarray, mask: np.ndarray, softcap: float | None = None,
    with_dx: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(nll, lse, dx) of the head's logits rows·Wᵀ (soft-capped by c when given), block by block of the vocabulary:
    rows (N, C), W (V, C), targets (N,) int, mask (N,) bool (False: nll = lse = 0) -> nll, lse (N,). No tape.

    with_dx: dx (N, C), the gradient of Σ nll over the masked rows, else None. Softmax's share Σ_j p_j·s_j·W_j
    (s_j = 1 − tanh_j² under a soft-cap, else 1) is summed block by block against the lse seen so far and rescaled
    by exp(lse_old − lse_new) as the lse grows (an online softmax), so no block is computed twice; the target's
    s_t·W_t is subtracted at the end (tanh_t = z_t / c)."""
    lse, picked = np.full(len(rows), -np.inf), np.zeros(len(rows), rows.dtype)  # lse summed in float64
    dx, none_inside, counted = np.zeros_like(rows) if with_dx else None, np.full(len(rows), -1), mask.astype(rows.dtype)
    for start, block in _vocabulary_blocks(weight, len(rows)):
        z, tanh = _head_logits(rows, block, softcap)
        local = targets - start
        inside = (local >= 0) & (local < len(block))
        _, block_lse = kernels.active.cross_entropy_forward(z, np.where(inside, local, 0), mask)
        grown = np.logaddexp(lse, block_lse)
        picked[inside] = z[inside, local[inside]]
        if dx is not None:
            dx *= np.exp(lse - grown).astype(rows.dtype)[:, None]
            dx += _head_gradient(z, tanh, none_inside, grown.astype(rows.dtype), counted, softcap) @ block
        lse = grown
    if dx is not None:
        slope = 1 - (picked / softcap) ** 2 if softcap else 1  # dz/du at the target
        dx -= (counted * slope)[:, None] * weight[targets]
    lse = np.where(mask, lse, 0).astype(rows.dtype)
    return np.where(mask, lse - picked, 0).astype(rows.dtype), lse, dx


def _vocabulary_blocks(weight: np.ndarray, n_rows: int) -> Iterator[tuple[int, np.ndarray]]:
    """(first row, W[first : first + step]) over W (V, C), step = CHUNK_LOGITS // n_rows (at least 1)."""
    step = max(1, CHUNK_LOGITS // n_rows)
    return ((start, weight[start : start + step]) for start in range(0, len(weight), step))


def _head_logits(rows: np.ndarray, weight: np.ndarray, softcap: float | None) -> tuple[np.ndarray, np.ndarray | None]:
    """(z, tanh(u/c)) for u = rows·Wᵀ: z = c·tanh(u/c) with softcap c, else (u, None); the decoder head's ops."""
    u = rows @ weight.T
    if not softcap:
        return u, None
    cap = np.asarray(softcap, dtype=u.dtype)
    tanh = np.tanh(u / cap)
    return tanh * cap, tanh


def _head_gradient(z: np.ndarray, tanh: np.ndarray | None, targets: np.ndarray, lse: np.ndarray, dnll: np.ndarray,
                   softcap: float | None) -> np.ndarray:
    """du for logits z = c·tanh(u/c) (or u) of a block whose columns the targets count from: the kernel's dz, times
    1 − tanh² under a soft-cap, in the order the composed ops (u / c).tanh() * c take."""
    dz = kernels.active.cross_entropy_backward(z, targets, lse, dnll)
    if not softcap:
        return dz
    cap = np.asarray(softcap, dtype=z.dtype)
    return dz * cap * (1 - tanh * tanh) / cap


def embedding(weight: Tensor, idx: np.ndarray) -> Tensor:
    """y[...] = W[idx[...]].  W (V, C), idx (...) int -> y (..., C); backward is a scatter-add into dW."""
    idx = np.asarray(idx)
    vocab, channels = weight.shape

    def backward(g: np.ndarray) -> None:
        grad = _leaf_grad(weight)
        if grad is None:
            weight._accumulate(kernels.active.embedding_backward(idx.reshape(-1), g.reshape(-1, channels), vocab))
            return
        # only the rows the batch names: the same sums (each from 0, in the same order) added to the same rows,
        # without a dense (V, C) temporary (113 MB at SmolLM2's vocabulary)
        rows, where = np.unique(idx.reshape(-1), return_inverse=True)
        grad[rows] += kernels.active.embedding_backward(where, g.reshape(-1, channels), len(rows))

    return Tensor._from_op(weight.data[idx], (weight,), backward)


def _leaf_grad(weight: Tensor) -> np.ndarray | None:
    """A trainable leaf's gradient array, made zero when it has none yet (0 + g = g, a first write's bits: g is
    never −0 here), for ops that add into some of its rows in place; None for anything else (`_accumulate` then)."""
    if not (weight.requires_grad and weight.is_leaf):
        return None
    if weight.grad is None:
        weight.grad = np.zeros_like(weight.data)
    return weight.grad


def dropout(x: Tensor, p: float, training: bool, rng: np.random.Generator | None = None) -> Tensor:
    """Zero each element with probability p and scale the rest by 1/(1 − p); the identity when not training.

    The mask is drawn from `rng`, the training RNG, so a resumed run draws the same masks."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout: p must be in [0, 1), got {p}")
    if not training or p == 0.0:
        return x
    if rng is None:
        raise ValueError("dropout: training with p > 0 needs the training rng")
    keep = (rng.random(x.shape) >= p).astype(x.dtype) * x.dtype.type(1.0 / (1.0 - p))
    return Tensor._from_op(x.data * keep, (x,), lambda g: x._accumulate(g * keep))


# --------------------------------------------------------------------- attention
def self_attention(qkv: Tensor, n_head: int, pad_mask: np.ndarray | None = None, scale: float | None = None,
                   return_probs: bool = False) -> Tensor | tuple[Tensor, np.ndarray]:
    """Multi-head causal self-attention from the fused projection, as one tape node; math in kernels/attention.py.

    qkv (B, T, 3C) holds q | k | v, and inside each, head h owns columns [h·D, (h+1)·D) (GPT-2's layout);
    pad_mask (B, T) is True on real tokens (padding keys are never attended to); scores are q·k·scale with
    scale = 1/√D unless given. Returns the heads' outputs side by side, (B, T, C), ready for the output
    projection; with return_probs also the attention probabilities (B, H, T, T) as a plain array."""
    batch, time, width = qkv.shape
    if width % (3 * n_head):
        raise ValueError(f"self_attention: qkv of shape {qkv.shape} does not split into q, k, v of {n_head} heads")
    key_mask = np.ones((batch, time), dtype=bool) if pad_mask is None else np.asarray(pad_mask, dtype=bool)
    if key_mask.shape != (batch, time):  # the numba kernel does not bounds-check
        raise ValueError(f"self_attention: pad_mask of shape {key_mask.shape} does not match (B, T) = {(batch, time)}")
    macs = time * (width // (3 * n_head)) * time  # one (T, D)·(D, T) product per (B, H), as grouped_attention's
    with one_thread_below(macs):
        y, probs = kernels.active.attention_forward(qkv.data, n_head, key_mask, scale)

    def backward(g: np.ndarray) -> None:
        with one_thread_below(macs):
            qkv._accumulate(kernels.active.attention_backward(qkv.data, probs, g, scale))

    out = Tensor._from_op(y, (qkv,), backward)
    return (out, probs) if return_probs else out


def attention(
    q: Tensor, k: Tensor, v: Tensor, pad_mask: np.ndarray | None = None, scale: float | None = None
) -> Tensor:
    """Causal scaled dot-product attention.  q, k, v (B, H, T, D); pad_mask (B, T), True on real tokens (keys
    that are padding are never attended to); scale 1/√D unless given -> (B, H, T, D). Packs the heads into
    `self_attention`'s layout."""
    batch, n_head, time, head_size = q.shape
    qkv = concat([t.transpose(0, 2, 1, 3).reshape(batch, time, n_head * head_size) for t in (q, k, v)], axis=-1)
    y = self_attention(qkv, n_head, pad_mask, scale)
    return y.reshape(batch, time, n_head, head_size).transpose(0, 2, 1, 3)


# --------------------------------------------------------------------- the Llama family's ops
def rms_norm(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """y = x/√(mean(x²) + eps)·w over the last axis.  x (..., C), w (C,); math in kernels/rmsnorm.py."""
    channels = x.shape[-1]
    rows = np.ascontiguousarray(x.data.reshape(-1, channels))
    y, rstd = kernels.active.rmsnorm_forward(rows, weight.data, eps)

    def backward(g: np.ndarray) -> None:
        dx, dw = kernels.active.rmsnorm_backward(g.reshape(-1, channels), rows, weight.data, rstd)
        x._accumulate(dx.reshape(x.shape))
        weight._accumulate(dw)

    return Tensor._from_op(y.reshape(x.shape), (x, weight), backward)


def silu(x: Tensor) -> Tensor:
    """SiLU, y = x·σ(x) (Llama's "silu" activation);  dx = g·σ(x)·(1 + x·(1 − σ(x))); math in kernels/silu.py."""
    return Tensor._from_op(kernels.active.silu_forward(x.data), (x,),
                           lambda g: x._accumulate(kernels.active.silu_backward(x.data, g)))


def _rotate_half(a: np.ndarray) -> np.ndarray:
    """[a₁ | a₂] -> [−a₂ | a₁] over the last axis (its two halves)."""
    half = a.shape[-1] // 2
    return np.concatenate([-a[..., half:], a[..., :half]], axis=-1)


def rope(x: Tensor, cos: np.ndarray, sin: np.ndarray) -> Tensor:
    """Rotary position embedding, transformers' convention: y = x·cos + rotate_half(x)·sin.

    The head dim D is split in two halves [x₁ | x₂], and each pair (x₁[i], x₂[i]) is rotated by the angle of
    frequency i at the token's position (cos and sin repeat their D/2 angles in both halves). x (..., D); cos, sin
    (constants) broadcast against x, e.g. (B, T, 1, D) for x (B, T, H, D). A rotation's adjoint is the rotation
    by the opposite angle:  dx = g·cos + rotate_halfᵀ(g·sin),  rotate_halfᵀ([u₁ | u₂]) = [u₂ | −u₁]."""
    if x.shape[-1] % 2:
        raise ValueError(f"rope: the last axis of {x.shape} must be even (it is split in two halves)")
    cos, sin = np.asarray(cos, dtype=x.dtype), np.asarray(sin, dtype=x.dtype)

    def backward(g: np.ndarray) -> None:
        u = g * sin
        half = u.shape[-1] // 2
        x._accumulate(unbroadcast(g * cos + np.concatenate([u[..., half:], -u[..., :half]], axis=-1), x.shape))

    return Tensor._from_op(x.data * cos + _rotate_half(x.data) * sin, (x,), backward)


def attention_mask(
    time_q: int, time_k: int, key_mask: np.ndarray | None = None, segment_ids: np.ndarray | None = None
) -> np.ndarray:
    """Which keys each query may attend to: allowed (B, Tq, Tk) bool (B = 1 when neither array is given).

    The queries are the last Tq of the Tk positions (Tq = Tk in training; with a KV cache the earlier keys are
    cached). Query i (position i + Tk − Tq) sees key j when j ≤ i + Tk − Tq (causal), key_mask[b, j] (True on
    real tokens: padding is never attended to), and segment_ids[b, j] equals the query's own (packed documents
    do not see each other). key_mask, segment_ids: (B, Tk)."""
    offset = time_k - time_q
    allowed = (np.arange(time_k)[None, :] <= np.arange(time_q)[:, None] + offset)[None]  # (1, Tq, Tk)
    if key_mask is not None:
        allowed = allowed & np.asarray(key_mask, dtype=bool)[:, None, :]
    if segment_ids is not None:
        segments = np.asarray(segment_ids)
        allowed = allowed & (segments[:, offset:, None] == segments[:, None, :])
    return allowed


def sliding_window(allowed: np.ndarray, positions_q: np.ndarray, positions_k: np.ndarray, window: int
                   ) -> np.ndarray:
    """`allowed` (B or 1, Tq, Tk) narrowed to a window of W positions: the query at position p sees a key at p_k only
    when p_k > p − W, itself and the W − 1 before it (transformers' `kv_idx > q_idx - sliding_window`).
    positions_q (B, Tq), positions_k (B, Tk): rotary positions, which count a document's real tokens only."""
    return allowed & (np.asarray(positions_k)[:, None, :] > np.asarray(positions_q)[:, :, None] - window)


def grouped_attention(q: Tensor, k: Tensor, v: Tensor, allowed: np.ndarray, scale: float | None = None,
                      softcap: float | None = None) -> Tensor:
    """Grouped-query attention under a mask, as one tape node; math in kernels/grouped_attention.py.

    q (B, Tq, H, D); k, v (B, Tk, H_kv, D) with H_kv dividing H (query head h reads key/value head h·H_kv // H);
    allowed (B or 1, Tq, Tk) bool (`attention_mask`); scale 1/√D unless given; softcap c: scores c·tanh(s/c) before
    the mask (Gemma 2). Returns the heads' outputs side by
    side, (B, Tq, H·D), ready for the output projection."""
    batch, time_q, n_head, head_size = q.shape
    if k.shape != v.shape or k.shape[0] != batch or k.shape[3] != head_size or n_head % k.shape[2]:
        raise ValueError(f"grouped_attention: q {q.shape}, k {k.shape}, v {v.shape} do not fit (B, T, H, D) with "
                         "key/value heads dividing the query heads")
    allowed = np.broadcast_to(np.asarray(allowed, dtype=bool), (batch, time_q, k.shape[1]))
    macs = time_q * n_head // k.shape[2] * head_size * k.shape[1]  # one (G·Tq, D)·(D, Tk) product per (B, H_kv)
    with one_thread_below(macs):
        y, probs = kernels.active.grouped_attention_forward(q.data, k.data, v.data, allowed, scale, softcap)

    def backward(g: np.ndarray) -> None:
        with one_thread_below(macs):
            dq, dk, dv = kernels.active.grouped_attention_backward(q.data, k.data, v.data, probs, g, scale, softcap)
        q._accumulate(dq)
        k._accumulate(dk)
        v._accumulate(dv)

    return Tensor._from_op(y, (q, k, v), backward)
