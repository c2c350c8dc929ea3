"""Losses on embeddings, each one tape node with its backward below its forward: the triplet margin loss and the
contrastive NT-Xent (InfoNCE) loss. Both pull rows that belong together close and push the others away; neither
reads a label, only which rows pair with which.

Triplet margin (Schroff et al. 2015; torch.nn.TripletMarginLoss), anchors a, positives p, negatives n (B, D):

    d(x, y) = ‖x − y + ε‖_p          (ε = 1e-6, as torch's pairwise_distance)
    Lᵢ = max(d(aᵢ, pᵢ) − d(aᵢ, nᵢ) + margin, 0)      with swap: d(aᵢ, nᵢ) ← min(d(aᵢ, nᵢ), d(pᵢ, nᵢ))
    ∂‖v‖_p/∂v = sign(v)·|v|^(p−1) / ‖v‖_p^(p−1)

NT-Xent (Chen et al. 2020, SimCLR), two views z₁, z₂ (N, D) of N items: the 2N rows are unit-normalized,
u = z/‖z‖, and each row's positive is the other view of its item, its negatives the other 2N − 2 rows:

    S = u uᵀ / τ  with the diagonal left out        L = (1/2N) Σₖ −log softmax(Sₖ)[pos(k)]
    ∂L/∂S = (P − Y)/2N   (P the row softmax, Y the positives' one-hot)
    ∂L/∂u = (G + Gᵀ) u / τ                         ∂L/∂z = (∂L/∂u − u·⟨∂L/∂u, u⟩) / ‖z‖

InfoNCE (van den Oord et al. 2018) is the same cross-entropy over similarities; NT-Xent is its symmetric,
normalized, temperature-scaled form with the other rows of the batch as negatives.
"""

from __future__ import annotations

import numpy as np

from minitrain.autograd.tensor import Tensor

PAIRWISE_EPS = 1e-6  # torch's pairwise_distance adds it to the difference, so d(x, x) is not 0 (no 0/0 gradient)


def _distance(x: np.ndarray, y: np.ndarray, p: float) -> tuple[np.ndarray, np.ndarray]:
    """(d (B,), ∂d/∂x (B, D)) with d = ‖x − y + ε‖_p per row; ∂d/∂y = −∂d/∂x."""
    v = x - y + PAIRWISE_EPS
    d = np.sum(np.abs(v) ** p, axis=1) ** (1.0 / p)
    return d, np.sign(v) * np.abs(v) ** (p - 1) / d[:, None] ** (p - 1)


def _reduce(per_row: np.ndarray, reduction: str) -> tuple[np.ndarray, float | None]:
    """The reduced value and the factor each row's gradient gets (None: reduction "none", per-row gradients)."""
    if reduction == "mean":
        return np.mean(per_row), 1.0 / len(per_row)
    if reduction == "sum":
        return np.sum(per_row), 1.0
    if reduction == "none":
        return per_row, None
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2.0,
                        swap: bool = False, reduction: str = "mean") -> Tensor:
    """torch.nn.functional.triplet_margin_loss on (B, D) anchors, positives and negatives; p ≥ 1."""
    if not p >= 1:
        raise ValueError(f"triplet_margin_loss: p must be >= 1, got {p}")
    if not anchor.shape == positive.shape == negative.shape or anchor.ndim != 2:
        raise ValueError(f"triplet_margin_loss: (B, D) inputs of one shape, got {anchor.shape}, {positive.shape}, "
                         f"{negative.shape}")
    a, pos, neg = (x.data.astype(np.float64) for x in (anchor, positive, negative))
    d_ap, grad_ap = _distance(a, pos, p)
    d_an, grad_an = _distance(a, neg, p)
    swapped = np.zeros(len(a), dtype=bool)
    if swap:
        d_pn, grad_pn = _distance(pos, neg, p)
        swapped = d_pn < d_an
        d_an = np.where(swapped, d_pn, d_an)
    hinge = d_ap - d_an + margin
    value, scale = _reduce(np.maximum(hinge, 0.0), reduction)

    def backward(g: np.ndarray) -> None:
        w = ((g if scale is None else g * scale) * (hinge > 0))[:, None]  # ∂L/∂Lᵢ, 0 where the hinge is flat
        use_pn = swapped[:, None]
        near = np.where(use_pn, 0.0, w * grad_an)  # the a–n distance, where it is the one used
        far = np.where(use_pn, w * grad_pn, 0.0) if swap else 0.0  # the p–n distance, where swap chose it
        anchor._accumulate((w * grad_ap - near).astype(anchor.dtype))
        positive._accumulate((-w * grad_ap - far).astype(positive.dtype))
        negative._accumulate((near + far).astype(negative.dtype))

    return Tensor._from_op(np.asarray(value, dtype=anchor.dtype), (anchor, positive, negative), backward)


def nt_xent_loss(z1: Tensor, z2: Tensor, temperature: float = 0.5) -> Tensor:
    """SimCLR's NT-Xent of two views (N, D), N ≥ 2, rows nonzero: the mean over all 2N rows (module docstring)."""
    if not temperature > 0:
        raise ValueError(f"nt_xent_loss: temperature must be > 0, got {temperature}")
    if z1.shape != z2.shape or z1.ndim != 2 or z1.shape[0] < 2:
        raise ValueError(f"nt_xent_loss: two (N, D) views of one shape with N >= 2, got {z1.shape} and {z2.shape}")
    n = z1.shape[0]
    z = np.concatenate([z1.data, z2.data]).astype(np.float64)
    norm = np.linalg.norm(z, axis=1, keepdims=True)
    u = z / norm
    s = u @ u.T / temperature
    np.fill_diagonal(s, -np.inf)  # a row is not its own negative
    positives = np.concatenate([np.arange(n, 2 * n), np.arange(n)])
    peak = s.max(axis=1, keepdims=True)
    log_p = s - peak - np.log(np.exp(s - peak).sum(axis=1, keepdims=True))
    rows = np.arange(2 * n)
    loss = -np.mean(log_p[rows, positives])

    def backward(g: np.ndarray) -> None:
        grad_s = np.exp(log_p)
        grad_s[rows, positives] -= 1.0
        grad_s *= g / (2 * n)
        grad_u = (grad_s + grad_s.T) @ u / temperature
        grad_z = (grad_u - u * np.sum(grad_u * u, axis=1, keepdims=True)) / norm
        z1._accumulate(grad_z[:n].astype(z1.dtype))
        z2._accumulate(grad_z[n:].astype(z2.dtype))

    return Tensor._from_op(np.asarray(loss, dtype=z1.dtype), (z1, z2), backward)
