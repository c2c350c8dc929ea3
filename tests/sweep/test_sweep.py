"""minitrain sweep: the search space expands to the same trials every time, each trial is an ordinary run folder,
a restarted sweep trains only what is missing, and the Ray backend (a real local Ray instance, 2 CPUs) gives the
local pool's table, bit for bit, and stops poor trials cleanly with ASHA."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import textwrap
from pathlib import Path

import numpy as np
import pytest
from interrupts import as_a_terminal_leaves_it, command, interrupt
from test_run import write_tiny_run

from minitrain import cli
from minitrain.common.errors import UserError
from minitrain.config import ConfigError
from minitrain.config.source import ConfigSource
from minitrain.runs.run_lock import writer_of
from minitrain.sweep import SweepSpec, expand, load_sweep_file, run_sweep
from minitrain.sweep.results import best_trial, comparable
from minitrain.sweep.space import draw, parse_distribution, spec_problems

# --- the space ------------------------------------------------------------------------------------------------


def test_a_grid_times_seeds_expands_in_order_with_readable_ids():
    spec = SweepSpec(base="c.yaml", grid={"optimizer.lr_max": [1e-4, 3e-4], "model.n_layer": [1, 2]}, seeds=[7, 8])
    trials = expand(spec)
    assert len(trials) == 8
    assert [t.id for t in trials[:3]] == ["000-lr_max=0.0001-n_layer=1-seed=7", "001-lr_max=0.0001-n_layer=1-seed=8",
                                          "002-lr_max=0.0001-n_layer=2-seed=7"]
    assert trials[7].params == {"optimizer.lr_max": 3e-4, "model.n_layer": 2} and trials[7].seed == 8
    assert trials[0].overrides() == ["optimizer.lr_max=0.0001", "model.n_layer=1"]


def test_random_draws_are_reproducible_and_inside_their_distributions():
    spec = SweepSpec(base="c.yaml", random={"optimizer.lr_max": "loguniform(1e-4, 1e-2)",
                                            "model.n_layer": "randint(1, 3)", "training.batch_size": "choice(8, 16)"},
                     samples=50, grid={"model.dropout": [0.0, 0.1]})
    trials = expand(spec)
    assert len(trials) == 100 and trials == expand(spec)
    assert [t.params for t in expand(spec.model_copy(update={"sampler_seed": 1}))] != [t.params for t in trials]
    lrs = [t.params["optimizer.lr_max"] for t in trials]
    assert all(1e-4 <= lr <= 1e-2 for lr in lrs) and len(set(lrs)) == 50  # each draw with every grid value
    assert {t.params["model.n_layer"] for t in trials} == {1, 2, 3}
    assert {t.params["training.batch_size"] for t in trials} == {8, 16}
    rng = np.random.Generator(np.random.PCG64(0))
    logs = np.log10([draw(*parse_distribution("loguniform(1e-4, 1e-2)"), rng) for _ in range(4000)])
    assert abs(np.mean(logs) + 3) < 0.05  # uniform in log space: mean exponent -3


@pytest.mark.parametrize(("data", "message"), [
    ({"grid": {f"model.k{i}": list(range(100)) for i in range(4)}},
     r"the space has 100,000,000 trials, more than a sweep runs \(10,000\); shrink grid model.k0 \(100 values\)"),
    ({"random": {"model.dropout": "uniform(0, 0.1)"}, "samples": 10**9, "seeds": [1, 2]},
     r"the space has 2,000,000,000 trials, .* shrink samples \(1,000,000,000 values\)"),
    ({"grid": {"model.dropout": [0.0, 0.1]}, "seeds": list(range(5001))}, r"shrink seeds \(5,001 values\)"),
])
def test_a_space_too_large_to_run_is_counted_and_refused_naming_what_to_shrink(data, message):
    """The count is a product of the factors: nothing is built, so 10^9 draws are refused as fast as 3."""
    with pytest.raises(ConfigError, match=message) as error:
        spec_problems({"base": "c.yaml", **data}, ConfigSource(path="s.yaml"))
    assert error.value.exit_code == 2


def test_a_space_at_the_limit_expands_and_one_grown_past_it_is_refused_before_any_draw():
    at_most = SweepSpec(base="c.yaml", grid={"model.dropout": [0.0, 0.1]}, seeds=list(range(5000)))
    assert at_most.count() == 10_000 == len(expand(at_most))
    # 2 × 200 × 100 grid points × 5,000 seeds from lists of 5,300 values: pydantic does not validate an update
    grid = {**at_most.grid, "model.n_layer": list(range(200)), "model.n_head": list(range(100))}
    grown = at_most.model_copy(update={"grid": grid})
    with pytest.raises(UserError, match=r"sweep: the space has 200,000,000 trials, .* shrink seeds") as error:
        expand(grown)  # refused before a single draw is made
    assert error.value.exit_code == 2


@pytest.mark.parametrize(("data", "message"), [
    ({"random": {"model.dropout": "normal(0, 1)"}, "samples": 2}, "is not a distribution"),
    ({"random": {"model.dropout": "uniform(0.3, 0.1)"}, "samples": 2}, "low must be below high"),
    ({"random": {"model.dropout": "uniform(0, 0.1)"}}, "random and samples go together"),
    ({"grid": {"optimizer.lr_max": []}}, "grid optimizer.lr_max has no values"),
    ({"grid": {"training.rng_seed": [1, 2]}, "seeds": [3]}, "training.rng_seed is also set by seeds"),
    ({"grid": {"a": [1]}, "scheduler": {"type": "asha"}}, "scheduler asha runs in Ray Tune"),
    ({"backend": "ray", "scheduler": {"type": "asha"}, "metric": "train_ppl"}, "metric must be one of val_loss"),
    ({"gird": {"a": [1]}}, "gird: unknown key — did you mean 'grid'?"),
])
def test_a_bad_sweep_is_refused_with_the_reason(data, message):
    with pytest.raises(ConfigError, match=message) as error:
        spec_problems({"base": "c.yaml", **data}, ConfigSource(path="s.yaml"))
    assert error.value.exit_code == 2


def test_command_line_errors_are_one_line(tmp_path, capsys):
    config = write_tiny_run(tmp_path)
    assert cli.main(["sweep", str(config), "--seeds", "1,x"]) == 2
    assert "--seeds 1,x: write integers separated by commas" in capsys.readouterr().err
    assert cli.main(["sweep", str(config), "--grid", "optimizer.lr_max"]) == 2
    assert "--grid optimizer.lr_max: write it as KEY=VALUE" in capsys.readouterr().err
    assert cli.main(["sweep", str(config), "--grid", "optimizer.lr_mx=1e-3,2e-3", "--out-dir",
                     str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "trial 000-lr_mx=0.001" in err and "did you mean 'lr_max'?" in err
    assert not (tmp_path / "s").exists()  # every trial's config is checked before anything is written
    (tmp_path / "sweep.yaml").write_text(f"base: {config}\ngrid:\n  optimizer.lr_max: [1e-3]\nseed: [1]\n")
    assert cli.main(["sweep", str(tmp_path / "sweep.yaml")]) == 2
    assert "sweep.yaml:4: seed: unknown key — did you mean 'seeds'?" in capsys.readouterr().err


def _files(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_second_sweep_on_a_folder_in_use_is_refused_and_changes_nothing(tmp_path, capsys):
    """A sweep holds its folder's writer lock (the run folders' lock), so a second one stops before it writes."""
    from minitrain.runs.run_lock import RunLock

    config = write_tiny_run(tmp_path)
    sweep_dir = tmp_path / "s"
    sweep_dir.mkdir()
    (sweep_dir / "sweep.json").write_text('{"trials": []}')
    before = _files(sweep_dir)
    with RunLock(sweep_dir):  # what the first sweep holds from its first check to its last file
        assert cli.main(["sweep", str(config), "--grid", "optimizer.lr_max=1e-3", "--out-dir", str(sweep_dir)]) == 2
    err = capsys.readouterr().err
    assert f"error: {sweep_dir} is in use by another minitrain process (PID " in err and err.count("\n") == 1
    assert _files(sweep_dir) == {**before, Path(".run.lock"): (sweep_dir / ".run.lock").read_bytes()}
    assert not (sweep_dir / "trials").exists()


def test_a_folder_holding_another_sweeps_table_is_refused(tmp_path, capsys):
    config = write_tiny_run(tmp_path)
    sweep_dir = tmp_path / "s"
    sweep_dir.mkdir()
    other = {"base": str(config), "space": {"grid": {"optimizer.lr_max": [0.1]}}, "trials": []}
    (sweep_dir / "sweep.json").write_text(json.dumps(other))
    assert cli.main(["sweep", str(config), "--grid", "optimizer.lr_max=1e-3", "--out-dir", str(sweep_dir)]) == 2
    assert f"error: {sweep_dir} holds the table of another sweep (another base or space)" in capsys.readouterr().err
    assert json.loads((sweep_dir / "sweep.json").read_text()) == other and not (sweep_dir / "trials").exists()


def test_every_documented_sweep_command_writes_its_own_folder_under_runs():
    """The sweep commands of README.md, docs/sweeps.md and experiments/: none writes into a committed folder, and no
    two of them (another space or backend) share a folder, where the second would replace the first's table."""
    import re
    import shlex

    from minitrain.commands.sweep import spec_data
    from minitrain.config import load_config
    from minitrain.sweep.runner import sweep_name

    repo = Path(__file__).resolve().parents[2]
    texts = [repo / "README.md", repo / "docs" / "sweeps.md", *sorted((repo / "experiments").glob("sweep-*/*.*"))]
    lines = [line for path in texts if path.suffix in (".md", ".yaml")
             for line in path.read_text().replace("\\\n", " ").splitlines()]
    commands = [re.sub(r"^#\s*", "", line.split(" # ", 1)[0].strip()) for line in lines]
    folders: dict[str, tuple] = {}
    with contextlib.chdir(repo):
        for text in [c for c in commands if c.startswith("minitrain sweep ")]:
            args = cli.build_parser().parse_args(shlex.split(text)[1:])
            if not Path(args.sweep).is_file() or args.address:  # a user's file (my.yaml); a cluster's shared path
                continue
            data, source, sweep_file = spec_data(args)
            spec = spec_problems(data, source)
            folder = spec.out_dir or f"runs/sweeps/{sweep_name(spec, sweep_file, load_config(spec.base))}"
            assert Path(folder).parts[0] == "runs", text
            what = (spec.model_dump_json(exclude={"workers", "out_dir"}),)
            assert folders.setdefault(folder, what) == what, f"{text}: shares {folder} with another sweep"
    assert len(folders) >= 3  # sweep-lr, its Ray twin, the sweep from flags


