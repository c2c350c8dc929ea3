"""The contract of each plug-in kind, run on EVERY record of its registry (minitrain/common/registry.py): a new
optimizer, schedule, loss, merge method, pruning method or structure, tracker, callback, dashboard chart, table
format, quantization scheme or sequential layer kind is covered here by joining its table, with nothing added to this
file. Each test names the property a record of its kind must have, with an oracle that does not come from the record
itself."""

from __future__ import annotations

import inspect
import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load as st_load
from safetensors.numpy import save as st_save

from minitrain.autograd.gradcheck import gradcheck
from minitrain.autograd.loss_kinds import LOSSES
from minitrain.autograd.tensor import Tensor
from minitrain.common.registry import keyword_defaults, load
from minitrain.config.observing import CALLBACKS, CHARTS, TRACKER_BACKENDS, Chart, DashboardConfig, TrackingConfig
from minitrain.config.schema import TrainingConfig
from minitrain.course.fixtures import write_tiny_run
from minitrain.data.formats import TABLE_FORMATS, detect_format, read_table
from minitrain.data.pretrained_tokenizer import GGUF_TOKENIZER_MODELS, PretrainedTokenizer
from minitrain.data.record_shapes import SHAPES as RECORD_SHAPES
from minitrain.formats.gguf_dtypes import GGUF_DTYPES
from minitrain.formats.gguf_quants import TENSOR_TYPES
from minitrain.merging.merge import merge_states
from minitrain.merging.methods import MERGE_METHODS
from minitrain.merging.spec import MergeSpec, Parameters
from minitrain.models.sequential import LayerSpec, parameter_shapes, resolve_layer
from minitrain.models.sequential_layers import LAYERS as SEQUENTIAL_LAYERS
from minitrain.optim.factory import OPTIMIZERS, build_optimizer
from minitrain.optim.schedule import SCHEDULES, build_scheduler
from minitrain.pruning.masks import STRUCTURES, prunable_paths
from minitrain.pruning.scores import METHODS as PRUNING_METHODS
from minitrain.pruning.scores import prune_model
from minitrain.quant.scheme import BITS, GRANULARITIES, METHODS, SCHEMES, Scheme
from minitrain.tracking import Tracker, build_tracker, default_uri


class Param:
    def __init__(self, data: np.ndarray) -> None:
        self.data, self.grad = data, np.zeros_like(data)


# ----------------------------------------------------------------------------------------------- optimizers


def least_squares():
    """½·mean‖A X − B‖² over X (4, 3), and its gradient Aᵀ(A X − B)/n; B = A X* so the minimum is 0."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=(16, 4)).astype(np.float32)
    b = a @ rng.normal(size=(4, 3)).astype(np.float32)
    loss = lambda x: 0.5 * float(np.mean((a @ x - b) ** 2))  # noqa: E731
    grad = lambda x: (a.T @ (a @ x - b) / b.size).astype(np.float32)  # noqa: E731
    return loss, grad


def steps(opt, params, grad, n, loss):
    """n steps; a full-batch optimizer (L-BFGS, CG) gets torch's closure: zero the gradient, set it, return the loss."""
    def closure():
        opt.zero_grad()
        for _, p in params:
            p.grad[...] = grad(p.data)
        return loss(params[0][1].data)

    for _ in range(n):
        if opt.full_batch:
            opt.step(closure)
        else:
            closure()
            opt.step()


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_every_optimizer_brings_a_least_squares_loss_down_and_its_state_round_trips(name):
    loss, grad = least_squares()
    params = [("w", Param(np.zeros((4, 3), np.float32)))]
    opt = build_optimizer(name, params, lr=0.02)
    start = loss(params[0][1].data)
    steps(opt, params, grad, 150, loss)
    assert loss(params[0][1].data) < 0.5 * start, f"{name}: {start} -> {loss(params[0][1].data)}"
    # What a checkpoint does with the state: arrays into safetensors, the rest into JSON.
    state = opt.state_dict()
    scalars = json.loads(json.dumps({k: v for k, v in state.items() if k != "buffers"}))
    copy = [("w", Param(params[0][1].data.copy()))]
    restored = build_optimizer(name, copy, lr=1.0)  # lr comes back from the state
    restored.load_state_dict({**scalars, "buffers": st_load(st_save(state["buffers"]))})
    steps(opt, params, grad, 3, loss)
    steps(restored, copy, grad, 3, loss)
    np.testing.assert_array_equal(copy[0][1].data, params[0][1].data)


