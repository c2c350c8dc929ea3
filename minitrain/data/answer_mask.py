"""Which tokens of a text example count in the loss: the answer's loss mask (lab 08).

A record is tokenized in pieces cut where each answer starts and ends (text_examples.py finds the cuts):

    pieces = [context, answer, context, answer, ..., context?]     even pieces: never learned
                                                                   odd pieces: an answer (an assistant turn,
                                                                   or a completion and its EOS)

and the example's ids are the pieces joined. `mask[i]` is True when predicting `ids[i]` from `ids[:i]` counts in
the loss, so `mask[0]` is always False: nothing predicts the first token.

    loss_on = "completion"   an answer piece counts up to and with its LAST end token (EOS): ChatML writes
                             `camino<|im_end|>\\n`, and the newline after `<|im_end|>` is the template's, not
                             the answer's; a piece with no EOS counts whole. Context pieces count nothing.
    loss_on = "all"          every token but the first (the question too)

For ChatML's `…assistant\\n` | `camino<|im_end|>\\n` as ids [a, n] [c, e, n] (the answer piece ends with the
template's newline), completion gives [F, F, T, T, F]: the model is graded on writing `camino` and on stopping,
not on the question it was asked, nor on the newline the template always writes.
"""

from __future__ import annotations

from collections.abc import Sequence


def answer_mask(pieces: Sequence[Sequence[int]], eos_id: int | None, loss_on: str = "completion") -> list[bool]:
    """The loss mask over the ids `pieces` joined (module docstring): for `loss_on="completion"` True on each odd
    piece's tokens up to and with its last `eos_id`, False elsewhere; for `"all"` True everywhere; `mask[0]` is
    False either way. One bool per token, `sum(len(p) for p in pieces)` of them."""
    mask: list[bool] = []
    for k, piece in enumerate(pieces):
        if loss_on == "all" or k % 2 == 0:
            mask += [loss_on == "all"] * len(piece)
            continue
        counted = len(piece)
        if eos_id is not None and eos_id in piece:  # the answer ends at its end token; what follows is template
            counted = len(piece) - list(piece)[::-1].index(eos_id)
        mask += [True] * counted + [False] * (len(piece) - counted)
    if mask:
        mask[0] = False  # nothing predicts the first token
    return mask
