"""The teacher(s) of a distillation run: loaded when the run starts, never updated, and asked for their softened
predictions on each training batch in eval mode (no dropout) without a tape (no graph is built, no gradient
reaches them).

A teacher is any source `model.init_from` reads (minitrain/hub/sources.py): a run folder, a model file, an
export folder, a Hub id, a LoRA run (merged into its base). It must predict over the student's ids: the same
vocabulary size, the same characters when both vocabularies are known (a run folder records its vocab.json; a
bare model file does not, and then only the size can be compared), and a context at least as long as the
student's. Since the teacher is a fixed function of the batch, a resumed run sees exactly the targets an
uninterrupted one saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from minitrain.common.errors import BAD_INPUT, UserError
from minitrain.data.tokenizer import SPECIALS, CharTokenizer
from minitrain.distillation.loss import soft_targets
from minitrain.hub.sources import KEY as INIT_FROM
from minitrain.hub.sources import load_model
from minitrain.nn import Module, inference

KEY = "distillation.teacher"


class Teachers:
    """The teacher models and their weights (summing to 1); `targets(batch)` is their softened mixture. `sources`:
    where each came from, for messages and fingerprints."""

    def __init__(self, models: Sequence[Module], weights: Sequence[float], temperature: float,
                 sources: Sequence[str] = ()) -> None:
        self.models, self.weights, self.temperature = list(models), list(weights), temperature
        self.sources = list(sources) or [f"teacher {i + 1}" for i in range(len(self.models))]

    def targets(self, batch: Any) -> np.ndarray:
        """p_T = Σ_i w_i softmax(z_i / T) at every position of `batch` (already trimmed of padding): (B, T, V)
        float64."""
        logits = []
        for model in self.models:
            with inference(model):
                out, _ = model(batch.input, attn_pad_mask=batch.attn_pad_mask)
            logits.append(out.data)
        return soft_targets(logits, self.weights, self.temperature)


def load_teacher(source: str, student: dict[str, Any], vocab_path: str | Path | None) -> Module:
    """The teacher model of `source`, checked to read the student's ids; every problem is one UserError naming
    `distillation.teacher` and the source."""
    try:
        model, teacher_vocab = load_model(source)
    except UserError as exc:
        # The loader names model.init_from, whose sources it reads; here the same source is a teacher.
        message = str(exc).removeprefix(f"{INIT_FROM} {source}: ")
        raise UserError(f"{KEY} {source}: {message}", exc.exit_code) from None
    theirs, ours = model.config.get("vocab_size"), student.get("vocab_size")
    if theirs != ours:
        raise UserError(f"{KEY} {source}: the teacher predicts over {theirs} ids, the student over {ours}: both "
                        "must share one vocabulary", BAD_INPUT)
    if teacher_vocab is not None and vocab_path is not None and Path(vocab_path).is_file():
        theirs_chars, ours_chars = CharTokenizer.load(teacher_vocab).chars, CharTokenizer.load(vocab_path).chars
        if theirs_chars != ours_chars:
            # The first character that differs (or is missing from the shorter list), shown with its token id.
            first = next((i for i, (a, b) in enumerate(zip(theirs_chars, ours_chars, strict=False)) if a != b),
                         min(len(theirs_chars), len(ours_chars)))
            shown = [repr(chars[first]) if first < len(chars) else "nothing" for chars in (theirs_chars, ours_chars)]
            raise UserError(f"{KEY} {source}: its vocabulary ({teacher_vocab}) differs from data.vocab_path "
                            f"({vocab_path}) first at id {first + len(SPECIALS)} ({shown[0]} against {shown[1]}): "
                            "the same ids must mean the same characters", BAD_INPUT)
    context, needed = model.config.get("max_seq_len"), student.get("max_seq_len")
    if context is not None and needed is not None and context < needed:
        raise UserError(f"{KEY} {source}: the teacher reads at most {context} positions, the student's rows hold "
                        f"up to {needed} (model.max_seq_len)", BAD_INPUT)
    return model
