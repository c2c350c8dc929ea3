"""Argument helpers several commands share: `--set`, loading the config from the parsed flags, number types."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from minitrain.common.errors import UserError
from minitrain.config.datacheck import DataSummary, check_data
from minitrain.config.loader import load_config
from minitrain.config.missing_extras import missing_extras
from minitrain.config.problems import ConfigError, Problem, exit_code_of
from minitrain.config.schema import Config
from minitrain.config.source import ConfigSource

# The flags that stand for a config key (train's, lock's, validate's), by their argparse name.
FLAG_KEYS = {"seed": "training.rng_seed", "out_dir": "output.dir", "models_dir": "output.models_dir",
             "data_parallel_address": "runtime.data_parallel.address"}


def add_set(parser: argparse.ArgumentParser) -> None:
    """The repeatable `--set KEY=VALUE` override flag."""
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                        help="override a config value, e.g. --set optimizer.lr_max=1e-3 (repeatable; VALUE is read "
                             "as YAML)")


def load(args: argparse.Namespace) -> Config:
    """The validated config of `args.config` with `--set` and the flags that stand for config keys applied."""
    values = {key: getattr(args, flag) for flag, key in FLAG_KEYS.items() if getattr(args, flag, None) is not None}
    if "runtime.data_parallel.address" in values:  # train --address
        values["runtime.data_parallel.backend"] = "ray"
    cfg = load_config(args.config, args.overrides, values=values)
    for warning in cfg.source.warnings:  # stderr: stdout may be the thing asked for (`lock -o -`)
        print(f"warning: {warning}", file=sys.stderr)
    return cfg


def check_files(cfg: Config) -> DataSummary:
    """Every check that reads files: the data (config/datacheck.py), model.init_from, whose source must be
    readable and of the config's architecture, distillation's teachers (readable, over the student's vocabulary),
    the optional packages the config needs (minitrain.common.extras), and custom callbacks' entry points, which
    must import. All problems at once, as one ConfigError (exit code 2)."""
    problems, summary = [], None
    if cfg.on_pretrained_base:  # the base's architecture and tokenizer, then the data counted in its tokens
        from minitrain.training.text_run import check_text_data, complete_config

        try:
            summary = check_text_data(complete_config(cfg))
        except ConfigError as exc:
            problems += exc.problems
        except UserError as exc:
            problems.append(Problem(("model", "init_from"), str(exc), exit_code_of(exc)))
    else:
        try:
            summary = check_data(cfg)
        except ConfigError as exc:
            problems += exc.problems
    if cfg.model.init_from is not None and not cfg.on_pretrained_base:
        from minitrain.hub.sources import init_from_problems  # the Hub client is only needed here

        problems += init_from_problems(cfg)
    if cfg.distillation.enabled:
        from minitrain.training.progressive import chain_problems

        problems += chain_problems(cfg)
    problems += missing_extras(cfg)
    if any(entry.type == "custom" for entry in cfg.callbacks):
        from minitrain.callbacks.custom import entry_point_problems  # imports the user's modules

        problems += entry_point_problems(cfg)
    if problems:
        raise ConfigError(problems, cfg.source or ConfigSource())
    return summary


def _bounded(name: str, parse: type, fits, needs: str, echo_text: bool = True):
    """An argparse type `name`: `parse` the text, refused unless `fits(value)`: "must be `needs`, got ..."."""
    def check(text: str):
        value = parse(text)
        if not fits(value):
            raise argparse.ArgumentTypeError(f"must be {needs}, got {text if echo_text else value}")
        return value

    check.__name__ = name  # argparse's "invalid NAME value" for text that does not parse
    return check


positive_int = _bounded("positive_int", int, lambda v: v >= 1, ">= 1", echo_text=False)
non_negative_int = _bounded("non_negative_int", int, lambda v: v >= 0, ">= 0",  # what NumPy accepts as a seed
                            echo_text=False)
probability = _bounded("probability", float, lambda v: 0 < v <= 1, "a number in (0, 1]")  # a nucleus: top-p
non_negative_float = _bounded("non_negative_float", float, lambda v: 0 <= v < float("inf"),  # NaN, inf refused
                              "a finite number >= 0")


def percent(share: float | None) -> str:
    """An exact-match share as the score tables print it: `61.8 %`, or `-` for a model with none (a table model)."""
    return "-" if share is None else f"{100 * share:.1f} %"


def read_from(*sources: str | None) -> list[str | Path | None]:
    """The paths a command reads, for `check_output`: each source, a run folder's model file (results.json's
    model_path, outside the folder) and a model file's run folder (RUN/models/, RUN/checkpoints/: read_run's)."""
    from minitrain.hub.run_folder import RESULTS, locate, read_results, run_of

    found: list[str | Path | None] = list(sources)
    for source in sources:
        if source is not None and os.path.isfile(Path(source, RESULTS)):
            found.append(locate(read_results(Path(source, RESULTS)).get("model_path"), Path(source)))
        elif source is not None and os.path.isfile(source):
            found.append(run_of(Path(source)))
    return found