# --- running it -------------------------------------------------------------------------------------------------

GRID = {"optimizer.lr_max": [1e-3, 3e-3]}


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory):
    """A 4-trial sweep of the tiny config (2 learning rates × 2 seeds) on 2 local workers."""
    folder = tmp_path_factory.mktemp("sweep")
    config = write_tiny_run(folder)
    spec = SweepSpec(base=str(config), grid=GRID, seeds=[1, 2], workers=2, out_dir=str(folder / "local"))
    heard = []  # each progress line, and whether the sweep held its folder's lock when it came
    summary, rows = run_sweep(spec, progress=lambda line: heard.append((line, writer_of(folder / "local"))))
    return spec, summary, rows, folder, heard


@pytest.mark.slow
def test_a_local_sweep_writes_its_table_plots_and_ordinary_run_folders(local_sweep, capsys):
    spec, summary, rows, folder, heard = local_sweep
    sweep_dir = folder / "local"
    assert [r["trial"] for r in rows] == [t.id for t in expand(spec)]
    assert all(r["status"] == "completed" and r["steps"] == 24 for r in rows)
    best = min(rows, key=lambda r: r["val_ppl"])
    assert summary["best"] == best["trial"] == best_trial(rows, "val_ppl", "min")["trial"]
    on_disk = json.loads((sweep_dir / "sweep.json").read_text())
    assert on_disk["trials"] == rows and on_disk["best"] == best["trial"] and on_disk["workers"] == 2
    assert on_disk["out_dir"] == str(sweep_dir) and on_disk["name"] == f"{folder.name}-sweep"  # <base name>-sweep
    header = (sweep_dir / "sweep.csv").read_text().splitlines()[0]
    assert header.startswith("trial,optimizer.lr_max,seed,status,steps,val_ppl,val_loss,best_val_ppl")
    for name in ("sweep_curves.png", "sweep_params.png"):
        assert (sweep_dir / name).read_bytes()[:4] == b"\x89PNG"
    # Each trial is a run folder like any other: its overrides recorded, its results the table's, `info` reads it.
    trial = sweep_dir / rows[3]["run_dir"]
    assert "# override: --set optimizer.lr_max=0.003" in (trial / "config.resolved.yaml").read_text()
    assert "# override: --seed 2" in (trial / "config.resolved.yaml").read_text()
    assert json.loads((trial / "results.json").read_text())["val_ppl"] == rows[3]["val_ppl"]
    assert cli.main(["info", str(trial)]) == 0 and "status: completed" in capsys.readouterr().out
    assert len(list((sweep_dir / "models").glob("minigpt-phase18-*.safetensors"))) == 4
    # A line as it starts and one per trial as it ends, all while the sweep holds its folder; released after.
    assert heard[0][0] == f"sweep {summary['name']}: 4 trials, 0 already done, 4 to train (local, folder {sweep_dir})"
    by_trial = {line.split()[2].rstrip(":"): line for line, _ in heard[1:]}
    assert sorted(line.split()[1] for line, _ in heard[1:]) == ["1/4", "2/4", "3/4", "4/4"]  # in the order they end
    assert all(f"{r['trial']}: completed, val_ppl {r['val_ppl']:.4g}, 24 steps, " in by_trial[r["trial"]]
               for r in rows) and len(by_trial) == 4
    assert all(held == f"PID {os.getpid()}" for _, held in heard) and writer_of(sweep_dir) is None


