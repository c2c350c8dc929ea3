"""Check minitrain's conversion of a Gemma 2 / Gemma 3 GGUF against transformers reading the same file.

    python scripts/check_gguf_gemma.py [GGUF] [--torch-python PATH]

GGUF defaults to the Gemma 3 270M Q4_K_M file. Two processes: this one (the minitrain environment) converts the
file with `minitrain.formats.gguf_read` (`gguf_hf_config`: metadata -> a transformers config dict; `gguf_hf_state`:
every tensor dequantized under its Hugging Face name, norms - 1), timing it and noting its peak RSS; the other, run
with `--torch-python` (a scratch environment with torch + transformers + gguf; never a minitrain dependency),
loads it with `AutoModelForCausalLM.from_pretrained(folder, gguf_file=...)`, writes its state dict and config to a
temporary folder, and builds transformers' config class from minitrain's dict. Checked:

    (a) the config: transformers' config class built from minitrain's dict equals the one transformers' GGUF
        loader made, key by key (names of the file, not of the model, left out)
    (b) the state: the same tensor names, and max |difference| per tensor (target 0: both dequantize with the
        `gguf` package and subtract 1 from the norms in float32)
    (c) `read_gguf` (the shape and metadata checks before any tensor read, then the tensors): seconds to its
        answer, which is a refusal naming model_type until minitrain's Gemma model is merged
    (d) with minitrain's Gemma model present (from_hf_config reads gemma3_text): the model built from read_gguf's
        config and state, per-token log-probabilities of IDS against transformers' (max |difference|, target 1e-4)

Exit status 0 when (a), (b) and (d), where it runs, pass.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

DEFAULT_GGUF = "/tmp/gemma/gemma-3-270m-q4_k_m.gguf"
DEFAULT_TORCH = "/tmp/tv/bin/python"
IDS = [2, 818, 5279, 9380, 13182, 236743, 1717, 9899, 506, 31770, 4799, 236761]  # BOS, then any tokens (mod V)


def ids_of(config: dict) -> list[int]:
    return [i % config["vocab_size"] for i in IDS]
NOT_THE_MODEL = {"_name_or_path", "_model_name_or_path", "architectures", "transformers_version", "dtype",
                 "unk_token_id", "output_attentions", "output_hidden_states", "return_dict", "quantization_config"}


def transformers_side(gguf: str, out: str) -> None:
    """Run under the torch environment: transformers' state and config of the GGUF, and its config class built
    from minitrain's dict (out/minitrain_config.json)."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModelForCausalLM

    folder, name = str(Path(gguf).parent), Path(gguf).name
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32).eval()
    state = {k: v.contiguous() for k, v in model.state_dict().items()
             if not (k == "lm_head.weight" and model.config.tie_word_embeddings)}
    save_file(state, f"{out}/hf_state.safetensors")
    ids = ids_of(json.loads(Path(f"{out}/minitrain_config.json").read_text()))
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].double()
    logprobs = torch.log_softmax(logits, -1)[torch.arange(len(ids) - 1), torch.tensor(ids[1:])]
    np.save(f"{out}/logprobs.npy", logprobs.numpy())
    ours = json.loads(Path(f"{out}/minitrain_config.json").read_text())
    built = AutoConfig.for_model(**ours).to_dict()
    loaded = model.config.to_dict()
    Path(f"{out}/configs.json").write_text(json.dumps({"built": built, "loaded": loaded}, default=str))


