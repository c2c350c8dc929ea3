"""`minitrain export SOURCE OUT_DIR [--repo user/name] [--vocab PATH] [--merge-adapters] [--base-model SPEC]`: a
run as a Hugging Face GPT-2 folder (config.json, model.safetensors, tokenizer, model card); a LoRA run as its
adapter in PEFT's layout, or merged into its base. A pretrained Llama-family base (.gguf, Hugging Face folder, Hub
id), or a run that fine-tuned one, as a LlamaForCausalLM / Qwen2ForCausalLM folder with the base's tokenizer."""

from __future__ import annotations

import argparse

from minitrain.hub.export import export_model


def register(subparsers: argparse._SubParsersAction) -> None:
    export = subparsers.add_parser("export", help="write a run or a pretrained base as a Hugging Face folder")
    export.add_argument("source", help="run folder, checkpoint or model file; or a .gguf file, Hugging Face folder "
                                       "or Hub id of a Llama-family base")
    export.add_argument("out_dir", help="folder to write (config.json, model.safetensors, tokenizer, README.md)")
    export.add_argument("--repo", help="user/name the model card's loading snippet refers to")
    export.add_argument("--vocab", help="vocab.json, when the source does not record it")
    export.add_argument("--merge-adapters", action="store_true",
                        help="a LoRA run: export its base with the adapters merged in (default: the adapter)")
    export.add_argument("--base-model", metavar="PATH|user/repo",
                        help="the base the adapters were trained on, when the run does not record it")
    export.set_defaults(handler=export_command)


def export_command(args: argparse.Namespace) -> int:
    for path in export_model(args.source, args.out_dir, repo_id=args.repo, vocab_path=args.vocab,
                             merge_adapters=args.merge_adapters, base_model=args.base_model):
        print(path)
    return 0
