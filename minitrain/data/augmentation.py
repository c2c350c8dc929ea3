"""Data augmentation (`data.augmentation`): random changes to training batches, so the model sees more variety.

Images (rows of a table read as `data.image_shape` [H, W(, C)] pixels, row-major, channels last), after
preprocessing:

    random_crop {size, padding}     pad p zeros on every side, then cut a size = [H, W] window at a random offset
                                    (0..2p in each direction): the digit moves by up to p pixels
    horizontal_flip {probability}   mirror the image left-right with this probability
    normalize {mean, std}           (x − mean_c) / std_c per channel: not random, so it is applied to every split
                                    and by `predict` too (it is part of the saved pipeline, `image_normalize`)

Text (a language model's character sequences), never touching the positions the loss counts (with
`loss_on: answer`, the conjugated form and EOS stay as they are; with `loss_on: all`, every character may change):

    random_swap {probability}       each character swaps places with the next one with this probability
    random_delete {probability}     each character is dropped with this probability

Augmentation changes training batches only; val, test and `predict` see the data as it is (but normalized). The
random draws come from the data seed: batch k of epoch e draws from `Generator(PCG64([data_seed, e, k]))`, so a
run resumed from a checkpoint draws exactly what the uninterrupted run drew, with no extra state to save.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from minitrain.data.batch import Batch
from minitrain.data.batcher import TrainBatcher
from minitrain.data.packing import pack
from minitrain.data.text_examples import Example

RANDOM_IMAGE = ("random_crop", "horizontal_flip")
RANDOM_TEXT = ("random_swap", "random_delete")
Augment = Callable[[Any, np.random.Generator], Any]


def image_normalize(x: np.ndarray, shape: Sequence[int], mean: Sequence[float], std: Sequence[float]) -> np.ndarray:
    """(x − mean_c) / std_c per channel of rows `x` (N, H·W·C) read as images of `shape`."""
    images = x.reshape(len(x), *_hwc(shape))
    return ((images - np.asarray(mean)) / np.asarray(std)).reshape(len(x), -1).astype(x.dtype)


def _hwc(shape: Sequence[int]) -> tuple[int, int, int]:
    return (shape[0], shape[1], shape[2] if len(shape) == 3 else 1)


def random_crop(images: np.ndarray, padding: int, rng: np.random.Generator) -> np.ndarray:
    """Each (H, W, C) image zero-padded by `padding`, then an H×W window at a random offset."""
    n, height, width, _ = images.shape
    padded = np.pad(images, ((0, 0), (padding, padding), (padding, padding), (0, 0)))
    offsets = rng.integers(0, 2 * padding + 1, size=(n, 2))
    return np.stack([padded[i, dy : dy + height, dx : dx + width] for i, (dy, dx) in enumerate(offsets)])


def horizontal_flip(images: np.ndarray, probability: float, rng: np.random.Generator) -> np.ndarray:
    """Each image mirrored left-right with `probability`."""
    flip = rng.random(len(images)) < probability
    out = images.copy()
    out[flip] = out[flip, :, ::-1]
    return out


def image_augment(steps: Sequence[tuple[str, Mapping[str, Any]]], shape: Sequence[int]) -> Augment:
    """The random image steps, in order, as a function of a table batch and an RNG."""

    def augment(batch: Any, rng: np.random.Generator) -> Any:
        images = batch.input.reshape(len(batch.input), *_hwc(shape))
        for kind, options in steps:
            if kind == "random_crop":
                images = random_crop(images, options["padding"], rng)
            elif kind == "horizontal_flip":
                images = horizontal_flip(images, options["probability"], rng)
        return batch._replace(input=np.ascontiguousarray(images.reshape(len(images), -1)))

    return augment


def text_augment(steps: Sequence[tuple[str, Mapping[str, Any]]]) -> Augment:
    """The text steps, in order, as a function of a language-model `Batch` and an RNG."""

    def augment(batch: Batch, rng: np.random.Generator) -> Batch:
        lines = [Example(*_edit_row(batch, i, steps, rng), f"row {i}") for i in range(len(batch.input))]
        # One edited line a row, padded with 0 (PAD): edits only ever shorten a line, so each still fits.
        return Batch(*pack(lines, batch.input.shape[1], "pad")[:4])

    return augment


def _edit_row(batch: Batch, row: int, steps, rng: np.random.Generator) -> tuple[list[int], list[bool]]:
    """Row `row` as its whole line [BOS, chars..., EOS] with, per token, whether it is a counted target; edited."""
    n = int(batch.attn_pad_mask[row].sum())
    line = [*batch.input[row, :n].tolist(), int(batch.target[row, n - 1])]
    counted = [False, *batch.loss_mask[row, :n].tolist()]  # token j is the target at position j − 1

    def editable(j: int) -> bool:  # a character (not BOS or EOS) that the loss ignores
        return 0 < j < len(line) - 1 and not counted[j]

    for kind, options in steps:
        p = options["probability"]
        if kind == "random_swap":
            for j in range(1, len(line) - 2):
                if editable(j) and editable(j + 1) and rng.random() < p:
                    line[j], line[j + 1] = line[j + 1], line[j]
        elif kind == "random_delete":
            keep = [not (editable(j) and rng.random() < p) for j in range(len(line))]
            line = [t for t, k in zip(line, keep, strict=True) if k]
            counted = [c for c, k in zip(counted, keep, strict=True) if k]
    return line, counted


class AugmentedBatcher:
    """A `TrainBatcher` whose batches go through `augment(batch, rng)`, the RNG drawn from (seed, epoch, batch)
    (see the module docstring); its state is the wrapped batcher's, so checkpoints and resume are unchanged."""

    def __init__(self, batcher: TrainBatcher, augment: Augment, seed: int) -> None:
        self.batcher, self.augment, self.seed = batcher, augment, seed

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        batch = next(self.batcher)
        # After next(): position counts the batches handed out this epoch, this one included.
        rng = np.random.Generator(np.random.PCG64([self.seed, self.batcher.epoch, self.batcher.position]))
        return self.augment(batch, rng)

    def __getattr__(self, name: str) -> Any:  # num_records, steps_per_epoch, state_dict, ...: the batcher's
        return getattr(self.batcher, name)


def augmenter(steps: Sequence[Any], image_shape: Sequence[int] | None) -> Augment | None:
    """The random part of `data.augmentation` (config entries with .kind/.options) as one function, or None."""
    pairs = [(step.kind, step.options.model_dump()) for step in steps]
    images = [(k, o) for k, o in pairs if k in RANDOM_IMAGE]
    text = [(k, o) for k, o in pairs if k in RANDOM_TEXT]
    if images:
        return image_augment(images, image_shape)
    if text:
        return text_augment(text)
    return None
