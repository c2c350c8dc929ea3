"""The knowledge-distillation loss (Hinton, Vinyals & Dean 2015, "Distilling the Knowledge in a Neural Network").

With student logits z_S and the teacher's softened distribution p_T, both over V ids at each position,

    p_S = softmax(z_S / T)
    soft = T² · (1/N) Σ_pos mask · KL(p_T ‖ p_S),    KL(p ‖ q) = Σ_v p_v (log p_v − log q_v)
    loss = alpha · hard + (1 − alpha) · soft

where `hard` is the model's own cross-entropy on the data (the token mean over the N positions the loss mask
counts) and the soft term is averaged over exactly those N positions. alpha weighs the hard loss, 1 − alpha the
soft one. The T² keeps the soft term's gradient the same size as the hard one's whatever T is:

    ∂soft/∂z_S = T · (p_S − p_T) · mask / N

Several teachers (weights w_i summing to 1) give one target, the mixture p_T = Σ_i w_i softmax(z_i / T). The
alternative, Σ_i w_i KL(p_i ‖ p_S), has exactly the same gradient (the two differ by Σ_i w_i H(p_i) − H(p_T), a
constant of the teachers); the mixture is kept because its loss is 0 when the student matches the ensemble, so
the logged number still reads as "how far from the teachers".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from minitrain.autograd.tensor import Tensor
from minitrain.evaluation.table_metrics import log_softmax_rows


def soft_targets(teacher_logits: Sequence[np.ndarray], weights: Sequence[float], temperature: float) -> np.ndarray:
    """p_T = Σ_i w_i softmax(z_i / T): each (..., V) logits array softened, then mixed; float64, (..., V)."""
    mixed = None
    for logits, weight in zip(teacher_logits, weights, strict=True):
        p = weight * np.exp(log_softmax_rows(np.asarray(logits, dtype=np.float64) / temperature))
        mixed = p if mixed is None else mixed + p
    return mixed


def soft_loss(student_logits: Tensor, targets: np.ndarray, mask: np.ndarray, temperature: float) -> Tensor:
    """T² · mean over the masked positions of KL(targets ‖ softmax(student_logits / T)); one tape node.

    student_logits (..., V) Tensor; targets (..., V) probabilities (rows summing to 1); mask (...) bool. The
    sums run in float64; the loss and the gradient come back in the logits' dtype."""
    if targets.shape != student_logits.shape:
        raise ValueError(f"soft_loss: student logits {student_logits.shape} and teacher targets {targets.shape} "
                         "differ: the teacher must read the same ids over the same vocabulary")
    mask = np.asarray(mask, dtype=bool)
    count = int(mask.sum())
    if count == 0:
        raise ValueError("soft_loss: the mask selects no position, so the mean is undefined")
    t = float(temperature)
    log_q = log_softmax_rows(student_logits.data.astype(np.float64) / t)
    # 0 · log 0 = 0: a teacher that rules an id out exactly contributes nothing for it (and no NaN).
    log_p = np.log(np.where(targets > 0, targets, 1.0))
    kl = (targets * (log_p - log_q)).sum(axis=-1)
    loss = np.asarray(t * t * kl[mask].sum() / count, dtype=student_logits.dtype)

    def backward(g: np.ndarray) -> None:
        scale = (float(g) * t / count) * mask[..., None]
        student_logits._accumulate((scale * (np.exp(log_q) - targets)).astype(student_logits.dtype))

    return Tensor._from_op(loss, (student_logits,), backward)


def distillation_loss(hard: Tensor, soft: Tensor, alpha: float) -> Tensor:
    """alpha · hard + (1 − alpha) · soft (alpha 1: the hard loss alone; 0: the soft loss alone)."""
    if alpha == 1.0:
        return hard
    if alpha == 0.0:
        return soft
    return hard * alpha + soft * (1.0 - alpha)