@pytest.mark.slow
def test_a_restarted_sweep_trains_only_what_is_missing(local_sweep):
    spec, _, rows, folder, _ = local_sweep
    sweep_dir = folder / "restart"
    shutil.copytree(folder / "local", sweep_dir)
    trials = [sweep_dir / row["run_dir"] for row in rows]
    untouched = {t: (t / "results.json").stat().st_mtime_ns for t in trials[:2]}
    shutil.rmtree(trials[2])  # never started
    # Killed after its checkpoint at step 16: no results, the later checkpoints gone, the manifest still running.
    (trials[3] / "results.json").unlink()
    for step in (20, 24):
        (trials[3] / "checkpoints" / f"step-{step}.safetensors").unlink()
    (trials[3] / "checkpoints" / "latest").write_text("step-16.safetensors\n")
    manifest = json.loads((trials[3] / "manifest.json").read_text())
    (trials[3] / "manifest.json").write_text(json.dumps({**manifest, "status": "running"}))

    _, again = run_sweep(spec.model_copy(update={"out_dir": str(sweep_dir)}))
    assert comparable(again) == comparable(rows)
    assert {t: (t / "results.json").stat().st_mtime_ns for t in trials[:2]} == untouched
    resumed = json.loads((trials[3] / "manifest.json").read_text())
    assert resumed["resumes"][-1]["step"] == 16 and resumed["status"] == "completed"
    assert (trials[3] / "train_log.jsonl").read_bytes() == (
        folder / "local" / rows[3]["run_dir"] / "train_log.jsonl").read_bytes()
    # A sweep whose trials would differ from those in its folder is refused, before anything runs: by the table
    # (another space), and without a table by each trial's recorded config.
    other = spec.model_copy(update={"out_dir": str(sweep_dir), "set": {"optimizer.weight_decay": 0.0}})
    with pytest.raises(UserError, match=r"restart holds the table of another sweep \(another base or space\)"):
        run_sweep(other)
    (sweep_dir / "sweep.json").unlink()
    with pytest.raises(UserError, match=r"000-lr_max=0\.001-seed=1: .* holds a run of another config"):
        run_sweep(other)


