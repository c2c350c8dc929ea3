"""The `minitrain` commands: the top floor. One small file per command, each with a `register(parser)` that adds
the command's arguments (and sub-actions) to its parser and sets `handler` to a function of the parsed arguments
returning the exit code.

A handler parses nothing itself (argparse did) and does little itself: it calls the library (config loader,
data checks, training engine, Hub export) and prints what it returns. Every user mistake surfaces as a
`UserError`, which `minitrain.cli.main` prints as one `error:` line without a traceback.

Nothing below `minitrain/commands/` imports from it: configuration, training and the Hub code never reach up.
"""

# Each command with its one-line help, in the order `minitrain --help` lists them. The command's module,
# minitrain/commands/<name, - as _>.py, is imported only when the command runs (or its --help is asked for), so
# `minitrain --help` imports none of them and `minitrain validate` no more than validating needs.
COMMANDS = {
    "train": "train from a YAML config",
    "validate": "check a config (and its data) and print a checklist",
    "schema": "print the config's JSON Schema (for editor autocompletion)",
    "init": "write a config for a data folder",
    "lock": "pin the resolved config, data hashes and library versions",
    "info": "summarise a run folder",
    "watch": "a live dashboard of a run folder, while it trains or after",
    "export": "write a run or a pretrained base as a Hugging Face folder or a GGUF file",
    "publish": "export a run and upload it to the Hub",
    "sample": "generate text from a trained model",
    "eval": "mean token loss and perplexity of a model on a text or chat file",
    "predict": "predict the rows of a table with a trained table model",
    "merge": "merge models of one architecture (linear, task arithmetic, TIES, DARE, SLERP)",
    "merge-adapters": "fold a LoRA run's adapters into its base model",
    "quantize": "quantize a trained model's weights and score it against float32",
    "prune": "prune a trained model's linear weights and score it against the dense one",
    "sweep": "train a grid or random search of trials, locally or on Ray",
    "lab": "start a lab's workspace, or check it",
}
ALIASES = {"push": "publish"}
RENAMED = {"merge-models": "merge"}  # an old spelling: one error line naming the new one (exit code 2)
