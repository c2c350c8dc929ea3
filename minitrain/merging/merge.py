"""`minitrain merge CONFIG.yaml -o OUT`: read the models a merge config names, check that they can be
merged, merge them tensor by tensor with its method, and write the result.

    OUT   a minitrain model file (.safetensors) when the models are minitrain's (MiniGPT runs, model files,
          exports; LoRA runs merged into their base first), with `merged_from` in its metadata: the method, the
          models as the config names them, each one's weight and density, the seed
          a Hugging Face folder (config.json, model.safetensors, the tokenizer) when they are pretrained bases
          (a Llama-family or GPT-2 base, or runs on one), written with base_model's tokenizer and config

Either is what `minitrain sample`, `eval` and `export` read. The same config gives the same bytes: nothing of the
moment (time, absolute paths) is written, and DARE's masks come from the config's seed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from minitrain.common.errors import UserError
from minitrain.hub.pretrained import export_hf_folder, is_llama
from minitrain.merging.methods import MERGE_METHODS
from minitrain.merging.parents import Parent, check_compatible, load_parent, tensor_order
from minitrain.merging.spec import MergeSpec, read_spec
from minitrain.runs.model_files import save_model_file


def merge_states(spec: MergeSpec, base: dict[str, np.ndarray] | None,
                 inputs: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Every tensor merged by spec.merge_method (`inputs`: the states of spec.inputs(), in order), in
    `tensor_order` of the base's names (or the first input's)."""
    merge = MERGE_METHODS[spec.merge_method].fn
    weights = [spec.value(e, "weight", 1.0) for e in spec.inputs()]
    if not np.isfinite(sum(weights)):
        raise UserError(f"merge: the weights {weights} sum past the largest float; nothing was written", 2)
    merged = {}
    for name in tensor_order(base if base is not None else inputs[0]):
        tensors = [state[name] for state in inputs]
        with np.errstate(all="ignore"):  # a weight sum of 0 or an overflow: refused below, not warned about
            merged[name] = np.ascontiguousarray(merge(spec, name, None if base is None else base[name], tensors,
                                                      spec.inputs()))
        if not np.isfinite(merged[name]).all():
            raise UserError(f"merge: tensor {name} comes out NaN or infinite with {spec.merge_method} and weights "
                            f"{weights} (weights that sum to 0, or too large); nothing was written", 2)
    return merged


def merge_models(config: str | Path, out: str | Path) -> dict[str, Any]:
    """Write OUT (module docstring) for the merge config at `config`; returns the facts recorded with it."""
    spec = read_spec(config)
    out = Path(out)
    names = ([spec.base()] if spec.base() else []) + [e.model for e in spec.inputs()]
    parents = [load_parent(name) for name in names]
    check_compatible(parents, names)
    states = [p.state for p in parents]
    merged = merge_states(spec, states[0], states[1:]) if spec.base() else merge_states(spec, None, states)
    facts = {
        "merge_method": spec.merge_method, "base_model": spec.base(),
        "models": [{"model": e.model, "weight": spec.value(e, "weight", 1.0),
                    "density": spec.value(e, "density", 1.0)} for e in spec.inputs()],
        "parameters": spec.parameters.model_dump(by_alias=True, exclude_none=True), "seed": spec.seed,
    }
    _write(parents[0], merged, out, facts)
    return {**facts, "out": str(out), "tensors": len(merged), "weights": int(sum(a.size for a in merged.values())),
            "kind": parents[0].kind}


def _write(first: Parent, state: dict[str, np.ndarray], out: Path, facts: dict[str, Any]) -> None:
    """OUT as the first model's kind of file: a minitrain model file, or a Hugging Face folder (module docstring)."""
    if first.kind == "minitrain":
        if out.is_dir() or out.suffix != ".safetensors":
            raise UserError(f"merge -o {out}: the models are minitrain's, so the merge is a model file: give a path "
                            f"ending in .safetensors", 2)
        save_model_file(out, state, first.model_config, {"merged_from": facts})
        return
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"merge -o {out}: exists and is not an empty folder; a merge of pretrained models is "
                        f"written as a new Hugging Face folder", 2)
    model_type = first.facts.get("hf_model_type") if is_llama(first.model_config) else None
    export_hf_folder(first.model_config, state, first.tokenizer, out, model_type)
