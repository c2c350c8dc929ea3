"""`minitrain.save(state_dict, path)` and `minitrain.load(path)`: PyTorch's habit, for state dicts, as safetensors.

`torch.save` pickles any object, and unpickling runs whatever code the file names. These write and read only
name -> array (Tensors as their arrays) as safetensors, a JSON header and raw bytes, dtypes and shapes kept: nothing
in the file runs, and `model.load_state_dict(minitrain.load(path))` restores a model exactly.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np
import safetensors
import safetensors.numpy

from minitrain.autograd.tensor import Tensor
from minitrain.common.errors import UserError
from minitrain.common.io import atomic_write_bytes, regular_file_problem

NO_PICKLE = ("minitrain never pickles: a state dict holds arrays only (minitrain.save(model.state_dict(), path); a "
             "training state with its optimizer is minitrain/checkpoint.py's)")


def save(state_dict: Mapping[str, np.ndarray | Tensor], path: str | os.PathLike) -> None:
    """Write `state_dict` (str -> array or Tensor) to `path` as one safetensors file, atomically."""
    if not isinstance(state_dict, Mapping):
        raise TypeError(f"minitrain.save: got a {type(state_dict).__name__}, not a state dict; {NO_PICKLE}")
    arrays = {}
    for name, value in state_dict.items():
        array = value.data if isinstance(value, Tensor) else value
        if not isinstance(name, str) or not isinstance(array, np.ndarray):
            raise TypeError(f"minitrain.save: {name!r} is {type(value).__name__}, not an array; {NO_PICKLE}")
        arrays[name] = np.ascontiguousarray(array)
    atomic_write_bytes(path, safetensors.numpy.save(arrays))


def load(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """The state dict `save` wrote: name -> NumPy array, in the file's dtypes."""
    if problem := regular_file_problem(path):  # a missing file is no pickle
        raise UserError(f"minitrain.load: {path} {problem}", 2)
    try:
        return safetensors.numpy.load_file(path)
    except (OSError, safetensors.SafetensorError) as e:
        raise UserError(f"{path}: not a safetensors file ({e}); a torch.save file is a pickle, which minitrain never "
                        "opens: load it with torch and write it with safetensors.torch.save_file", 2) from None
