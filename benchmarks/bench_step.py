"""Benchmark: one full training step of MiniGPT (forward, backward, clip, AdamW): minitrain at each thread
setting, against PyTorch eager, torch.compile and JAX jit, and against the FLOP floor at the step's shapes.

    python benchmarks/bench_step.py                   # lab-01 and scaled configs; one JSON line per config
    python benchmarks/bench_step.py --configs lab     # only the lab-01 config
    python benchmarks/bench_step.py --busy            # the same with one core held by a spinning process
    python benchmarks/bench_step.py --quick           # fewer steps (a smoke run, numbers are rough)
    python benchmarks/bench_step.py --against DIR     # also the same step with the minitrain checkout in DIR
    python benchmarks/bench_step.py --threads 1,2     # the thread counts compared (the default)
    python benchmarks/bench_step.py --strict          # exit 1 if a config was measured above load 1.5

A step is what the training loop does per batch: zero the gradients, forward with the loss, backward, clip the
global gradient norm to 1.0, AdamW (the lab's settings: lr 3e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on
matrices). The batch is synthetic but shaped like the corpus: right-padded lines of random length with the loss on
their last characters, so the padding mask and the loss mask are exercised.

Contestants. minitrain with BLAS threads chosen by the size rule (`rule`, the default), fixed at each count of
`--threads` (`1t`, `2t`), and chosen by timing (`measure`: minitrain/callbacks/thread_choice.py's SettingChooser,
which has made its first decision during the warm-up and keeps watching), and on 2 local data-parallel workers × 1
BLAS thread (`2workers`: the same global batch in two micro-batches of B/2 lines, minitrain/parallel/local.py). The
peers, each only when importable (never a dependency; --no-torch, --no-jax leave one out): PyTorch eager on each
count of `--threads`, each with its default AdamW and with `fused=True`, and torch.compile (fused AdamW, each count)
unless --no-compile; JAX, the whole step under one jax.jit (benchmarks/jax_minigpt.py), in a child process pinned to
that many cores, for each count the machine has.
With --against, minitrain's step once more with another checkout's code and that checkout's thread rule
(`against_rule`, a child process running benchmarks/checkout_step.py): before and after a change, in one run.

Timing: warm-up steps first (numba compiles or loads its cache, torch.compile and XLA compile, the allocator
settles), then rounds. In each round every contestant runs `steps` steps, one after the other, so background load
(the machine may be shared) hits all of them alike; the order is reversed every other round, so the first in turn
changes. Before each block there is a pause of PAUSE_S and a quarter as many settling steps, not timed: the previous
contestant's idle workers (OpenBLAS's, OpenMP's in PyTorch, XLA's) keep spinning for a while after their last
product, and with one core busy a 2-thread block slowed the next contestant's first ten lab steps by 40 %. Reported:
the median step time over all rounds, tokens/s (B·T positions per step, padding included), and ratios of minitrain
(rule) to the fastest peer, of minitrain on each thread count to the fastest peer on as many threads (or cores), and
to the floor (benchmarks/step_floor.py: the step's matrix products timed one by one, on 1 thread and at the best
count per product). With --busy a process spinning on one core runs the whole time (it is started before the warm-up
and killed at the end). minitrain's peak RSS is measured in a separate process without the peers. The 1-minute load
average before a config's first measurement and after its last is printed beside its ratios, and they are a result
only if neither exceeds 1.5 (benchmarks/load_rule.py, the project's rule); otherwise the line says NOT A RESULT, and
`--strict` makes the run exit 1.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

import numpy as np
from safetensors.numpy import save_file

from minitrain.callbacks.thread_choice import SettingChooser
from minitrain.common.runtime import blas_threads_for, configure, set_blas_threads
from minitrain.config.run_sections import DataParallelConfig
from minitrain.data.batch import Batch, take
from minitrain.models.minigpt import MiniGPT
from minitrain.optim import AdamW
from minitrain.parallel.workers import start_workers
from minitrain.training.artifacts import peak_rss_mb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# load_rule and the step modules are beside this file, hence the path above
from load_rule import add_strict_flag, counts, finish, load_now, settled_load, verdict
from step_floor import step_floor
from step_setup import ADAMW, CLIP, CONFIGS, minitrain_step_fn, synthetic_batch

PAUSE_S = 0.3


def timed(step: Callable[[], object], n: int) -> list[float]:
    """Wall times of `n` calls of `step`."""
    times = []
    for _ in range(n):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return times


def runner_for(step: Callable[[], object]) -> Callable[[int], list[float]]:
    """A contestant's runner: `run(n)` runs n steps and returns their wall times."""
    return lambda n: timed(step, n)


