"""SparseGPT (Frantar & Alistarh 2023, "SparseGPT: Massive Language Models Can Be Accurately Pruned in One-Shot"),
Algorithm 1: prune a linear layer and update its kept weights so that the layer's output on the calibration
inputs changes as little as possible.

In the paper's layout W is (rows = outputs, columns = inputs) and X (inputs, N) the calibration inputs; each row
is an independent least-squares problem min ‖wX − ŵX‖² with the Hessian H = 2XXᵀ (inputs, inputs), the same for
every row. Removing weight c of a row and moving the others optimally (Optimal Brain Surgeon) costs
w_c² / [H⁻¹]_cc and changes the row's later weights by −(w_c / [H⁻¹]_cc) · H⁻¹[c, :]. Going through the columns in
order and keeping the done ones fixed, the H⁻¹ of the columns still free is read off the upper Cholesky factor U of
H⁻¹ (H⁻¹ = UᵀU): its row c, U[c, c:], is what [H⁻¹ of columns c..]'s row c is after the earlier columns were
eliminated, divided by √ of its diagonal. So, with U for H⁻¹ and d = U_cc:

    for each column c, in blocks of B:
        at the start of each block of Bs columns: the mask of those columns, the lowest w² / d² pruned
        err    = (w_c − ŵ_c) / U_cc              ŵ_c: column c with its pruned entries 0
        w_c'   ← w_c' − err · U[c, c']           for the columns c' > c of the block (now)
    after each block: the same update of every later column from the block's errors at once (the lazy batch
    update: one matrix product E · U[block, later])

H is dampened by λ · mean(diag H) on its diagonal (λ = 0.01, the paper's) so it can be inverted when an input
never varies. Unlike the reference code, an input never seen (diag H = 0) is not zeroed outright: its weights go
through the mask like the others, so every layer has exactly round(s · size) zeros (masks.py's rule). The mask of a
block of Bs columns prunes k_b = round(s · rows · end) − round(s · rows · start) of its rows × Bs scores, so the
counts of the blocks add up to the layer's exactly. 2:4: in every 4 consecutive columns of each row, the 2 lowest.
"""

from __future__ import annotations

import numpy as np

from minitrain.pruning.masks import M_GROUP, TWO_FOUR, keep_mask

BLOCK = 128  # B: columns updated together (and Bs: columns whose mask is chosen together), the paper's
DAMPENING = 0.01  # λ: the share of H's mean diagonal added to it


def inverse_hessian_factor(gram: np.ndarray, dampening: float = DAMPENING) -> np.ndarray:
    """U (in, in), upper triangular with UᵀU = H⁻¹, H = 2·gram + λ·mean(diag(2·gram))·I, gram = XᵀX (in, in)."""
    hessian = 2.0 * np.asarray(gram, dtype=np.float64)
    hessian[np.diag_indices_from(hessian)] += dampening * (np.mean(np.diag(hessian)) or 1.0)  # 0: nothing seen
    inverse = np.linalg.inv(hessian)
    return np.linalg.cholesky((inverse + inverse.T) / 2).T


def _block_mask(w: np.ndarray, d: np.ndarray, k: int) -> np.ndarray:
    """Pruned (rows, cols): the k lowest w² / d² of the block (ties: the earlier in C order first)."""
    pruned = np.zeros(w.size, dtype=bool)
    pruned[np.argsort((w**2 / d**2).ravel(), kind="stable")[:k]] = True
    return pruned.reshape(w.shape)


def sparsegpt_prune(weight: np.ndarray, gram: np.ndarray, sparsity: float, structure: str = "unstructured",
                    block: int = BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """(the pruned and updated weight, its keep mask), both (in, out) like `weight`; gram = XᵀX (in, in)."""
    w = np.array(weight, dtype=np.float64).T  # (out, in): the paper's rows and columns
    rows, cols = w.shape
    if structure == TWO_FOUR and (cols % M_GROUP or block % M_GROUP):
        raise ValueError(f"2:4 needs inputs in groups of {M_GROUP}; this layer has {cols}")
    u = inverse_hessian_factor(gram)
    pruned = np.zeros_like(w, dtype=bool)
    for start in range(0, cols, block):
        end = min(start + block, cols)
        w1, u1, errors = w[:, start:end], u[start:end, start:end], np.zeros((rows, end - start))
        d = np.diag(u1)
        if structure != TWO_FOUR:
            k = round(sparsity * rows * end) - round(sparsity * rows * start)
            pruned[:, start:end] = _block_mask(w1, d, k)
        for i in range(end - start):
            if structure == TWO_FOUR and i % M_GROUP == 0:  # the 2 lowest w²/d² of these 4 columns, each row
                scores = (w1[:, i:i + M_GROUP] ** 2 / d[i:i + M_GROUP] ** 2).T  # (4, rows): keep_mask's layout
                pruned[:, start + i:start + i + M_GROUP] = ~keep_mask(scores, 0.5, TWO_FOUR).T
            column = w1[:, i]
            errors[:, i] = np.where(pruned[:, start + i], column, 0.0) / d[i]
            w1[:, i:] -= np.outer(errors[:, i], u1[i, i:])  # column i itself: its pruned entries become 0
        w[:, end:] -= errors @ u[start:end, end:]  # the lazy batch update of every later column
    w[pruned] = 0.0  # exactly zero (the update leaves them at rounding's ±ε)
    return w.T.astype(weight.dtype), ~pruned.T
