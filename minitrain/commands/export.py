"""`minitrain export SOURCE OUT [--format hf|gguf] [--dtype f32|f16|q8_0|q4_0|q5_k|q4_k_m] [--repo user/name] [--vocab
PATH] [--merge-adapters] [--base-model SPEC] [--float-base] [--force]`: a run as a Hugging Face GPT-2 folder
(config.json, model.safetensors, tokenizer, model card); a LoRA run as its adapter in PEFT's layout, or with
--merge-adapters merged into its base. A pretrained Llama-family base (.gguf, Hugging Face folder, Hub id), or a run
that fine-tuned one, as a LlamaForCausalLM / Qwen2ForCausalLM folder with the base's tokenizer (a LoRA run: its
adapter, or merged, a QLoRA run into its NF4 base or with --float-base the float one, the gap printed). `--format
gguf` (always merged): any of these as one GGUF file for llama.cpp (minitrain/hub/export_gguf.py), its matrices in
--dtype. The spec's `--format safetensors` is hf."""

from __future__ import annotations

import argparse
import sys

from minitrain.commands.common import read_from
from minitrain.common.errors import BAD_INPUT, UserError
from minitrain.common.io import check_output
from minitrain.formats.gguf_dtypes import GGUF_DTYPES
from minitrain.hub.export_hf import export_model

FORMATS = ("hf", "gguf")
SPEC_FORMATS = {"safetensors": "hf"}  # the publish spec's name for the Hugging Face folder


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="run folder, checkpoint or model file; or a .gguf file, Hugging Face folder "
                                       "or Hub id of a Llama-family base")
    parser.add_argument("out_dir", help="folder to write (config.json, model.safetensors, tokenizer, README.md); "
                                        "with --format gguf, the .gguf file")
    parser.add_argument("--format", choices=(*FORMATS, *SPEC_FORMATS), default="hf", type=format_name,
                        help="hf (or safetensors): a Hugging Face folder (default); gguf: one GGUF file for llama.cpp")
    parser.add_argument("--dtype", choices=tuple(GGUF_DTYPES), default=None,
                        help="--format gguf: how the matrices are stored (default f32; norms and biases stay f32; "
                             "q4_0, q5_k, q4_k_m: llama.cpp's Q4_0, Q5_K_S and Q4_K_M mixtures)")
    parser.add_argument("--repo", help="user/name the model card's loading snippet refers to")
    parser.add_argument("--vocab", help="vocab.json, when the source does not record it")
    parser.add_argument("--merge-adapters", action="store_true",
                        help="a LoRA run: export its base with the adapters merged in (default: the adapter in PEFT's "
                             "layout; a GGUF is always merged)")
    parser.add_argument("--base-model", metavar="PATH|user/repo",
                        help="the base the adapters were trained on, when the run does not record it")
    parser.add_argument("--float-base", action="store_true", help="a QLoRA run: merge its adapter (implies "
                        "--merge-adapters) into the float base, not the NF4 base it trained on (the gap is printed)")
    parser.add_argument("--force", action="store_true", help="--format gguf: replace OUT.gguf if it exists (never "
                                                                 "the input)")
    parser.set_defaults(handler=export_command)


def format_name(name: str) -> str:
    """--format as minitrain names it (the spec's safetensors is hf)."""
    return SPEC_FORMATS.get(name, name)


def export_command(args: argparse.Namespace) -> int:
    inputs = read_from(args.source, args.vocab, args.base_model)
    if args.format == "gguf":
        from minitrain.hub.export_gguf import export_gguf

        if args.repo or args.float_base:
            raise UserError("export --format gguf: " + ("--repo names the repo of a model card; a GGUF has none"
                            if args.repo else "--float-base is for a folder; a GGUF holds the NF4 merge"), BAD_INPUT)
        check_output(args.out_dir, inputs, force=args.force, flag="export OUT", suffix=".gguf")
        path, kinds = export_gguf(args.source, args.out_dir, args.dtype or "f32", args.vocab, args.base_model)
        print(f"{path}  ({', '.join(f'{n} {kind}' for kind, n in kinds.items())} tensors)")
        return 0
    if args.dtype is not None:
        raise UserError("export --dtype: only a GGUF export (--format gguf) stores other dtypes than float32",
                        BAD_INPUT)
    # A folder export replaces only an earlier export (hub/staging.py's check_target), --force or not.
    check_output(args.out_dir, inputs, force=True, flag="export OUT", folder=True)
    for path in export_model(args.source, args.out_dir, repo_id=args.repo, vocab_path=args.vocab,
                             merge_adapters=args.merge_adapters, base_model=args.base_model,
                             float_base=args.float_base, log=lambda line: print(line, file=sys.stderr)):
        print(path)
    return 0