@pytest.mark.slow
def test_a_base_with_seed_null_draws_one_seed_for_the_whole_sweep_and_keeps_it_when_run_again(tmp_path):
    """A seed drawn per trial would mix the seed's effect into every comparison of the space."""
    config = write_tiny_run(tmp_path)
    config.write_text(config.read_text().replace("  rng_seed: 42\n", "") + "seed: null\n")
    spec = SweepSpec(base=str(config), grid=GRID, workers=1, out_dir=str(tmp_path / "sweep"))
    heard: list[str] = []
    summary, rows = run_sweep(spec, progress=heard.append)
    drawn = json.loads((tmp_path / "sweep" / "sweep.json").read_text())["drawn_seed"]
    seeds = {json.loads((tmp_path / "sweep" / r["run_dir"] / "manifest.json").read_text())["config"]["training"]
             ["rng_seed"] for r in rows}
    assert seeds == {drawn} and summary["drawn_seed"] == drawn and all(r["status"] == "completed" for r in rows)
    assert f"every trial without a seed of its own trains with seed {drawn}, drawn once for this sweep" in heard[0]
    again, rows_again = run_sweep(spec)  # a new draw at load; the folder's recorded seed wins, nothing retrains
    assert again["drawn_seed"] == drawn and comparable(rows_again) == comparable(rows)


