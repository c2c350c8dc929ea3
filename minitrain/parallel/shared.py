"""The local backend's shared memory: one `multiprocessing.shared_memory` block that the training process and its
workers map, so a step moves no pickled data, only a few bytes of "go" and "done" through each worker's pipe.

    block = SharedBlock.create(layout)      the training process (it owns the block)
    block.unlink()                          once every worker has it mapped: the name goes, the mappings stay
    block = SharedBlock.attach(name, layout)  a worker
    block.params                            (P,) the whole flat parameter buffer, written once per step
    block.write_batch(j, batch, weight)     micro-batch slot j: its (rows, cols) arrays and its loss weight
    block.read_batch(j) -> (batch, weight)  views of slot j's arrays, C-contiguous, trimmed to (rows, cols)
    block.grads[j], block.losses[j]         micro-batch j's gradient (G,) and loss, written by its worker

Layout (`Layout`: sizes only, so both sides compute the same offsets): params, then per micro-batch slot: input and
target int64 (B·T), the attention mask as int32 (B·T; bool or a packed row's segment ids), loss_mask bool (B·T),
a header of 4 float64 (rows, cols, weight, whether the mask is bool), the loss (float64) and the gradient (G).
Each array starts at a 64-byte boundary.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import asdict, dataclass
from multiprocessing import shared_memory
from pathlib import Path
from typing import Any

import numpy as np

from minitrain.common.lifeline import process_alive
from minitrain.data.batch import Batch

_ALIGN = 64
PREFIX = "minitrain-dp-"  # a block's name: PREFIX, its owner's pid, "-", 8 random hex digits


@dataclass(frozen=True)
class Layout:
    """`slots` micro-batches of at most `rows` × `cols`; `params` and `grad` elements of `dtype`."""

    slots: int
    rows: int
    cols: int
    params: int
    grad: int
    dtype: str

    def arrays(self) -> list[tuple[str, int, np.dtype, int]]:
        """(name, slot or -1, dtype, elements) of every array in block order."""
        dt, cells = np.dtype(self.dtype), self.rows * self.cols
        out: list[tuple[str, int, np.dtype, int]] = [("params", -1, dt, self.params)]
        for j in range(self.slots):
            out += [("input", j, np.dtype(np.int64), cells), ("target", j, np.dtype(np.int64), cells),
                    ("mask", j, np.dtype(np.int32), cells), ("loss_mask", j, np.dtype(np.bool_), cells),
                    ("header", j, np.dtype(np.float64), 4), ("loss", j, np.dtype(np.float64), 1),
                    ("grad", j, dt, self.grad)]
        return out

    def size(self) -> int:
        offset = 0
        for _, _, dtype, n in self.arrays():
            offset = -(-offset // _ALIGN) * _ALIGN + n * dtype.itemsize
        return max(offset, 1)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class SharedBlock:
    """Numpy views onto one shared-memory block laid out by `layout`."""

    def __init__(self, memory: shared_memory.SharedMemory, layout: Layout, owner: bool) -> None:
        self.memory, self.layout, self.owner = memory, layout, owner
        views: dict[tuple[str, int], np.ndarray] = {}
        offset = 0
        for name, slot, dtype, n in layout.arrays():
            offset = -(-offset // _ALIGN) * _ALIGN
            views[name, slot] = np.ndarray((n,), dtype=dtype, buffer=memory.buf, offset=offset)
            offset += n * dtype.itemsize
        self._views = views
        self.params = views["params", -1]
        self.grads = [views["grad", j] for j in range(layout.slots)]
        self.losses = [views["loss", j] for j in range(layout.slots)]

    @classmethod
    def create(cls, layout: Layout) -> SharedBlock:
        """A new block, named after this process; first removed: the blocks of owners no longer alive (killed
        while their workers started, before unlink)."""
        for left in Path("/dev/shm").glob(f"{PREFIX}*-*"):
            if left.name.split("-")[2].isdigit() and not process_alive(int(left.name.split("-")[2])):
                left.unlink(missing_ok=True)
        name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        return cls(shared_memory.SharedMemory(name, create=True, size=layout.size()), layout, owner=True)

    @classmethod
    def attach(cls, name: str, layout: Layout | dict[str, Any]) -> SharedBlock:
        layout = layout if isinstance(layout, Layout) else Layout(**layout)
        # Python 3.11 registers an attached block with the resource tracker too; the workers share the training
        # process's tracker (spawn passes it on), where the name is already registered, so this adds nothing.
        return cls(shared_memory.SharedMemory(name=name), layout, owner=False)

    @property
    def name(self) -> str:
        return self.memory.name

    def write_batch(self, j: int, batch: Batch, weight: float) -> None:
        rows, cols = batch.input.shape
        if rows > self.layout.rows or cols > self.layout.cols:
            raise ValueError(f"data parallel: a ({rows}, {cols}) batch does not fit the shared slots "
                             f"({self.layout.rows}, {self.layout.cols})")
        n = rows * cols
        views = self._views
        for key, array in (("input", batch.input), ("target", batch.target), ("mask", batch.attn_pad_mask),
                           ("loss_mask", batch.loss_mask)):
            views[key, j][:n].reshape(rows, cols)[...] = array
        views["header", j][:] = (rows, cols, weight, float(batch.attn_pad_mask.dtype == np.bool_))

    def read_batch(self, j: int) -> tuple[Batch, float]:
        views = self._views
        rows, cols, weight, is_bool = views["header", j]
        rows, cols = int(rows), int(cols)
        n = rows * cols

        def shaped(key: str) -> np.ndarray:
            return views[key, j][:n].reshape(rows, cols)

        mask = shaped("mask")
        batch = Batch(shaped("input"), shaped("target"), mask.astype(np.bool_) if is_bool else mask,
                      shaped("loss_mask"))
        return batch, float(weight)

    def unlink(self) -> None:
        """Remove the block's name (the owner, once): the memory lives on while a process maps it and is freed
        by the kernel when the last one ends, however it ends."""
        if self.owner:
            self.memory.unlink()
            self.owner = False

    def close(self) -> None:
        """Unmap the block; the owner also removes it, if unlink did not."""
        self.params = self.grads = self.losses = self._views = None  # no view may outlive the mapping
        self.memory.close()
        self.unlink()
