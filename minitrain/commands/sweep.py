"""`minitrain sweep SWEEP.yaml` or `minitrain sweep CONFIG --grid KEY=V1,V2 ... --seeds 42,43,44`: train every trial
of a search space (minitrain.sweep) and print the table and the best trial."""

from __future__ import annotations

import argparse
from typing import Any

from minitrain.commands.common import positive_int
from minitrain.common.errors import UserError
from minitrain.config.source import ConfigSource
from minitrain.config.yaml_lines import parse_scalar


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sweep", help="a sweep file (with `base:`), or a training config searched with the flags")
    parser.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                        help="try each value of a config key (repeatable: every combination)")
    parser.add_argument("--random", action="append", default=[], metavar="KEY=DIST",
                        help="draw a key from uniform(a,b), loguniform(a,b), randint(a,b) or choice(x,y) (repeatable)")
    parser.add_argument("--samples", type=positive_int, help="random draws (with --random)")
    parser.add_argument("--seeds", metavar="S1,S2", help="training seeds: each trial runs with each")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                        help="override a config value in every trial (repeatable)")
    parser.add_argument("--metric", help="what the best trial is chosen by: a key of results.json (default val_ppl)")
    parser.add_argument("--mode", choices=["min", "max"])
    parser.add_argument("--workers", type=positive_int, help="trials at a time (default: the CPU cores)")
    parser.add_argument("--backend", choices=["local", "ray"], help="local process pool (default) or Ray Tune")
    parser.add_argument("--address", help="ray: an existing cluster, `auto` or ray://host:10001")
    parser.add_argument("--scheduler", choices=["asha"], help="ray: stop poor trials early with ASHA")
    parser.add_argument("--grace-period", type=positive_int, metavar="STEPS",
                        help="asha: steps every trial trains before it can be stopped")
    parser.add_argument("--out-dir", help="the sweep folder (default runs/sweeps/<name>)")
    parser.add_argument("--name", help="the sweep's name (default: the sweep file's)")
    parser.set_defaults(handler=sweep_command)


def _key_values(flag: str, text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or not value.strip():
        raise UserError(f"{flag} {text}: write it as KEY=VALUE", 2)
    return key.strip(), value.strip()


def spec_data(args: argparse.Namespace) -> tuple[dict[str, Any], ConfigSource, str | None]:
    """The sweep's definition as the file gives it, with the flags on top; where it came from (for messages);
    and the sweep file's path (None when the flags sweep a training config)."""
    from minitrain.sweep.space import read_sweep_file

    data, source = read_sweep_file(args.sweep)
    sweep_file = args.sweep if "base" in data else None
    spec = dict(data) if sweep_file else {"base": args.sweep}
    source = source if sweep_file else ConfigSource(path="the sweep flags")
    for text in args.grid:
        key, values = _key_values("--grid", text)
        spec.setdefault("grid", {})[key] = [parse_scalar(v) for v in values.split(",")]
    for text in args.random:
        key, dist = _key_values("--random", text)
        spec.setdefault("random", {})[key] = dist
    for text in args.overrides:
        key, value = _key_values("--set", text)
        spec.setdefault("set", {})[key] = parse_scalar(value)
    if args.seeds is not None:
        try:
            spec["seeds"] = [int(s) for s in args.seeds.split(",")]
        except ValueError:
            raise UserError(f"--seeds {args.seeds}: write integers separated by commas, e.g. 42,43,44", 2) from None
    flags = {"samples": args.samples, "metric": args.metric, "mode": args.mode, "workers": args.workers,
             "backend": args.backend, "address": args.address, "out_dir": args.out_dir, "name": args.name}
    spec.update({key: value for key, value in flags.items() if value is not None})
    if args.scheduler is not None:
        spec["scheduler"] = {"type": args.scheduler}
    if args.grace_period is not None:
        spec.setdefault("scheduler", {"type": "asha"})["grace_period"] = args.grace_period
    return spec, source, sweep_file


def sweep_command(args: argparse.Namespace) -> int:
    from minitrain.sweep.space import spec_problems

    data, source, sweep_file = spec_data(args)
    spec = spec_problems(data, source)
    from minitrain.sweep.results import summary_text
    from minitrain.sweep.runner import run_sweep  # loads the engine: only once the sweep is known to be valid

    summary, rows = run_sweep(spec, sweep_file, progress=lambda line: print(line, flush=True))
    workers = f"{summary['workers']} worker" + ("s" if summary["workers"] != 1 else "")
    print(f"sweep {summary['name']}: {len(rows)} trials, {summary['wall_seconds']:.1f} s ({summary['backend']}, "
          f"{workers}); table {summary['out_dir']}/sweep.json")
    print(summary_text(rows, next((r for r in rows if r["trial"] == summary["best"]), None), spec.metric))
    unfinished = [r["trial"] for r in rows if r["status"] not in ("completed", "early_stopped", "diverged", "halted")]
    if unfinished:
        raise UserError(f"{len(unfinished)} trials did not finish ({', '.join(unfinished)}); see their "
                        "`message` in sweep.json, and run the same command again to resume them", 1)
    return 0