@pytest.mark.slow
def test_a_tracked_sweep_is_one_mlflow_experiment_with_a_run_per_trial(tmp_path):
    from mlflow.tracking import MlflowClient

    config = write_tiny_run(tmp_path)
    config.write_text(config.read_text().replace("monitoring: {progress: none}",
                                                 "monitoring: {progress: none, tracking: {backend: mlflow}}"))
    spec = SweepSpec(base=str(config), name="tiny-lr", grid=GRID, workers=2, out_dir=str(tmp_path / "s"))
    _, rows = run_sweep(spec)
    client = MlflowClient(f"sqlite:///{tmp_path / 's' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("tiny-lr")
    runs = client.search_runs([experiment.experiment_id])
    assert sorted(r.info.run_name for r in runs) == [r["trial"] for r in rows]
    assert all(r.info.status == "FINISHED" for r in runs)
    by_name = {r.info.run_name: r for r in runs}
    assert by_name[rows[1]["trial"]].data.params["optimizer.lr_max"] == "0.003"
    assert by_name[rows[1]["trial"]].data.metrics["val_ppl"] == rows[1]["val_ppl"]


# --- Ray ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local_ray():
    """A real local Ray instance with 2 CPUs for this module's Ray tests, shut down after them: a new one
    (address local) in every test process, never a cluster that RAY_ADDRESS or `ray start` left on the machine."""
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_ray_runs_the_same_trials_to_the_same_table(local_sweep, local_ray):
    spec, _, rows, folder, _ = local_sweep
    heard = []  # each progress line, and how many trials had finished their folder when it came

    def hear(line: str) -> None:
        heard.append((line, len(list((folder / "ray" / "trials").glob("*/results.json")))))

    on = spec.model_copy(update={"backend": "ray", "out_dir": str(folder / "ray")})
    interrupt = signal.getsignal(signal.SIGINT)
    summary, on_ray = run_sweep(on, progress=hear)
    assert summary["backend"] == "ray"
    assert signal.getsignal(signal.SIGINT) is interrupt  # not Tune's, which would swallow a later Ctrl-C
    # A line per trial as Tune completes it: at the first, two trials (2 at a time) have not even started.
    assert sorted(line.split()[1] for line, _ in heard[1:]) == ["1/4", "2/4", "3/4", "4/4"]
    assert next(done for line, done in heard if line.startswith("trial 1/4")) <= 2
    assert comparable(on_ray) == comparable(rows)
    for row in rows:  # the runs themselves, byte for byte
        assert (folder / "ray" / row["run_dir"] / "train_log.jsonl").read_bytes() == (
            folder / "local" / row["run_dir"] / "train_log.jsonl").read_bytes()
    assert (folder / "ray" / "ray" / "tune").is_dir()  # Ray Tune's own records


def test_ray_trials_report_the_sweeps_own_metric_to_tune(tmp_path, monkeypatch):
    """Tune is told the sweep's metric, and every report carries it: val_ppl at each validation; dev_ppl, scored
    only after training, in one report of the finished run's results (so Tune's best trial is the sweep's)."""
    import dataclasses

    from ray import tune

    from minitrain.sweep import ray_backend
    from minitrain.sweep.trials import TrialJob

    config = write_tiny_run(tmp_path)  # 24 steps, validation every 5, a dev split
    reports: list[dict] = []
    monkeypatch.setattr(tune, "report", reports.append)

    def reported(name: str, metric: str) -> tuple[list[dict], dict]:
        job = TrialJob(name, str(config), (), {"output.dir": str(tmp_path / name),
                                               "output.models_dir": str(tmp_path / "models")})
        reports.clear()
        ray_backend._trainable({"job": dataclasses.asdict(job), "metric": metric})
        return list(reports), json.loads((tmp_path / name / "results.json").read_text())

    on_val, results = reported("val", "val_ppl")
    assert len(on_val) >= 4 and all("val_ppl" in r and "dev_ppl" not in r for r in on_val)
    assert on_val[-1]["val_ppl"] == results["val_ppl"]
    on_dev, results = reported("dev", "dev_ppl")
    assert len(on_dev) == 1 and on_dev[0]["step"] == results["steps"] == 24
    assert on_dev[0]["dev_ppl"] == results["dev_ppl"] and on_dev[0]["val_ppl"] == results["val_ppl"]


@pytest.mark.slow
def test_asha_stops_poor_trials_and_their_folders_are_complete(tmp_path, local_ray):
    config = write_tiny_run(tmp_path)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(textwrap.dedent(f"""\
        base: {config}
        grid:
          optimizer.lr_max: [1.0e-2, 3.0e-3, 1.0e-3, 3.0e-4]
        backend: ray
        workers: 2
        scheduler: {{type: asha, grace_period: 5, reduction_factor: 2}}
        out_dir: {tmp_path / "asha"}
        """))
    assert cli.main(["sweep", str(sweep)]) == 0
    rows = json.loads((tmp_path / "asha" / "sweep.json").read_text())["trials"]
    stopped = [r for r in rows if r["status"] == "early_stopped"]
    assert stopped and all(r["steps"] < 24 for r in stopped)
    # ASHA is asynchronous: a trial is compared with those that reached its rung before it, so which of the
    # first two trials stops depends on which reports first. lr 3e-4 (= lr_min: no schedule at all) learns
    # slowest, and it starts only when two trials have ended, so it always meets at least two better ones.
    assert rows[-1] in stopped
    for row in rows:  # every trial finished its folder: results, model, report
        results = json.loads((tmp_path / "asha" / row["run_dir"] / "results.json").read_text())
        assert results["status"] == row["status"] and results["steps"] == row["steps"]
        assert (tmp_path / "asha" / row["run_dir"] / "report.md").is_file()


@pytest.mark.slow
def test_a_trial_the_scheduler_stopped_is_finished_where_it_stopped_whatever_its_actor_left(tmp_path, monkeypatch):
    """Tune ends a stopped trial's actor without waiting for its training thread (FunctionTrainable.stop returns at
    once), so the trial is cut off anywhere after its report, on a busy machine even before it saw the stop; the
    driver then finishes it from the folder, once the actor has let go of it (ray_backend.finish_stopped)."""
    from minitrain.callbacks import Callback
    from minitrain.runs.run_lock import RunLock
    from minitrain.sweep import ray_backend
    from minitrain.sweep.trials import TrialJob, run_job

    config = write_tiny_run(tmp_path)  # 24 steps, validation every 5, a checkpoint every 4

    def job(name: str) -> TrialJob:
        return TrialJob(name, str(config), (), {"output.dir": str(tmp_path / name),
                                                "output.models_dir": str(tmp_path / "models" / name)})

    # What the actor writes when its thread sees the stop in time: the run ends after step 5's report.
    assert run_job(job("whole"), callbacks=[ray_backend.StopAfter(5, ray_backend.ASHA_STOP)]) is None

    class CutOff(Callback):  # the actor ended at step 5's report, before its thread woke up
        def on_validation_end(self, ctx) -> None:
            if ctx.step == 5:
                raise SystemExit(0)

    cut = tmp_path / "cut"
    with pytest.raises(SystemExit):
        run_job(job("cut"), callbacks=[CutOff()])
    assert json.loads((cut / "manifest.json").read_text())["status"] == "running"  # no stop recorded
    assert not (cut / "results.json").exists()

    # The actor still holds the folder when the experiment ends: the driver waits until it lets go.
    holder = RunLock(cut).acquire()
    seen = []

    def writer_of(run_dir):
        found = real_writer_of(run_dir)
        if found is not None:
            seen.append(found)
            holder.release()  # the actor's process ends
        return found

    real_writer_of = ray_backend.writer_of
    monkeypatch.setattr(ray_backend, "writer_of", writer_of)
    assert ray_backend.finish_stopped(job("cut"), 5) is None
    assert seen  # it found the writer, and did not fail on its lock

    results = json.loads((cut / "results.json").read_text())
    assert (results["status"], results["steps"]) == ("early_stopped", 6)
    whole = json.loads((tmp_path / "whole" / "results.json").read_text())
    assert [results[key] for key in ("val_loss", "val_ppl", "train_ppl", "model_sha256")] == [
        whole[key] for key in ("val_loss", "val_ppl", "train_ppl", "model_sha256")]  # the same trained model
    assert (cut / "report.md").is_file()
    assert (cut / "train_log.jsonl").read_bytes() == (tmp_path / "whole" / "train_log.jsonl").read_bytes()
    assert ray_backend.ASHA_STOP in (cut / "logs" / "train.log").read_text()
    done = (cut / "results.json").read_bytes()
    assert ray_backend.finish_stopped(job("cut"), 5) is None  # a finished trial is left as it is
    assert (cut / "results.json").read_bytes() == done


def _live(field: str, value: int) -> list[int]:
    """The pids of the live (not zombie) processes whose /proc stat `field` (ppid or pgrp) is `value`."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, ppid, pgrp = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue  # ended while we looked
        if state != "Z" and {"ppid": ppid, "pgrp": pgrp}[field] == str(value):
            found.append(int(stat.parent.name))
    return found


def _status(pid: int) -> dict[str, str]:
    return {key: value.strip() for key, _, value in
            (line.partition(":") for line in Path(f"/proc/{pid}/status").read_text().splitlines())}


def _stopped(pid: int) -> bool:
    """Whether process `pid` is stopped (SIGSTOP takes effect a moment after kill() returns)."""
    return _status(pid)["State"].startswith("T")


def _pending(pid: int, signum: int) -> bool:
    """Whether signal `signum` waits to be delivered to process `pid` (a stopped process keeps it pending)."""
    status = _status(pid)
    return bool((int(status["SigPnd"], 16) | int(status["ShdPnd"], 16)) >> (signum - 1) & 1)


def _wait_until(condition, what: str, process=None) -> None:
    """Poll `condition` until it holds; fail (not hang) if `process` ended first or after a 10-minute hang guard."""
    import time

    deadline = time.monotonic() + 600
    while not condition():
        if (process is not None and process.poll() is not None) or time.monotonic() > deadline:
            pytest.fail(f"never saw {what}")
        time.sleep(0.05)


def _long_sweep(tmp_path) -> Path:
    """Three trials of 1500 steps on two workers, a checkpoint every 500."""
    config = write_tiny_run(tmp_path)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(textwrap.dedent(f"""\
        base: {config}
        set: {{scheduler.total_steps: 1500, training.checkpoint.save_every: 500}}
        grid: {{optimizer.lr_max: [1.0e-3, 2.0e-3, 3.0e-3]}}
        workers: 2
        out_dir: {tmp_path / "s"}
        """))
    return sweep


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads processes from /proc")


@pytest.mark.slow
@needs_proc
@pytest.mark.parametrize("off_the_main_thread", [False, True], ids=["main thread", "another thread"])
def test_ctrl_c_stops_a_sweep_cleanly_and_running_it_again_finishes_it(off_the_main_thread, tmp_path):
    """Stopped at a chosen point, whatever the machine's speed: when both trials have written their first
    checkpoint the workers are frozen (SIGSTOP), the driver gets SIGINT, and the workers are let go only once the
    driver's SIGTERM waits in each of them, so neither can end its trial or start the third one first. Also when
    one of the driver's other threads handles the SIGINT: its main thread, waiting for a trial to end, once slept
    on, as the frozen trials never end."""
    import subprocess

    sweep = _long_sweep(tmp_path)
    process = subprocess.Popen(command("sweep", str(sweep), off_the_main_thread=off_the_main_thread),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=as_a_terminal_leaves_it)
    trials = [tmp_path / "s" / "trials" / name for name in ("000-lr_max=0.001", "001-lr_max=0.002")]
    _wait_until(lambda: all((t / "checkpoints" / "step-500.safetensors").is_file() for t in trials),
                "both trials' checkpoint at step 500", process)
    workers = [pid for pid in _live("ppid", process.pid)  # the pool's, not multiprocessing's resource tracker
               if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert len(workers) == 2
    for pid in workers:
        os.kill(pid, signal.SIGSTOP)
    # Until they are stopped, a SIGTERM would be taken first (the lower signal number) and then frozen with them.
    _wait_until(lambda: all(_stopped(pid) for pid in workers), "the workers stopped", process)
    interrupt(process, off_the_main_thread=off_the_main_thread)  # the driver only; a terminal's Ctrl-C reaches all
    _wait_until(lambda: all(_pending(pid, signal.SIGTERM) for pid in workers), "the driver's SIGTERM in its workers",
                process)
    for pid in workers:
        os.kill(pid, signal.SIGCONT)
    _, err = process.communicate(timeout=600)  # a hang guard
    assert process.returncode == 130 and "error: interrupted: the sweep's table is" in err
    rows = json.loads((tmp_path / "s" / "sweep.json").read_text())["trials"]
    assert [r["status"] for r in rows] == ["interrupted", "interrupted", "not started"]
    assert all(500 <= r["steps"] < 1500 for r in rows[:2])
    if off_the_main_thread:
        return  # the folders it left are those of the main-thread case: running it again is tested there

    _, again = run_sweep(load_sweep_file(sweep))
    assert [r["status"] for r in again] == ["completed"] * 3 and all(r["steps"] == 1500 for r in again)
    for row in again[:2]:  # resumed from the checkpoint the interrupt saved
        manifest = json.loads((tmp_path / "s" / row["run_dir"] / "manifest.json").read_text())
        assert manifest["resumes"][-1]["step"] == rows[again.index(row)]["steps"]


@pytest.mark.slow
@needs_proc
def test_kill_9_of_a_sweep_takes_its_workers_with_it_and_frees_the_callers_pipes(tmp_path):
    """Killed mid-trial, the driver cannot stop its workers: they notice it is gone and end, so no process of the
    sweep's group outlives it and a caller reading its output reaches end-of-file."""
    import subprocess
    import sys

    sweep = _long_sweep(tmp_path)
    process = subprocess.Popen([sys.executable, "-m", "minitrain.cli", "sweep", str(sweep)], start_new_session=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = tmp_path / "s" / "trials" / "000-lr_max=0.001" / "train_log.jsonl"
    _wait_until(lambda: log.is_file() and log.read_text().count("\n") >= 2, "trial 000 training", process)
    assert _live("ppid", process.pid)  # its workers
    os.kill(process.pid, signal.SIGKILL)
    try:
        out, _ = process.communicate(timeout=120)  # a hang guard: EOF on both pipes once nothing holds them
        assert process.returncode == -signal.SIGKILL
        _wait_until(lambda: not _live("pgrp", process.pid), "the sweep's process group end")
    except subprocess.TimeoutExpired:
        pytest.fail(f"the caller's pipes stayed open: processes {_live('pgrp', process.pid)} outlived the sweep")
    finally:  # a failing run leaves no orphans behind either
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    assert writer_of(tmp_path / "s") is None and out.startswith("sweep ")  # the lock died with it


def test_the_committed_sweep_is_the_table_of_its_sweep_file():
    """experiments/sweep-lr: its table lists exactly the trials its sweep.yaml expands to, all finished, and names
    the best on its metric; the csv says what the json says."""
    import csv
    from pathlib import Path

    folder = Path(__file__).resolve().parents[2] / "experiments" / "sweep-lr"
    spec = load_sweep_file(folder / "sweep.yaml")
    table = json.loads((folder / "sweep.json").read_text())
    rows = table["trials"]
    assert [r["trial"] for r in rows] == [t.id for t in expand(spec)] and len(rows) == 9
    assert all(r["status"] == "completed" and r["steps"] == 2000 for r in rows)
    assert table["metric"] == spec.metric == "dev_ppl"
    assert table["best"] == best_trial(rows, "dev_ppl", "min")["trial"] == "008-lr_max=0.001-seed=44"
    with open(folder / "sweep.csv", newline="") as f:
        csv_rows = list(csv.DictReader(f))
    assert [(r["trial"], float(r["val_ppl"])) for r in csv_rows] == [(r["trial"], r["val_ppl"]) for r in rows]


def test_ray_missing_is_one_clear_error_before_anything_is_written(tmp_path, monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # what a Python without the package raises
    monkeypatch.setitem(sys.modules, "ray.tune", None)
    config = write_tiny_run(tmp_path)
    assert cli.main(["sweep", str(config), "--grid", "optimizer.lr_max=1e-3", "--backend", "ray",
                     "--out-dir", str(tmp_path / "s")]) == 2
    assert "--backend ray needs the ray package" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_flags_build_the_same_spec_a_sweep_file_gives(tmp_path):
    from minitrain.commands.sweep import spec_data

    config = write_tiny_run(tmp_path)
    args = cli.build_parser().parse_args([
        "sweep", str(config), "--grid", "optimizer.lr_max=1e-3,3e-3", "--grid", "model.n_layer=1,2",
        "--random", "model.dropout=uniform(0, 0.2)", "--samples", "3", "--seeds", "7,8", "--set",
        "training.checkpoint.save_every=null", "--metric", "val_loss", "--workers", "3", "--backend", "ray",
        "--scheduler", "asha", "--grace-period", "10", "--out-dir", "o"])
    data, _, sweep_file = spec_data(args)
    assert sweep_file is None
    spec = spec_problems(data, ConfigSource())
    assert spec == SweepSpec(base=str(config), grid={"optimizer.lr_max": [1e-3, 3e-3], "model.n_layer": [1, 2]},
                             random={"model.dropout": "uniform(0, 0.2)"}, samples=3, seeds=[7, 8],
                             set={"training.checkpoint.save_every": None}, metric="val_loss", workers=3,
                             backend="ray", scheduler={"type": "asha", "grace_period": 10}, out_dir="o")
    assert len(expand(spec)) == 2 * 2 * 3 * 2
    # Flags add to a sweep file's space and replace its values.
    (tmp_path / "sweep.yaml").write_text(f"base: {config}\ngrid: {{optimizer.lr_max: [1.0e-3]}}\nworkers: 1\n")
    data, _, sweep_file = spec_data(cli.build_parser().parse_args(
        ["sweep", str(tmp_path / "sweep.yaml"), "--seeds", "1,2", "--workers", "2"]))
    assert sweep_file == str(tmp_path / "sweep.yaml")
    assert data == {"base": str(config), "grid": {"optimizer.lr_max": [1e-3]}, "workers": 2, "seeds": [1, 2]}
