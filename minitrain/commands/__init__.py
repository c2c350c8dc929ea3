"""The `minitrain` commands: the top floor. One small file per command, each with a `register(subparsers)` that
adds its subcommand(s) and sets `handler` to a function of the parsed arguments returning the exit code.

A handler parses nothing itself (argparse did) and does little itself: it calls the library (config loader,
data checks, training engine, Hub export) and prints what it returns. Every user mistake surfaces as a
`UserError`, which `minitrain.cli.main` prints as one `error:` line without a traceback.

Nothing below `minitrain/commands/` imports from it: configuration, training and the Hub code never reach up.
"""

# The order `minitrain --help` lists them in.
COMMANDS = ["train", "validate", "schema", "init", "lock", "info", "export", "publish", "sample", "eval", "predict",
            "merge", "merge_models", "quantize", "prune", "sweep", "lab"]