def rss_alone(name: str) -> float:
    """Peak RSS (MB) of a fresh process that imports minitrain and runs a few steps of config `name`: this
    process's own peak would include PyTorch."""
    command = [sys.executable, os.path.abspath(__file__), "--rss-only", name]
    return float(subprocess.run(command, capture_output=True, text=True, check=True).stdout)


def print_rss_alone(name: str) -> None:
    spec = CONFIGS[name]
    cfg = spec["model"]
    batch = synthetic_batch(spec["batch"], cfg["max_seq_len"], cfg["vocab_size"])
    configure(cfg["d_model"], spec["batch"] * cfg["max_seq_len"])
    timed(minitrain_step_fn(MiniGPT(**cfg, rng=0), batch), 5)
    print(peak_rss_mb())  # MiB, from VmHWM: the parent's peak is not carried over


def minitrain_contestants(spec: dict, batch: dict, initial_state: dict,
                          threads: list[int]) -> dict[str, tuple[Callable, Callable]]:
    """label -> (prepare, run): `prepare()` sets the thread count before each block of steps, `run(n)` runs n."""
    cfg = spec["model"]
    rule = blas_threads_for(cfg["d_model"], spec["batch"] * cfg["max_seq_len"])

    def fresh_step() -> Callable[[], object]:
        model = MiniGPT(**cfg, rng=0)
        model.load_state_dict(initial_state)
        return minitrain_step_fn(model, batch)

    contestants = {"minitrain_rule": (lambda: set_blas_threads(rule), runner_for(fresh_step()))}
    for n in threads:
        contestants[f"minitrain_{n}t"] = (lambda n=n: set_blas_threads(n), runner_for(fresh_step()))
    applied = rule  # the measured contestant's count, restored before each of its blocks

    def apply(n: int) -> None:
        nonlocal applied
        applied = n
        set_blas_threads(n)

    chooser = SettingChooser(apply=lambda setting, final: apply(setting.threads),
                             announce=lambda m: print(m, file=sys.stderr, flush=True))
    inner = fresh_step()

    def measured_step() -> object:
        start = time.perf_counter()
        loss = inner()
        chooser.observe(time.perf_counter() - start)
        return loss

    contestants["minitrain_measure"] = (lambda: set_blas_threads(applied), runner_for(measured_step))
    contestants["minitrain_measure"][0]()
    while not chooser.decisions:  # the first trial belongs to the warm-up
        measured_step()
    return contestants


def workers_contestant(spec: dict, batch: dict, initial_state: dict, n: int,
                       stack: ExitStack) -> tuple[Callable, Callable]:
    """minitrain's step on `n` local data-parallel workers (minitrain/parallel/local.py, 1 BLAS thread each): the
    same global batch cut into n micro-batches of B/n lines, one per worker, their gradients summed in order here,
    then the clip and AdamW. The pool lives as long as `stack`."""
    cfg = spec["model"]
    model = MiniGPT(**cfg, rng=0)
    model.load_state_dict(initial_state)
    optimizer = AdamW(model.trainable_parameters(), buffer=model.pack_parameters(), **ADAMW)
    rows = spec["batch"] // n
    full = Batch(batch["input"], batch["target"], batch["attn_pad_mask"], batch["loss_mask"])
    parts = [take(full, slice(w * rows, (w + 1) * rows)) for w in range(n)]
    settings = DataParallelConfig(workers=n, backend="local")
    workers = stack.enter_context(start_workers(settings, model, n, rows, cfg["max_seq_len"]))

    def step() -> object:
        loss, _ = workers.gradients(model, parts, CLIP)
        optimizer.step()
        return loss

    return lambda: set_blas_threads(1), runner_for(step)