# ----------------------------------------------------------------------------------------------- losses


def loss_inputs(kind, rng):
    """Tiny float64 inputs for a loss of `kind.inputs`: (the Tensors to differentiate, the other arguments)."""
    leaf = lambda *shape: Tensor(rng.normal(size=shape), dtype=np.float64, requires_grad=True)  # noqa: E731
    if kind.inputs == "logits, classes":
        return [leaf(5, 3)], [rng.integers(0, 3, size=5)]
    if kind.inputs == "prediction, target":
        return [leaf(5, 2)], [3 * rng.normal(size=(5, 2))]  # errors both sides of huber's delta 1
    required = [p for p in inspect.signature(kind.fn).parameters.values() if p.default is inspect.Parameter.empty]
    return [leaf(5, 3) for _ in required], []  # embedding losses: (B, D) rows, all of them differentiated


@pytest.mark.parametrize("name", list(LOSSES))
def test_every_loss_is_a_finite_nonnegative_scalar_whose_gradient_matches_central_differences(name):
    kind = LOSSES[name]
    tensors, rest = loss_inputs(kind, np.random.default_rng(0))
    value = kind.fn(*tensors, *rest)
    assert value.shape == () and np.isfinite(value.item()) and value.item() >= 0
    assert gradcheck(lambda *t: kind.fn(*t, *rest), tensors)


def test_training_loss_names_the_losses_that_have_a_task():
    assert TrainingConfig.model_fields["loss"].annotation.__args__[0].__args__ == tuple(
        name for name, kind in LOSSES.items() if kind.tasks)


# ----------------------------------------------------------------------------------------------- schedules

# A value for each required key a schedule may have; a schedule with a required key not here fails with its name.
REQUIRED = {"lr_max": 0.1, "total_steps": 40, "step_size": 10, "gamma": 0.9}


def schedule_keys(name: str) -> dict:
    """The required keys, lr_min = 0.001 where the schedule takes it, and a warm-up of 5 steps where it has the
    shared one (it takes warmup_start_lr: one_cycle takes warmup_steps only to refuse it, being its own)."""
    accepted = keyword_defaults(SCHEDULES[name], skip=("optimizer",))
    keys = {k: REQUIRED[k] for k, v in accepted.items() if v is inspect.Parameter.empty}
    keys.update({"lr_min": 0.001} if "lr_min" in accepted else {})
    keys.update({"warmup_steps": 5} if "warmup_start_lr" in accepted else {})
    return keys


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_every_schedule_gives_finite_lrs_within_its_bounds_and_reaches_its_documented_endpoints(name):
    """The module docstring: the warm-up rises linearly from warmup_start_lr (0) to lr_max, the decay starts at
    lr_max (one_cycle is its own warm-up: it peaks at lr_max), no lr leaves [lr_min, lr_max], and a schedule that
    ends (total_steps) ends at lr_min."""
    keys = schedule_keys(name)
    sched = build_scheduler(name, **keys)
    total = keys.get("total_steps", 40)
    lrs = [sched.lr_at(s) for s in range(total)]
    assert all(math.isfinite(lr) and 0 < lr <= keys["lr_max"] * (1 + 1e-12) for lr in lrs), lrs
    assert max(lrs) == pytest.approx(keys["lr_max"])
    floor = keys.get("lr_min", 0.0)
    assert min(lrs) >= floor * (1 - 1e-12)
    if keys.get("warmup_steps"):
        w = keys["warmup_steps"]
        np.testing.assert_allclose(lrs[:w], [keys["lr_max"] * (s + 1) / w for s in range(w)])
    if "total_steps" in keys:
        assert min(sched.lr_at(total - 1), sched.lr_at(total)) == pytest.approx(floor)
    sched.step()
    assert sched.lr == lrs[1]  # step() advances to lr_at(1)


# ----------------------------------------------------------------------------------------------- merge methods

# A value for each parameter a merge config may give (MergeSpec's Parameters).
GIVEN = {"weight": 0.7, "density": 0.5, "lambda_": 0.9, "normalize": True, "t": 0.3}
SHAPES = {"a.weight": (3, 4), "b.bias": (5,)}


def spec_for(name: str, models: int, base: bool = True, **extra: object) -> MergeSpec:
    record = MERGE_METHODS[name]
    parameters = {("lambda" if k == "lambda_" else k): GIVEN[k] for k in sorted(record.requires | set(extra))}
    return MergeSpec.model_validate({
        "merge_method": name, "base_model": "base" if base else None, "parameters": parameters,
        "models": [{"model": f"m{i}"} for i in range(models)]})


