"""The model card of a pretrained model, Llama-family or GPT-2 (a base exported as it is, or a run that fine-tuned
one).

minitrain/hub/card.py writes the cards of the models minitrain builds (MiniGPT's GPT-2 twin, the MLP, tables);
a pretrained base is another kind of subject: a base someone else pretrained, its own byte-level BPE
tokenizer (not characters), text or chat records counted in the base's tokens, and `LlamaForCausalLM` /
`Qwen2ForCausalLM` (a GPT-2 base: `GPT2LMHeadModel`) as its transformers class. The card says exactly that, from
what the run (or the base) recorded: a number that was not recorded is printed as "not recorded", never guessed;
no dates.
"""

from __future__ import annotations

from typing import Any

from huggingface_hub import ModelCardData

from minitrain.common.hub_id import is_hub_id
from minitrain.common.io import path_exists
from minitrain.formats.hf_config import ARCHITECTURES
from minitrain.hub.run_folder import RunInfo
from minitrain.models.registry import family_of, layout_of

MISSING = "not recorded"
LICENSE_NOTE = "the base model's license applies (see its own model card)"


def architecture_name(model_config: dict[str, Any]) -> str:
    """The transformers class an export of this config loads as (formats/hf_config.py `to_hf_config`)."""
    return {**ARCHITECTURES, "gpt2": "GPT2LMHeadModel"}[layout_of(model_config)]


def describe_architecture(mc: dict[str, Any]) -> str:
    if layout_of(mc) == "gpt2":
        return (f"GPT-2 (GPT2LMHeadModel: LayerNorm, learned positions, GELU MLP, output layer tied to the token "
                f"embedding): {mc['n_layer']} layers, {mc['n_head']} heads, width {mc['d_model']}, MLP width "
                f"{mc['d_ff']}, {mc['vocab_size']} embedding rows")
    head = "tied to the token embedding" if mc.get("tie_embeddings", True) else "its own output matrix"
    scaling = f", rope_scaling {mc['rope_scaling']['rope_type']}" if mc.get("rope_scaling") else ""
    bias = ", biases on q/k/v (Qwen2)" if mc.get("attention_bias") else ""
    return (f"Llama-family decoder ({architecture_name(mc)}: RMSNorm, rotary positions θ {mc.get('rope_theta')}"
            f"{scaling}, grouped-query attention, SwiGLU MLP{bias}, output layer {head}): {mc['n_layer']} layers, "
            f"{mc['n_head']} query heads and {mc.get('n_kv_head') or mc['n_head']} key/value heads of "
            f"{mc.get('head_dim')}, width {mc['d_model']}, MLP width {mc['d_ff']}, {mc['vocab_size']} embedding rows")


def _is_hub_id(spec: Any) -> bool:
    return isinstance(spec, str) and not path_exists(spec) and is_hub_id(spec) and not spec.endswith(".gguf")


def llama_card(model_config: dict[str, Any], vocab_size: int, repo_id: str | None, base: str | None,
               info: RunInfo | None = None, chat: bool = False) -> str:
    """README.md for a Llama-family export: of a run (`info`) fine-tuned from `base`, or of `base` itself."""
    repo = repo_id or "user/name"
    name = repo_id or architecture_name(model_config)
    origin = (f"Fine-tuned with minitrain (a pure-NumPy teaching library) from the pretrained base `{base}`."
              if info is not None else f"The pretrained model `{base}`, converted to float32 by minitrain.")
    data = info.section("data") if info is not None else {}
    results = info.results if info is not None else {}
    splits = ["train", "val", *(["test"] if "test_ppl" in results else [])]
    rows = [(split, results.get(f"{split}_loss", MISSING), results.get(f"{split}_ppl", MISSING)) for split in splits]
    body = [
        f"# {name}", "", origin, "", "## Model", "",
        f"- Architecture: {describe_architecture(model_config)}.",
        f"- Parameters: {info.num_parameters:,}." if info is not None else None,
        f"- Context length used: {model_config['max_seq_len']} tokens.",
        f"- Tokenizer: the base's own ({vocab_size:,} tokens{', with its chat template' if chat else ''}); its "
        "files are the base's, byte for byte where it had them.",
    ]
    if info is not None:
        body += ["", "## Data and training", "",
                 f"Records of `{data.get('train_path', MISSING)}` (validation: `{data.get('val_path', MISSING)}`), "
                 f"encoded with the base's tokenizer, `packing: {data.get('packing', MISSING)}`, loss counted on "
                 f"`{data.get('loss_on', MISSING)}` tokens; {info.manifest.get('steps_done', MISSING)} steps.", "",
                 "| split | loss | perplexity |", "|---|---|---|",
                 *(f"| {s} | {loss} | {ppl} |" for s, loss, ppl in rows)]
    prompt = ('messages = [{"role": "user", "content": "Hola"}]\n'
              'ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")'
              if chat else 'ids = tokenizer("Hola", return_tensors="pt").input_ids')
    body += ["", "## How to load it", "", "With transformers (PyTorch):", "", "```python",
             "from transformers import AutoModelForCausalLM, AutoTokenizer", "",
             f'model = AutoModelForCausalLM.from_pretrained("{repo}")',
             f'tokenizer = AutoTokenizer.from_pretrained("{repo}")', prompt,
             "out = model.generate(ids, max_new_tokens=32, do_sample=False)",
             "print(tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True))", "```", "",
             "With minitrain:", "", "```bash",
             f'minitrain sample {repo}{" --chat" if chat else ""} --prompt "Hola"',
             f"minitrain eval {repo} --data test.jsonl", "```", "",
             "## License", "", f"The weights derive from `{base}`: {LICENSE_NOTE}.", ""]
    family = "gpt2" if layout_of(model_config) == "gpt2" else family_of(model_config).name
    meta = ModelCardData(library_name="minitrain", tags=["minitrain", family, "text-generation"],
                         pipeline_tag="text-generation", base_model=base if _is_hub_id(base) else None,
                         model_name=name)
    return f"---\n{meta.to_yaml()}\n---\n\n" + "\n".join(line for line in body if line is not None)
