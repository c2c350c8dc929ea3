"""Adam (Kingma & Ba) as `torch.optim.Adam`: weight decay is an L2 term added to the gradient, g ← g + wd·p,
which then passes through the adaptive scaling (unlike AdamW, where decay shrinks p directly).

    g ← g + wd·p;  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;  p ← p − lr/(1−β1ᵗ) · m / (√v/√(1−β2ᵗ) + ε)
"""

from __future__ import annotations

from minitrain.optim.adamw import AdamW


class Adam(AdamW):
    """Adam with `torch.optim.Adam`'s defaults (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight_decay 0)."""

    name = "adam"
    decoupled = False
    weight_decay: float = 0.0