def states(n: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{k: rng.normal(size=s).astype(np.float32) for k, s in SHAPES.items()} for _ in range(n)]


def test_the_parameters_merge_configs_take_are_the_ones_this_file_gives():
    assert set(GIVEN) == set(Parameters.model_fields)


@pytest.mark.parametrize("name", list(MERGE_METHODS))
def test_every_merge_method_merges_tiny_tensors_and_refuses_what_it_does_not_read(name):
    record = MERGE_METHODS[name]
    least, most = record.models
    n = least if most == least else max(least, 2)
    spec = spec_for(name, n)
    base, *inputs = states(n + 1)
    merged = merge_states(spec, base if spec.base() is not None else None, inputs)
    assert list(merged) == list(SHAPES)
    for key, shape in SHAPES.items():
        assert merged[key].shape == shape and merged[key].dtype == np.float32 and np.isfinite(merged[key]).all()
    # Merging a model with itself gives it back (every method: weights normalise, task vectors are zero).
    same = states(1, seed=5)[0]
    again = merge_states(spec, same if spec.base() is not None else None, [same] * n)
    for key in SHAPES:
        np.testing.assert_allclose(again[key], same[key], rtol=1e-5, atol=1e-6)
    for key in sorted(set(GIVEN) - record.reads):  # a key it does not read is refused
        with pytest.raises(ValueError, match=f"{name} does not read"):
            spec_for(name, n, **{key: GIVEN[key]})
    for key in sorted(record.reads - record.requires):  # and one it reads is taken
        spec_for(name, n, **{key: GIVEN[key]})
    if record.needs_base:
        with pytest.raises(ValueError, match="needs base_model"):
            spec_for(name, n, base=False)
    else:
        assert spec_for(name, n).base() is None  # base_model given and not read
    for wrong in ([least - 1] if least > 1 else []) + ([most + 1] if most is not None else []):
        with pytest.raises(ValueError, match=f"{name} merges"):
            spec_for(name, wrong)


# ----------------------------------------------------------------------------------------------- trackers

ROWS = [{"step": 0, "loss": 2.5}, {"step": 1, "loss": 1.25, "val_loss": 1.5}, {"step": 2, "loss": 0.75}]


def read_mlflow(uri: str, run: str, experiment: str) -> list[tuple[int, float]]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    [found] = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    assert found.info.run_name == run and found.info.status == "FINISHED"
    return [(m.step, m.value) for m in client.get_metric_history(found.info.run_id, "loss")]


