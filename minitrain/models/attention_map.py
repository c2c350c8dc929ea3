"""Where a trained MiniGPT looks: every layer's and head's attention over one line, drawn as heatmaps.

    attention_figure(model, tokenizer, "vender|C4|", "attention.png")

The prompt is completed greedily (so the map covers the answer the model writes), the whole line
`<bos> prompt answer` is run once in inference mode, and `MiniGPT.attention_probs` returns the (T, T) matrix of
each head of each layer: row i is how position i spreads its attention over positions 0..i. One panel per head,
one row of panels per layer. `scripts/plot_attention.py` is the command-line face of it.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from minitrain.common.errors import ArgumentError
from minitrain.common.figures import save_figure, subplots
from minitrain.data.tokenizer import SPECIALS, CharTokenizer
from minitrain.models.sampling import generate

SPECIAL_LABELS = {"<bos>": "⟨s⟩", "<eos>": "⟨/s⟩", "<pad>": "·"}


def attention_line(model, tokenizer: CharTokenizer, prompt: str, complete: bool = True) -> tuple[list[int], str]:
    """The ids whose attention is drawn (BOS, prompt, the greedy answer and its EOS) and the answer text."""
    if not hasattr(model, "attention_probs"):
        raise ArgumentError(f"attention: a {type(model).__name__} has no attention layers; only MiniGPT does")
    context = model.config["max_seq_len"]
    ids = [tokenizer.bos_id, *tokenizer.encode(prompt)]
    if len(ids) > context:
        raise ArgumentError(f"attention: the prompt is {len(ids)} positions with BOS, the model reads {context}")
    answer = generate(model, tokenizer, prompt, context - len(ids)) if complete else ""
    ids += tokenizer.encode(answer)
    if complete and len(ids) < context:
        ids.append(tokenizer.eos_id)  # generation stopped on EOS: show the position that decided to stop
    return ids, answer


def attention_figure(
    model, tokenizer: CharTokenizer, prompt: str, path: str | os.PathLike, complete: bool = True
) -> tuple[Path, str]:
    """Draw every head's attention over `prompt` (and its greedy completion) into the PNG `path`; return the path
    and the completion."""
    ids, answer = attention_line(model, tokenizer, prompt, complete)
    probs = model.attention_probs(np.asarray([ids], dtype=np.int64))[:, 0]  # (L, H, T, T)
    labels = [SPECIAL_LABELS[SPECIALS[i]] if i < len(SPECIALS) else tokenizer.decode([i]) for i in ids]
    n_layer, n_head, size = probs.shape[0], probs.shape[1], len(ids)
    fig, axes = subplots(n_layer, n_head, figsize=(2.4 * n_head + 1.0, 2.5 * n_layer + 0.5), dpi=120,
                         squeeze=False, layout="constrained")  # fmt: skip
    for layer in range(n_layer):
        for head in range(n_head):
            ax = axes[layer, head]
            image = ax.imshow(probs[layer, head], cmap="viridis", vmin=0.0, vmax=1.0)
            ax.set_title(f"layer {layer} · head {head}", fontsize=8)
            ax.set_xticks(range(size), labels, fontsize=5.5, family="monospace")
            ax.set_yticks(range(size), labels, fontsize=5.5, family="monospace")
            ax.tick_params(length=0, pad=1)
    fig.colorbar(image, ax=axes, shrink=0.5, label="attention weight")
    fig.suptitle(f"{prompt}{answer}: row = position attending, column = position attended to", fontsize=9)
    save_figure(fig, path)
    return Path(path), answer
