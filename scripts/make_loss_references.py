"""Write tests/data/losses/torch_references.safetensors: PyTorch's triplet margin loss and a reference NT-Xent on
fixed float64 inputs, values and input gradients, for tests/autograd/test_embedding_losses.py. Run with an
environment that has torch (not a minitrain dependency):

    python scripts/make_loss_references.py [OUT]        (OUT: tests/data/losses/torch_references.safetensors)

Triplets: torch.nn.TripletMarginLoss for every (p, margin, swap, reduction) in CASES; "none" is backpropagated
through a fixed weight per row. NT-Xent: SimCLR's loss written the usual way in torch (cosine similarities over
the 2N rows, the diagonal masked, cross-entropy against the other view), for each temperature in TEMPERATURES.
"""

from __future__ import annotations

import sys

import numpy as np
import torch
from safetensors.numpy import save_file

CASES = [(2.0, 1.0, False, "mean"), (2.0, 1.0, True, "mean"), (1.0, 0.5, False, "sum"), (3.0, 2.0, True, "none"),
         (1.5, 0.3, True, "sum")]
TEMPERATURES = [0.1, 0.5, 1.0]


def nt_xent(z1: torch.Tensor, z2: torch.Tensor, temperature: float) -> torch.Tensor:
    """SimCLR's NT-Xent, as its reference implementations write it."""
    n = z1.shape[0]
    z = torch.cat([z1, z2])
    sim = torch.nn.functional.cosine_similarity(z.unsqueeze(1), z.unsqueeze(0), dim=2) / temperature
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool), float("-inf"))
    labels = torch.cat([torch.arange(n, 2 * n), torch.arange(n)])
    return torch.nn.functional.cross_entropy(sim, labels)


def main(out: str = "tests/data/losses/torch_references.safetensors") -> None:
    rng = np.random.default_rng(48)
    data = {name: rng.normal(size=(6, 4)) for name in ("anchor", "positive", "negative", "z1", "z2")}
    data["row_weights"] = rng.normal(size=6)
    for i, (p, margin, swap, reduction) in enumerate(CASES):
        a, pos, neg = (torch.tensor(data[k], requires_grad=True) for k in ("anchor", "positive", "negative"))
        loss = torch.nn.TripletMarginLoss(margin=margin, p=p, swap=swap, reduction=reduction)(a, pos, neg)
        value = loss.detach().numpy().copy()
        (loss * torch.tensor(data["row_weights"]) if reduction == "none" else loss).sum().backward()
        data[f"triplet{i}.loss"] = np.atleast_1d(value)
        for key, x in (("anchor", a), ("positive", pos), ("negative", neg)):
            data[f"triplet{i}.grad.{key}"] = x.grad.numpy()
    for i, t in enumerate(TEMPERATURES):
        z1, z2 = (torch.tensor(data[k], requires_grad=True) for k in ("z1", "z2"))
        loss = nt_xent(z1, z2, t)
        loss.backward()
        data[f"nt_xent{i}.loss"] = np.atleast_1d(loss.detach().numpy())
        data[f"nt_xent{i}.grad.z1"], data[f"nt_xent{i}.grad.z2"] = z1.grad.numpy(), z2.grad.numpy()
    save_file({k: np.ascontiguousarray(v) for k, v in data.items()}, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