def read_tensorboard(uri: str, run: str, experiment: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(f"{uri}/{run}", size_guidance={"scalars": 0})
    events.Reload()
    return [(e.step, e.value) for e in events.Scalars("loss")]


def read_jsonl(uri: str, run: str, experiment: str) -> list[tuple[int, float]]:
    lines = [json.loads(line) for line in Path(uri).read_text(encoding="utf-8").splitlines()]
    assert lines[0]["event"] == "start" and lines[0]["experiment"] == experiment and lines[-1]["event"] == "end"
    return [(line["step"], line["values"]["loss"]) for line in lines
            if line["event"] == "metrics" and line["run"] == run and "loss" in line["values"]]


# Each shipped backend read back with its real reader (the dev extra installs them). A backend written as text
# (a CSV tracker, say) needs none: the values logged must appear in what it wrote, step by step.
READERS = {"mlflow": read_mlflow, "tensorboard": read_tensorboard, "jsonl": read_jsonl}


def read_text(uri: str, run: str, experiment: str) -> list[tuple[int, float]]:
    path = Path(uri)
    text = "".join(p.read_text(encoding="utf-8") for p in sorted(path.rglob("*")) if p.is_file()) \
        if path.is_dir() else path.read_text(encoding="utf-8")
    return [(row["step"], row["loss"]) for row in ROWS if re.search(rf"\b{row['step']}\b.*{row['loss']!r}", text)]


@pytest.mark.parametrize("name", list(TRACKER_BACKENDS))
def test_every_tracker_backend_writes_a_run_that_its_reader_reads_back(name, tmp_path):
    record = TRACKER_BACKENDS[name]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    tracker = build_tracker(TrackingConfig(backend=name), run_dir=run_dir, experiment="contract")
    assert isinstance(tracker, Tracker)
    tracker.start({"optimizer.lr_max": 0.003}, {"lab": "01"})
    for row in ROWS:
        tracker.on_log(row)
    tracker.finish("completed", {"steps": 3, "val_ppl": 2.5}, [])
    tracker.close()
    uri = default_uri(name, run_dir)
    assert str(run_dir.resolve()) in uri  # it writes inside the run folder unless told otherwise
    logged = READERS.get(name, read_text)(uri, "run", "contract")
    assert logged == [(row["step"], row["loss"]) for row in ROWS]
    for module in record.modules:  # what validate checks before a run is what the backend imports
        assert module in sys.modules, f"{name}: {module} is in its record but was not imported"


# ----------------------------------------------------------------------------------------------- callbacks

NOTED: list[int] = []


def note(ctx, **args) -> None:
    """The custom callback's entry point: records the step it was called at."""
    NOTED.append(ctx.step)


def entry_for(name: str) -> dict:
    """A `callbacks:` entry of type `name`, with an entry point if validate says the type needs one."""
    from minitrain.config import ConfigError, config_from_dict

    entry = {"type": name, "interval": 2}
    try:
        config_from_dict({"training": {"total_steps": 10}, "callbacks": [entry]})
    except ConfigError as error:
        assert "needs entry_point" in str(error), str(error)
        entry["entry_point"] = "test_registries:note"
    return entry


@pytest.mark.parametrize("name", list(CALLBACKS))
def test_every_callback_is_built_from_a_config_and_acts_in_a_run(name, tmp_path, monkeypatch):
    from test_run import train_tiny

    import minitrain.training.watchers as from_config
    from minitrain.config import config_from_dict, load_config, resolved_dict

    kind, entry = CALLBACKS[name], entry_for(name)
    config = write_tiny_run(tmp_path)
    config.write_text(config.read_text() + f"callbacks:\n  - {json.dumps(entry)}\n")
    cfg = load_config(config)
    [resolved] = resolved_dict(cfg)["callbacks"]  # the type's trigger and option defaults, from its record
    assert resolved["trigger"] == kind.trigger and resolved.get("config", {}) == kind.options
    assert resolved_dict(config_from_dict(resolved_dict(cfg)))["callbacks"] == [resolved]  # loads again
    built, acted = [], []
    original = from_config.build_callback

    def spying(entry, context):
        callback = original(entry, context)
        act = callback.act
        callback.act = lambda ctx: (acted.append(ctx.step), act(ctx))[1]
        built.append(callback)
        return callback

    monkeypatch.setattr(from_config, "build_callback", spying)
    NOTED.clear()
    train_tiny(config, tmp_path / "run")
    [callback] = built
    assert (callback.trigger, callback.interval) == (kind.trigger, 2)
    assert acted, f"{name} never acted in a 24-step run"
    if "entry_point" in entry:  # the function it names was called, with the loop's context
        assert acted == NOTED


# ----------------------------------------------------------------------------------------------- dashboard charts


@pytest.mark.parametrize("name", list(CHARTS))
def test_every_dashboard_chart_draws_what_is_logged_within_its_width(name, tmp_path):
    """Built from its type alone (its record's defaults), a chart survives a dump and load of the resolved config,
    draws a run with no rows yet, never draws past the width, and draws a new logged row differently."""
    from minitrain.monitor.run_view import RunView

    chart = Chart(type=name)
    assert {k: getattr(chart, k) for k in CHARTS[name].options} == CHARTS[name].options
    settings = DashboardConfig(charts=[chart])
    assert DashboardConfig.model_validate(settings.model_dump(mode="json")) == settings
    (tmp_path / "manifest.json").write_text('{"status": "running", "total_steps": 50}')
    view = RunView(tmp_path)
    draw = load(CHARTS[name].draw)
    view.poll()
    assert draw(chart, view, 30)  # nothing logged yet
    drawn = []
    for step in (0, 10, 20):
        with open(tmp_path / "train_log.jsonl", "a") as f:
            f.write(json.dumps({"step": step, "loss": 4.0 - step / 10, "lr": 1e-3, "grad_norm": 1.0}) + "\n")
        view.poll()
        for width in (30, 80):
            lines = draw(chart, view, width)
            assert lines and all(len(line) <= width for line in lines), (width, lines)
        drawn.append(lines)
    assert drawn[0] != drawn[1] != drawn[2]


# ----------------------------------------------------------------------------------------------- pruning


@pytest.mark.parametrize("structure", list(STRUCTURES))
@pytest.mark.parametrize("method", list(PRUNING_METHODS))
def test_every_pruning_method_and_structure_prune_exactly_the_share_asked(method, structure):
    """round(s · size) zeros in every layer (the share its structure fixes, if it fixes one), exactly where the
    mask says, the same mask from the same model; a method that reads the inputs refuses to run without them."""
    from test_pruning import batches, tiny_model

    fixed = STRUCTURES[structure].sparsity
    for sparsity in [fixed] if fixed is not None else [0.25, 0.6]:
        first, second = tiny_model(), tiny_model()
        paths = prunable_paths(first)[0]
        masks = prune_model(first, method, sparsity, paths, structure, calibration=batches())
        again = prune_model(second, method, sparsity, paths, structure, calibration=batches())
        for path in paths:
            w = first.get_submodule(path).weight.data
            assert int((w == 0).sum()) == round(sparsity * w.size), (path, sparsity)
            assert np.array_equal(w == 0, ~masks[path]) and np.array_equal(masks[path], again[path])
    if PRUNING_METHODS[method].calibrated:
        with pytest.raises(ValueError, match="needs calibration"):
            prune_model(tiny_model(), method, 0.5, paths, structure)


# ----------------------------------------------------------------------------------------------- table formats


def tiny_tables(folder: Path) -> dict[str, tuple[Path, list[dict]]]:
    """{format: (a file of it, the rows it holds)}, written by pyarrow or by hand (tests/data/test_tables.py)."""
    from test_tables import ROWS, write_all_formats

    written = {fmt: (path, ROWS) for fmt, path in write_all_formats(folder).items()}
    (folder / "rows.text").write_text("hola\n\nmundo\n", "utf-8")  # blank lines are no rows
    return {**written, "text": (folder / "rows.text", [{"text": "hola"}, {"text": "mundo"}])}


@pytest.mark.parametrize("name", list(TABLE_FORMATS))
def test_every_table_format_reads_a_tiny_table_given_or_told_by_each_of_its_extensions(name, tmp_path):
    written = tiny_tables(tmp_path / "written")
    assert name in written, f"table format {name}: write its tiny table in tiny_tables"
    path, rows = written[name]
    assert read_table(path, name).to_pylist() == rows
    for extension in TABLE_FORMATS[name].extensions:
        renamed = tmp_path / f"rows{extension}"
        renamed.write_bytes(path.read_bytes())
        assert detect_format(renamed) == name
        assert read_table(renamed).to_pylist() == rows


# ----------------------------------------------------------------------------------------------- quantization


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("granularity", list(GRANULARITIES))
@pytest.mark.parametrize("scheme", list(SCHEMES))
@pytest.mark.parametrize("bits", list(BITS))
def test_every_quantization_scheme_round_trips_within_its_bound(bits, scheme, granularity, method):
    """minitrain/quant/affine.py's bound: a value inside its unit's grid range [(qmin − z)·s, (qmax − z)·s] comes
    back off by at most s/2, one outside it as the range's nearest end (clipped), 0 exactly; with minmax every
    value is off by at most s/2. The codes fit in `bits`; quantize and dequantize agree with fake_quantize."""
    from minitrain.quant import affine

    s = Scheme(bits, scheme, granularity, group_size=8, method=method, percentile=99.0)
    w = np.random.default_rng(bits).standard_t(3, size=(32, 6)).astype(np.float32)  # heavy tails: clipping shows
    w[3] = 0.0
    q = affine.quantize(w, s)
    assert q.codes.dtype == np.uint8 and int(q.codes.max()) <= s.qmax - s.qmin < 2**bits
    restored = affine.dequantize(q, s, w.shape)
    fake, inside = affine.fake_quantize_array(w, s)
    np.testing.assert_array_equal(fake, restored)
    assert (restored[3] == 0).all()
    units, back, keep = s.units(w), s.units(restored), s.units(inside)
    step = np.broadcast_to(q.scale[:, None, :], units.shape)
    lowest = np.broadcast_to(((s.qmin - q.zero_point) * q.scale)[:, None, :], units.shape)
    highest = np.broadcast_to(((s.qmax - q.zero_point) * q.scale)[:, None, :], units.shape)
    assert (np.abs(units - back)[keep] <= step[keep] / 2 * (1 + 1e-5)).all()
    np.testing.assert_allclose(back[~keep], np.where(units < lowest, lowest, highest)[~keep], rtol=1e-6)
    if method == "minmax":  # every value: the zero point's rounding may shift the grid past an extreme by < s/2
        assert (np.abs(units - back) <= step / 2 * (1 + 1e-5)).all()


@pytest.mark.parametrize("bits", list(BITS))
def test_every_bit_width_packs_its_codes_and_holds_every_grid(bits):
    """Every code of `bits` bits packs 8 // bits to a byte and back; each grid's levels are at most 2^bits, a
    symmetric grid's centred on 0, 0 a level of every grid."""
    from minitrain.quant.bit_packing import pack_bits, unpack_bits

    codes = np.arange(2**bits, dtype=np.uint8).repeat(3)
    packed = pack_bits(codes, bits)
    assert packed.size == -(-codes.size * bits // 8)
    np.testing.assert_array_equal(unpack_bits(packed, bits, codes.size), codes)
    for grid in SCHEMES.values():
        qmin, qmax = grid.qmin(bits), grid.qmax(bits)
        assert qmin <= 0 < qmax and qmax - qmin < 2**bits
        assert (qmin == -qmax) == grid.symmetric


@pytest.mark.parametrize("granularity", list(GRANULARITIES))
def test_every_granularity_views_each_value_once_and_refuses_what_it_cannot_cut(granularity):
    """units(W) is a view (G, g, C) of W (in, out) holding each value once, C 1 or out; a grouped granularity needs
    a group_size and one that divides the inputs."""
    record = GRANULARITIES[granularity]
    w = np.arange(12 * 5, dtype=np.float32).reshape(12, 5)
    units = Scheme(granularity=granularity, group_size=4).units(w)
    assert units.ndim == 3 and units.size == w.size and units.shape[2] in (1, 5) and np.shares_memory(units, w)
    assert sorted(units.reshape(-1)) == sorted(w.reshape(-1))
    if record.grouped:
        assert units.shape[1] == 4
        with pytest.raises(ValueError, match="needs group_size"):
            Scheme(granularity=granularity)
        with pytest.raises(ValueError, match="does not divide"):
            Scheme(granularity=granularity, group_size=5).units(w)


@pytest.mark.parametrize("method", list(METHODS))
def test_every_range_method_gives_ranges_holding_zero_inside_the_extremes_and_is_a_qat_observer(method):
    """lo <= 0 <= hi for every unit, inside [min, max] widened to 0 (a method may clip, never widen); QAT's
    observer of the record's name picks it (qat.observer of the quantize: section)."""
    from minitrain.config.finetune_sections import QuantizeConfig
    from minitrain.quant import affine

    s = Scheme(4, "asymmetric", "per_channel", method=method, percentile=99.0)
    w = np.random.default_rng(1).standard_t(3, size=(32, 6)).astype(np.float32)
    w[:, 0] = np.abs(w[:, 0])  # a unit with no negative value: lo is 0
    lo, hi = affine.unit_ranges(s.units(w), s)
    assert lo.shape == hi.shape == (1, 6) and (lo <= 0).all() and (hi >= 0).all() and lo[0, 0] == 0
    assert (lo >= np.minimum(w.min(axis=0), 0)).all() and (hi <= np.maximum(w.max(axis=0), 0)).all()
    config = QuantizeConfig.model_validate({"qat": {"observer": METHODS[method].observer}})
    assert config.scheme_for(training=True).method == method


# ----------------------------------------------------------------------------------------------- record shapes


@pytest.mark.parametrize("name", list(RECORD_SHAPES))
def test_every_record_shape_reads_its_example_and_names_the_line_of_a_broken_one(name, tmp_path):
    """A shape's example, as a JSONL line, is a record of the shape and of its kind, or (kind None) one error line
    naming the file and line; a row lacking the shape's last mark is one error naming the line."""
    from text_fixtures import TinyTokenizer

    from minitrain.common.errors import UserError
    from minitrain.data.text_examples import encode_record
    from minitrain.data.text_records import read_file

    shape, path = RECORD_SHAPES[name], tmp_path / "data.jsonl"
    path.write_text(json.dumps(shape.example, ensure_ascii=False) + "\n", "utf-8")
    if shape.kind is None:
        with pytest.raises(UserError, match=re.escape(f"{path}:1: ") + ".*no preference training yet") as caught:
            read_file(path)
        assert caught.value.exit_code == 2
        return
    [record] = read_file(path)
    assert (record.shape, record.kind) == (name, shape.kind)
    if shape.kind != "text":  # the answer is learned: some tokens count, and not all
        mask = encode_record(record, TinyTokenizer(), "completion").loss_mask
        assert any(mask) and not all(mask[1:])
    path.write_text(json.dumps({k: v for k, v in shape.example.items() if k != shape.marks[-1]}) + "\n", "utf-8")
    with pytest.raises(UserError, match=re.escape(f"{path}:1: ")):
        read_file(path)


# ----------------------------------------------------------------------------------------- GGUF tokenizer models


def gguf_vocab_of(model: str) -> dict:
    """A vocabulary of each `tokenizer.ggml.model`, as formats/gguf_read.py hands its fields over: a new record
    needs one here (a tiny one, or a committed file)."""
    from test_pretrained_tokenizer import tiny_fields

    from minitrain.formats.gguf_read import open_gguf, tokenizer_fields

    spm = Path(__file__).parent / "data" / "spm" / "llama.gguf"
    return {"gpt2": tiny_fields, "llama": lambda: tokenizer_fields(open_gguf(spm), spm)}[model]()


@pytest.mark.parametrize("model", list(GGUF_TOKENIZER_MODELS))
def test_every_gguf_tokenizer_model_keeps_the_files_ids_and_round_trips_text(model):
    """A token's id is its place in tokenizer.ggml.tokens (the embedding's rows mean those ids), control tokens are
    matched whole, and any text decodes back to itself (byte-level BPE or byte fallback: nothing is unknown)."""
    fields = {**gguf_vocab_of(model), "model": model}
    tok = PretrainedTokenizer.from_gguf_fields(**fields)
    assert all(tok.tokenizer.token_to_id(t) == i for i, t in enumerate(fields["tokens"]) if t.strip())
    control = next(i for i, kind in enumerate(fields["token_types"]) if kind == 3)
    assert tok.encode(fields["tokens"][control]) == [control]
    text = "Conjuga «vender»: venderíamos, 1234 🙂\n\tfin"
    assert tok.decode(tok.encode(text)) == text


# ----------------------------------------------------------------------------------------------- sequential layers


@pytest.mark.parametrize("name", list(SEQUENTIAL_LAYERS))
def test_every_sequential_layer_gives_the_shape_and_parameters_it_resolves_to_and_a_gradient(name):
    """The record's example, through the schema and `resolve_layer`, built and run on a batch of 2: the output's
    shape is the resolved one, the parameters are `parameter_shapes`' names and shapes, and a backward reaches each
    parameter (and a float input) with a gradient of its shape. The oracle is the built module itself."""
    record = SEQUENTIAL_LAYERS[name]
    options, shape = record.example
    LayerSpec.model_validate({name: options})  # the schema takes it
    layer, out_shape = resolve_layer(0, {name: options}, shape)
    assert parameter_shapes([layer]) == [(f"layers.0.{n}", s) for n, s in record.parameters(layer[name])]
    module = record.build(layer[name], np.random.default_rng(0), np.float64)
    rng = np.random.default_rng(1)
    x = rng.integers(0, 5, (2, *shape)) if record.reads_ids else Tensor(rng.standard_normal((2, *shape)),
                                                                           requires_grad=True)
    y = module(x)
    assert y.shape == (2, *out_shape)
    named = list(module.named_parameters())
    assert [(f"layers.0.{n}", p.shape) for n, p in named] == parameter_shapes([layer])
    (y * Tensor(rng.standard_normal(y.shape))).sum().backward()
    for n, p in named:
        assert p.grad is not None and p.grad.shape == p.shape, n
    if not record.reads_ids:
        assert x.grad.shape == x.shape and np.abs(x.grad).sum() > 0


# ------------------------------------------------------------------------------------ GGUF tensor types and dtypes

# What each quantized type is, read off ggml's block layouts (not off formats/gguf_quants.py): code bits, whether its
# grid is symmetric about 0 (d·q) or affine (d·q − m), and how many values share one grid. A new record needs a row.
GGML_GRIDS = {"Q8_0": (8, True, 32), "Q5_0": (5, True, 32), "Q5_1": (5, False, 32), "Q4_0": (4, True, 32),
              "Q4_K": (4, False, 32), "Q5_K": (5, False, 32), "Q6_K": (6, True, 16)}


@pytest.mark.parametrize("name", list(TENSOR_TYPES))
def test_every_gguf_tensor_type_is_read_back_by_the_gguf_package_as_its_values_within_a_uniform_grid_s_error(name):
    """`gguf.quants.dequantize` (llama.cpp's project, not minitrain) reads the bytes back to exactly the values the
    encoder says they stand for, in ggml's block size; their RMS error is within 5 % of a uniform grid's,
    spacing/√12, spacing = amax/2^(bits−1) (symmetric) or (max − min)/(2^bits − 1) (affine) per group."""
    import gguf
    from gguf.quants import dequantize

    record, w = TENSOR_TYPES[name], np.random.default_rng(0).standard_normal((4, 512)).astype(np.float32)
    data, values = record.encode(w)
    if name in ("F32", "F16"):
        assert data.dtype == np.dtype(name.lower().replace("f", "float")) and np.array_equal(data, values)
        assert float(np.abs(values - w).max()) <= (0 if name == "F32" else 2**-11 * float(np.abs(w).max()))
        return
    kind = gguf.GGMLQuantizationType[name]
    assert gguf.GGML_QUANT_SIZES[kind][0] == record.block and data.dtype == np.uint8
    assert data.shape == (4, 512 // record.block * gguf.GGML_QUANT_SIZES[kind][1])
    assert np.array_equal(dequantize(data, kind).reshape(w.shape), values)
    bits, symmetric, group = GGML_GRIDS[name]
    g = w.reshape(-1, group)
    spacing = np.abs(g).max(-1) / 2 ** (bits - 1) if symmetric else (g.max(-1) - g.min(-1)) / (2**bits - 1)
    assert np.sqrt(np.mean((values - w) ** 2)) <= 1.05 * np.sqrt(np.mean(spacing**2) / 12)


@pytest.fixture(scope="module")
def tiny_llama_256(tmp_path_factory):
    """A tiny Llama (2 layers) whose rows are 256 long, so every K-quant is written as itself; its matrices
    N(0, 0.05²), about 1/√256, so the activations keep their scale through the layers. (config, state, tokenizer
    fields, ids, the f32 GGUF's logits for them)."""
    from test_hub_pretrained import MINITRAIN, random_hf_state
    from test_pretrained_tokenizer import tiny_fields

    from minitrain.formats.gguf_write import write_gguf_model
    from minitrain.formats.hf_config import from_hf_state

    config = {**MINITRAIN, "d_model": 256, "d_ff": 256, "head_dim": 64, "max_seq_len": 16}
    state = from_hf_state({n: w if w.ndim == 1 else w / 10 for n, w in random_hf_state(config).items()}, config, "")
    fields, ids = {**tiny_fields(), "model": "gpt2"}, np.array([[1, 40, 70, 100, 265, 3, 9, 200]])
    write_gguf_model(path := tmp_path_factory.mktemp("gguf") / "f32.gguf", config, state, fields)
    return config, state, fields, ids, gguf_logits(path, ids)


def gguf_logits(path: Path, ids: np.ndarray) -> np.ndarray:
    from minitrain.hub.text_models import load_text_model
    from minitrain.nn import inference

    with inference(model := load_text_model(str(path)).model):
        return model(ids)[0].data


@pytest.mark.parametrize("dtype", list(GGUF_DTYPES))
def test_every_gguf_dtype_writes_a_file_the_gguf_reader_and_minitrain_read_with_the_model_s_logits(
        dtype, tiny_llama_256, tmp_path):
    """`gguf.GGUFReader` reads the file with the record's file type and every tensor in the type the writer
    reported; minitrain's reader loads it with the float32 model's logits within 2^(2 − bits) of their range, for
    the bits of the dtype's matrices (f32 24, f16 11, q8_0 8, q5_k 5, q4_0 and q4_k_m 4)."""
    import gguf

    from minitrain.formats.gguf_write import write_gguf_model

    config, state, fields, ids, want = tiny_llama_256
    kinds = write_gguf_model(path := tmp_path / f"{dtype}.gguf", config, state, fields, dtype)
    reader = gguf.GGUFReader(path)
    assert reader.fields["general.file_type"].contents() == GGUF_DTYPES[dtype].file_type
    types = [t.tensor_type.name for t in reader.tensors]
    assert {kind: types.count(kind) for kind in set(types)} == kinds
    bits = {"f32": 24, "f16": 11, "q8_0": 8, "q5_k": 5, "q4_0": 4, "q4_k_m": 4}[dtype]
    assert float(np.abs(gguf_logits(path, ids) - want).max()) <= 2.0 ** (2 - bits) * float(want.max() - want.min())
