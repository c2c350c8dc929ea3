"""Activation (gradient) checkpointing: keep a block's input, not its activations, and recompute them in backward.

    y = checkpoint(block, x, params)      the same y, and the same gradients to the last bit, as y = block(x)

The tape normally keeps every intermediate result of the forward pass until backward has used it: for a decoder
layer of SmolLM2-135M on 4 × 256 tokens that is ~70 MB, 2.1 GB over its 30 layers. A checkpointed block runs
without recording (`no_grad`), so only its input x and its output stay; the whole block is one tape node. Its
backward runs the block again, this time recording onto a tape of its own, and back-propagates the incoming
gradient through that: the activations of one block exist at a time. The price is a second forward pass of the
block (Chen et al. 2016, "Training deep nets with sublinear memory cost"; PyTorch's torch.utils.checkpoint).

The recomputation must compute what the first pass did: the block has to be a deterministic function of x, its
parameters and the random generators named in `rngs` (its dropout's), whose states are saved before the first
pass, set back for the recomputation, and restored afterwards. `params` are the block's parameters that need
gradients (they, not only x, decide whether the node is recorded: the first layer's input, a frozen embedding's
output, needs none); their gradients are accumulated by the inner backward, as without checkpointing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from minitrain.autograd.tensor import TAPE, Tensor, no_grad


def checkpoint(block: Callable[[Tensor], Tensor], x: Tensor, params: Sequence[Tensor],
               rngs: Sequence[np.random.Generator] = ()) -> Tensor:
    """y = block(x) as one tape node whose backward recomputes block(x); see the module docstring."""
    states = [rng.bit_generator.state for rng in rngs]
    with no_grad():
        y = block(x).data

    def backward(g: np.ndarray) -> None:
        later = [rng.bit_generator.state for rng in rngs]
        for rng, state in zip(rngs, states, strict=True):
            rng.bit_generator.state = state
        inner = Tensor(x.data, requires_grad=x.requires_grad, dtype=x.dtype)  # a leaf: it keeps its .grad
        outer_nodes, outer_recording = TAPE.nodes, TAPE.recording
        TAPE.nodes, TAPE.recording = [], True
        try:
            out = block(inner)
            if out.requires_grad:
                out.backward(g)
        finally:
            TAPE.nodes, TAPE.recording = outer_nodes, outer_recording
            for rng, state in zip(rngs, later, strict=True):
                rng.bit_generator.state = state
        if x.requires_grad and inner.grad is not None:
            x._accumulate(inner.grad)

    return Tensor._from_op(y, (x, *params), backward)