def torch_contestants(spec: dict, batch: dict, initial_state: dict, loss0: float, compile_too: bool,
                      threads_list: list[int], result: dict) -> dict[str, tuple[Callable, Callable]]:
    import torch
    from torch_minigpt import TorchMiniGPT, first_loss, make_optimizer, torch_step_fn

    adamw = {"lr": ADAMW["lr"], "betas": (ADAMW["beta1"], ADAMW["beta2"]), "eps": ADAMW["eps"],
             "weight_decay": ADAMW["weight_decay"]}  # fmt: skip
    variants = [(n, fused, False) for n in threads_list for fused in (False, True)]
    variants += [(n, True, True) for n in threads_list] if compile_too else []
    contestants = {}
    for threads, fused, compiled in variants:
        torch.set_num_threads(threads)
        tmodel = TorchMiniGPT(**spec["model"])
        tmodel.load_gpt2_state_dict(initial_state)
        difference = abs(first_loss(tmodel, batch) - loss0)  # each variant's weights checked, the worst reported
        result["torch_first_loss_diff"] = max(difference, result.get("torch_first_loss_diff", 0.0))
        runner = torch.compile(tmodel) if compiled else tmodel
        step = torch_step_fn(runner, make_optimizer(tmodel, fused, **adamw), batch, CLIP)
        label = ("torch_compile" if compiled else "torch") + f"_{threads}t" + ("_fused" if fused and not compiled
                                                                               else "")  # fmt: skip
        contestants[label] = (lambda threads=threads: torch.set_num_threads(threads), runner_for(step))
    return contestants


@contextmanager
def child_contestants(commands: dict[str, list[str]]) -> Iterator[tuple[dict, dict[str, float]]]:
    """Contestants in child processes (label -> command), each speaking step_server.py's protocol; yields the
    contestants and each child's first loss. On the way out each child's stdin is closed (its signal to stop),
    and a child that has not stopped within 10 s is killed."""
    children: dict[str, subprocess.Popen] = {}

    def run_on(label: str, child: subprocess.Popen) -> Callable[[int], list[float]]:
        def run(n: int) -> list[float]:
            child.stdin.write(f"{n}\n")
            child.stdin.flush()
            answer = child.stdout.readline()
            if not answer:
                sys.exit(f"error: the contestant {label} stopped while timing (its own error is above)")
            return json.loads(answer)

        return run

    try:
        for label, command in commands.items():
            children[label] = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        first_losses = {}
        for label, child in children.items():  # each is warm when it says "ready <first loss>"
            words = child.stdout.readline().split()
            if words[:1] != ["ready"]:
                sys.exit(f"error: the contestant {label} did not start (its own error is above)")
            first_losses[label] = float(words[1])
        yield {label: (lambda: None, run_on(label, child)) for label, child in children.items()}, first_losses
    finally:
        for child in children.values():
            child.stdin.close()
        for child in children.values():
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def child_commands(name: str, state_path: str, peers: set[str], against: str | None,
                   threads: list[int]) -> dict[str, list[str]]:
    """JAX jit on each count of cores in `threads` that the machine has (XLA cannot change its thread count inside a
    process, so each is a child pinned to its cores), and minitrain from the checkout `against`, each started from
    `state_path`."""
    here = os.path.dirname(os.path.abspath(__file__))
    common = ["--config", name, "--state", state_path]
    commands = {}
    if "jax" in peers:
        cores = sorted(os.sched_getaffinity(0))
        for count in (n for n in threads if n <= len(cores)):
            commands[f"jax_jit_{count}core"] = [sys.executable, os.path.join(here, "jax_minigpt.py"), *common,
                                                "--cores", ",".join(map(str, cores[:count]))]  # fmt: skip
    if against:
        commands["against_rule"] = [sys.executable, os.path.join(here, "checkout_step.py"), "--checkout", against,
                                    *common]  # fmt: skip
    return commands