def logprob_check(path: Path, theirs: np.ndarray) -> bool:
    """(d): minitrain's model from read_gguf against transformers' log-probabilities of IDS."""
    from minitrain.autograd.tensor import no_grad
    from minitrain.formats.gguf_read import read_gguf
    from minitrain.formats.hf_config import from_hf_config, from_hf_state
    from minitrain.models.registry import build_model

    contents = read_gguf(path)
    model_config, _ = from_hf_config(contents.config, str(path))
    model = build_model(model_config)
    model.load_state_dict(from_hf_state(contents.state, model_config, str(path)), source=str(path))
    model.eval()
    with no_grad():
        logits = np.asarray(model(np.array([ids := ids_of(contents.config)]))[0].data[0], np.float64)
    shifted = logits - logits.max(-1, keepdims=True)
    logprobs = (shifted - np.log(np.exp(shifted).sum(-1, keepdims=True)))[np.arange(len(ids) - 1), ids[1:]]
    gap = float(np.abs(logprobs - theirs).max())
    print(f"(d) log-probs of {len(ids) - 1} tokens: max |difference| {gap:.3g} (target 1e-4)")
    return gap <= 1e-4


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("gguf", nargs="?", default=DEFAULT_GGUF)
    parser.add_argument("--torch-python", default=DEFAULT_TORCH)
    args = parser.parse_args()
    from safetensors import safe_open

    from minitrain.common.errors import UserError
    from minitrain.formats import gguf_read
    from minitrain.formats.hf_config import MODEL_TYPES

    path = Path(args.gguf)
    start = time.perf_counter()
    reader = gguf_read.open_gguf(path)
    opened = time.perf_counter() - start
    layout, config, _ = gguf_read.gguf_hf_config(reader, path)
    state = gguf_read.gguf_hf_state(reader, path, layout, config)
    seconds, rss = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"minitrain's conversion: {seconds:.1f} s ({opened:.1f} s of it parsing the file), peak RSS {rss:.0f} MB, "
          f"{len(state)} tensors, types {sorted({t.tensor_type.name for t in reader.tensors})}")
    gguf_read._open_gguf.cache_clear()
    start = time.perf_counter()
    try:
        gguf_read.read_gguf(path)
        answer = "read"
    except UserError as e:
        answer = f"refused: {str(e)[:160]}"
    print(f"read_gguf: {time.perf_counter() - start:.1f} s, {answer}")

    ok = True
    with tempfile.TemporaryDirectory() as out:
        Path(out, "minitrain_config.json").write_text(json.dumps(config))
        subprocess.run([args.torch_python, __file__, "--transformers-side", str(path), out], check=True)
        # numbers as float32 (the file's): the GGUF loader keeps rms_norm_eps as 9.999999974752427e-07
        configs = json.loads(Path(out, "configs.json").read_text(), parse_float=lambda s: float(np.float32(s)))
        built, loaded = configs["built"], configs["loaded"]
        differ = {k: (built.get(k), loaded.get(k)) for k in sorted(set(built) | set(loaded) - NOT_THE_MODEL)
                  if built.get(k) != loaded.get(k) and k not in NOT_THE_MODEL}
        print(f"(a) config: {len(set(built) - NOT_THE_MODEL)} keys, differing: {differ or 'none'}")
        ok &= not differ
        with safe_open(f"{out}/hf_state.safetensors", "np") as theirs:
            names = set(theirs.keys())
            if names != set(state):
                print(f"(b) names differ: only minitrain {sorted(set(state) - names)[:5]}, "
                      f"only transformers {sorted(names - set(state))[:5]}")
                ok = False
            gaps = {n: float(np.abs(state[n] - theirs.get_tensor(n)).max()) for n in sorted(names & set(state))}
        worst = max(gaps, key=gaps.get)
        print(f"(b) state: {len(gaps)} tensors compared, max |difference| {gaps[worst]:.3g} ({worst}); "
              f"{sum(v == 0 for v in gaps.values())} identical")
        ok &= gaps[worst] == 0.0
        theirs_logprobs = np.load(f"{out}/logprobs.npy")
    if layout.model_type in MODEL_TYPES:
        ok &= logprob_check(path, theirs_logprobs)
    else:
        print(f"(d) skipped: from_hf_config does not read {layout.model_type} in this checkout")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--transformers-side"]:  # the torch environment's half: GGUF, OUT
        transformers_side(*sys.argv[2:4])
    else:
        sys.exit(main())