def time_rounds(contestants: dict[str, tuple[Callable, Callable]], warmup: int, rounds: int,
                steps: int) -> dict[str, list[float]]:
    """Each contestant's step times: a warm-up, then `rounds` rounds in which every contestant in turn runs `steps`
    steps, after a pause and a quarter as many untimed steps (see the module docstring); the order is reversed every
    other round, so no contestant is always first (or always right after the same one)."""
    times: dict[str, list[float]] = {label: [] for label in contestants}
    for prepare, run in contestants.values():
        prepare()
        run(warmup)
    for round_ in range(rounds):
        for label, (prepare, run) in list(contestants.items())[:: 1 if round_ % 2 == 0 else -1]:
            time.sleep(PAUSE_S)  # the last contestant's idle workers stop spinning
            prepare()
            run(max(1, steps // 4))  # settling, not timed
            times[label] += run(steps)
    return times


def threads_of(label: str) -> int:
    """The thread (or core) count in a peer's label: torch_2t_fused -> 2, torch_compile_1t -> 1, jax_jit_2core -> 2."""
    return int(re.search(r"_(\d+)(?:t|core)(?:_|$)", label).group(1))


def bench_config(name: str, spec: dict, peers: set[str], compile_too: bool, quick: bool, threads: list[int],
                 against: str | None = None) -> dict:
    # before anything of this config runs (its floor, its RSS probe, its rounds); --quick, a smoke run, never waits
    load_before = settled_load(wait=0 if quick else 120)
    cfg, batch_size = spec["model"], spec["batch"]
    warmup, rounds, steps = (2, 3, max(2, spec["steps"] // 4)) if quick else (spec["warmup"], spec["rounds"],
                                                                              spec["steps"])  # fmt: skip
    batch = synthetic_batch(batch_size, cfg["max_seq_len"], cfg["vocab_size"])
    model = MiniGPT(**cfg, rng=0)
    initial_state = {k: v.copy() for k, v in model.state_dict().items()}
    _, loss0 = model(batch["input"], batch["target"], batch["attn_pad_mask"], batch["loss_mask"])
    settings = configure(cfg["d_model"], batch_size * cfg["max_seq_len"])
    result = {"config": name, **cfg, "batch": batch_size, **settings, "minitrain_peak_rss_mb": rss_alone(name),
              "load_before": load_before}  # fmt: skip
    floor = step_floor(batch=batch_size, repeats=5 if quick else 20, **cfg)
    result.update(gflop_per_step=floor["gflop"], **{f"floor_{n}t_ms": ms for n, ms in floor["ms_by_threads"].items()},
                  floor_best_ms=floor["ms_best"])  # fmt: skip
    contestants = minitrain_contestants(spec, batch, initial_state, threads)
    if "torch" in peers:
        contestants.update(torch_contestants(spec, batch, initial_state, float(loss0.item()), compile_too, threads,
                                             result))  # fmt: skip
    with tempfile.TemporaryDirectory() as folder, ExitStack() as pools:
        n_workers = min(2, os.cpu_count() or 1)
        if n_workers > 1 and batch_size % n_workers == 0:
            contestants[f"minitrain_{n_workers}workers"] = workers_contestant(spec, batch, initial_state, n_workers,
                                                                              pools)  # fmt: skip
        state_path = os.path.join(folder, "initial.safetensors")
        save_file(initial_state, state_path)
        with child_contestants(child_commands(name, state_path, peers, against, threads)) as (children, first_losses):
            for label, loss in first_losses.items():
                result[f"{label}_first_loss_diff"] = abs(loss - float(loss0.item()))
            times = time_rounds({**contestants, **children}, warmup, rounds, steps)
    result["load_after"] = load_now()
    result["verdict"] = verdict(result["load_before"], result["load_after"], os.cpu_count() or 1, max(threads))

    tokens = batch_size * cfg["max_seq_len"]
    for label, ts in times.items():
        ms = float(np.median(ts)) * 1e3
        result[f"{label}_ms"] = round(ms, 3)
        result[f"{label}_tokens_per_s"] = round(tokens / ms * 1e3)
    ours = result["minitrain_rule_ms"]
    if "against_rule_ms" in result:
        result["ratio_minitrain_over_against"] = round(ours / result["against_rule_ms"], 3)
    peer_labels = [label for label in times if label.startswith(("torch", "jax"))]
    if peer_labels:
        best = min(peer_labels, key=lambda label: result[f"{label}_ms"])
        result["peer_best"] = best
        result["ratio_minitrain_over_peer"] = round(ours / result[f"{best}_ms"], 3)
        for label in times:
            if label.endswith("workers"):
                result[f"ratio_{label}_over_peer"] = round(result[f"{label}_ms"] / result[f"{best}_ms"], 3)
        for n in threads:  # minitrain on n threads against the fastest peer on n threads (or cores)
            at_n = [label for label in peer_labels if threads_of(label) == n]
            if at_n and f"minitrain_{n}t" in times:
                best_n = min(at_n, key=lambda label: result[f"{label}_ms"])
                result[f"peer_best_{n}t"] = best_n
                result[f"ratio_minitrain_{n}t_over_peer_{n}t"] = round(result[f"minitrain_{n}t_ms"]
                                                                       / result[f"{best_n}_ms"], 3)  # fmt: skip
    fixed = [label for label in times if label.removeprefix("minitrain_").removesuffix("t").isdigit()]
    result["minitrain_best_fixed"] = min(fixed, key=lambda label: result[f"{label}_ms"])
    result["ratio_over_floor_1t"] = round(ours / result["floor_1t_ms"], 3)
    result["ratio_over_floor_best"] = round(ours / floor["ms_best"], 3)
    result["steps_timed_each"] = rounds * steps
    return result


@contextmanager
def one_core_busy(busy: bool) -> Iterator[None]:
    """With `busy`, a child process spins on one core for the duration of the block."""
    if not busy:
        yield
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", default="lab,scaled", help="comma-separated: lab, scaled")
    parser.add_argument("--quick", action="store_true", help="few steps: a smoke run, not a measurement")
    parser.add_argument("--busy", action="store_true", help="hold one core with a spinning process while timing")
    parser.add_argument("--no-torch", action="store_true", help="leave PyTorch out")
    parser.add_argument("--no-jax", action="store_true", help="leave JAX out")
    parser.add_argument("--no-compile", action="store_true", help="PyTorch eager only (no torch.compile)")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts, each compared on its own: "
                        "minitrain fixed at each, PyTorch at each, JAX pinned to each count of cores")
    parser.add_argument("--against", metavar="CHECKOUT", help="also time the step with another minitrain checkout's "
                        "code (e.g. a git worktree of the commit before a change): the contestant against_rule")
    parser.add_argument("--rss-only", metavar="CONFIG", help=argparse.SUPPRESS)  # used by rss_alone()
    add_strict_flag(parser)
    args = parser.parse_args(argv)
    if args.rss_only:
        print_rss_alone(args.rss_only)
        return
    names = [n.strip() for n in args.configs.split(",") if n.strip()]
    threads = [int(n) for n in args.threads.split(",")]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        parser.error(f"unknown config(s) {unknown}; choose from {list(CONFIGS)}")
    peers = {peer for peer, left_out in (("torch", args.no_torch), ("jax", args.no_jax))
             if not left_out and importlib.util.find_spec(peer) is not None}  # fmt: skip
    for peer in {"torch", "jax"} - peers:
        print(f"{peer}: left out (not importable, or --no-{peer})", file=sys.stderr)
    rows = []
    with one_core_busy(args.busy):
        for name in names:
            result = {**bench_config(name, CONFIGS[name], peers, not args.no_compile, args.quick, threads,
                                     args.against), "busy": args.busy}  # fmt: skip
            print(json.dumps(result), flush=True)
            rows.append(result)
    print_table(rows, threads)
    finish(all(counts(r["load_before"], r["load_after"], max(threads)) for r in rows), args.strict)


def print_table(rows: list[dict], threads: list[int]) -> None:
    """Every contestant's ms per step, by config, then the ratios, each config's beside its loads and verdict."""
    kinds = ("minitrain_", "against", "torch", "jax")
    labels = [k[: -len("_ms")] for k in rows[0] if k.endswith("_ms") and k.startswith(kinds)]
    print(f"\n{'ms per step' + (' (one core busy)' if rows[0]['busy'] else ''):32s}"
          + "".join(f"{r['config']:>12s}" for r in rows))
    for label in [*labels, "floor_1t", "floor_best"]:
        print(f"{label:32s}" + "".join(f"{r.get(label + '_ms', float('nan')):12.2f}" for r in rows))
    for r in rows:
        peer_part = (f", {r['ratio_minitrain_over_peer']:.2f}x {r['peer_best']}" if "peer_best" in r else "")
        differences = ", ".join(f"{k[: -len('_first_loss_diff')]} {v:.2g}" for k, v in r.items()
                                if k.endswith("_first_loss_diff"))  # fmt: skip
        for key in (k for k in r if k.startswith("ratio_minitrain_") and k.endswith("workers_over_peer")):
            peer_part += f", {key.removeprefix('ratio_minitrain_').removesuffix('_over_peer')} {r[key]:.2f}x"
        if "ratio_minitrain_over_against" in r:
            peer_part += f", {r['ratio_minitrain_over_against']:.2f}x the --against checkout"
        print(f"{r['config']}: minitrain (rule, {r['blas_threads']} BLAS threads){peer_part}, "
              f"{r['ratio_over_floor_1t']:.2f}x the 1-thread floor, {r['ratio_over_floor_best']:.2f}x the best-thread "
              f"floor; best fixed count {r['minitrain_best_fixed']}; peak RSS {r['minitrain_peak_rss_mb']:.0f} MB; "
              f"first-loss difference to {differences or 'no other implementation'}; {r['verdict']}")
        for n in (n for n in threads if f"peer_best_{n}t" in r):
            best = r[f"peer_best_{n}t"]
            print(f"{r['config']}, {n} thread{'s' if n > 1 else ''}: minitrain {r[f'minitrain_{n}t_ms']:.2f} ms, "
                  f"fastest peer {best} {r[f'{best}_ms']:.2f} ms: {r[f'ratio_minitrain_{n}t_over_peer_{n}t']:.2f}x; "
                  f"{r['verdict']}")


if __name__ == "__main__":
    main()
