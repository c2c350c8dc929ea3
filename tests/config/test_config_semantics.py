"""Config semantics and the lock command (issue 26): where a lock may be written, sections switched on by their
presence, `seed: null`, the spec manifest's required fields and defaults, templates and tokens in values."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml
from test_config_data import config_for, make_corpus

from minitrain import cli

ROOT = Path(__file__).parents[2]


def run(argv, capsys) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# --- lock -o ------------------------------------------------------------------------------------------------------


def test_lock_refuses_to_write_over_its_own_config(tmp_path, capsys):
    path = config_for(make_corpus(tmp_path / "d"))
    before = path.read_bytes()
    for target in (path, path.parent / "link.yaml"):
        if target != path:
            target.symlink_to(path.name)
        for force in ([], ["--force"]):
            code, _, err = run(["lock", path, "-o", target, *force], capsys)
            assert code == 2 and "is (or holds) the input" in err and err.startswith("error: ")
    assert path.read_bytes() == before


def test_lock_replaces_another_file_only_with_force(tmp_path, capsys):
    path = config_for(make_corpus(tmp_path / "d"))
    other = tmp_path / "notes.txt"
    other.write_text("my notes\n", encoding="utf-8")
    code, _, err = run(["lock", path, "-o", other], capsys)
    assert code == 2 and f"lock -o {other}: exists and is not a file this command wrote; pass --force" in err
    assert other.read_text(encoding="utf-8") == "my notes\n"
    assert run(["lock", path, "-o", other, "--force"], capsys)[0] == 0
    assert "minitrain_lock" in yaml.safe_load(other.read_text(encoding="utf-8"))
    assert run(["lock", path, "-o", other], capsys)[0] == 0  # now an earlier lock: re-locking refreshes it


def test_lock_refuses_a_path_through_a_file_before_any_work(tmp_path, capsys):
    path = config_for(make_corpus(tmp_path / "d"))
    (tmp_path / "plain").write_text("x", encoding="utf-8")
    code, _, err = run(["lock", path, "-o", tmp_path / "plain" / "c.lock.yaml"], capsys)
    assert code == 2 and f"{tmp_path / 'plain'} exists and is not a folder" in err  # was exit 1, found by the fuzz


def test_lock_dash_prints_only_the_lock(tmp_path, capsys):
    path = config_for(make_corpus(tmp_path / "d"))
    code, out, err = run(["lock", path, "-o", "-"], capsys)
    assert code == 0 and err == ""
    assert yaml.safe_load(out)["minitrain_lock"] == 1
    assert not (Path.cwd() / "-").exists() and not (path.parent / "c.lock.yaml").exists()


def test_lock_redirected_as_the_spec_writes_it(tmp_path):
    # The spec's §15.2: `entrenar lock config.yaml > config.lock.yaml`; the shell makes the file empty first.
    path = config_for(make_corpus(tmp_path / "d"))
    lock_file = path.parent / "c.lock.yaml"
    with lock_file.open("w", encoding="utf-8") as stdout:
        done = subprocess.run([sys.executable, "-m", "minitrain.cli", "lock", str(path)], stdout=stdout,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    text = lock_file.read_text(encoding="utf-8")
    assert "wrote" not in text and yaml.safe_load(text)["minitrain_lock"] == 1
    assert f"wrote {lock_file}" in done.stderr


# --- sections switched on by their presence ---------------------------------------------------------------------

BASE = {"training": {"total_steps": 10}, "model": {"init_from": "user/base"}}


def test_a_section_given_without_enabled_is_on():
    from minitrain.config import config_from_dict

    lora = config_from_dict({**BASE, "lora": {"rank": 4, "alpha": 8}}).lora  # the publish spec's §3.3 example
    assert lora.enabled and (lora.rank, lora.alpha) == (4, 8.0)
    quantize = config_from_dict({"training": {"total_steps": 10}, "quantize": {"bits": 4}}).quantize
    assert quantize.enabled and quantize.bits == 4 and not quantize.qat.enabled
    qat = config_from_dict({"training": {"total_steps": 10}, "quantize": {"qat": {"observer": "histogram"}}}).quantize
    assert qat.enabled and qat.qat.enabled
    stop = config_from_dict({"training": {"total_steps": 10, "early_stopping": {"patience": 2}}}).training
    assert stop.early_stopping is not None and stop.early_stopping.patience == 2


def test_enabled_false_turns_a_present_section_off():
    from minitrain.config import config_from_dict

    cfg = config_from_dict({**BASE, "lora": {"enabled": False, "rank": 4}, "quantize": {"enabled": False},
                            "training": {"total_steps": 10, "early_stopping": {"enabled": False}}})
    assert not cfg.lora.enabled and not cfg.quantize.enabled and cfg.training.early_stopping is None


def test_a_present_lora_section_without_a_base_says_why_it_is_on(tmp_path, capsys):
    path = config_for(make_corpus(tmp_path / "d"), "lora: {rank: 4, alpha: 8}\n")
    code, _, err = run(["validate", path, "--no-data"], capsys)
    assert code == 2 and "lora.enabled: LoRA adapts a trained model" in err
    assert "a lora: section is on unless it says enabled: false" in err


def test_calibration_method_under_qat_is_said_to_have_no_effect(tmp_path, capsys):
    body = "quantize: {bits: 4, qat: {observer: minmax}, calibration: {method: percentile}}\n"
    path = config_for(make_corpus(tmp_path / "d"), body)
    code, out, err = run(["validate", path, "--no-data"], capsys)
    assert code == 0 and "config is valid." in out
    assert "warning: quantize.calibration.method: 'percentile' has no effect: after QAT" in err
    code, _, err = run(["validate", path, "--no-data", "--set", "quantize.calibration.method=minmax"], capsys)
    assert code == 0 and "warning" not in err  # the default: nothing to say, so a resolved config loads quietly


# --- seed: null -------------------------------------------------------------------------------------------------


def test_seed_null_draws_a_seed_records_it_and_says_how_to_repeat_it(tmp_path, capsys):
    from minitrain.config import load_config, resolved_dict

    path = config_for(make_corpus(tmp_path / "d"), "seed: null\n")
    drawn = [load_config(path) for _ in range(3)]
    seeds = {cfg.training.rng_seed for cfg in drawn}
    assert len(seeds) > 1 or seeds != {42}  # 42 every time was the bug; three equal draws of 2**31 do not happen
    for cfg in drawn:
        seed = cfg.training.rng_seed
        assert cfg.training.data_seed == seed + 1 and resolved_dict(cfg)["training"]["rng_seed"] == seed
        assert any(f"--seed {seed} repeats this run" in w for w in cfg.source.warnings)
    code, out, err = run(["lock", path, "-o", "-"], capsys)
    locked = yaml.safe_load(out)["config"]["training"]["rng_seed"]
    assert code == 0 and f"warning: seed: null: drew seed {locked} " in err
    assert load_config(path, values={"training.rng_seed": locked}).training.rng_seed == locked  # --seed repeats it


# --- spec manifests: required fields, LoRA's architecture, Appendix A defaults ------------------------------------


def spec_problems(data: dict) -> list[str]:
    from minitrain.config import ConfigError, config_from_dict

    try:
        config_from_dict(data)
    except ConfigError as exc:
        return [p.message for p in exc.problems]
    return []


def test_a_spec_manifest_needs_name_and_version():
    found = spec_problems({"entrenar": "1.0", "training": {"total_steps": 5}})
    assert [m for m in found if "required in a spec manifest" in m] == [
        "required in a spec manifest (entrenar: ...): give the experiment's name",
        "required in a spec manifest (entrenar: ...): give the experiment's version"]
    assert spec_problems({"training": {"total_steps": 5}}) == []  # minitrain's own shape: name has a default


def test_a_spec_manifests_lora_needs_the_architecture():
    head = {"entrenar": "1.0", "name": "x", "version": "1", "lora": {"rank": 4}}
    assert any("LoRA needs model.architecture" in m for m in spec_problems({**head, "model": {"init_from": "u/b"}}))
    shaped = {"init_from": "u/b", "architecture": {"hidden_size": 64, "num_layers": 2, "num_heads": 4}}
    assert spec_problems({**head, "model": shaped}) == []


def test_a_spec_manifest_gets_appendix_a_defaults_and_a_minitrain_config_keeps_its_own():
    from minitrain.config import config_from_dict

    training = config_from_dict({"entrenar": "1.0", "name": "x", "version": "1"}).training
    assert (training.batch_size, training.drop_last, training.epochs) == (32, False, 10)
    assert (training.checkpoint.save_every, training.checkpoint.save_best) == (1000, True)
    given = config_from_dict({"entrenar": "1.0", "name": "x", "version": "1", "training": {"max_steps": 5},
                              "data": {"loader": {"batch_size": 4}}}).training
    assert (given.batch_size, given.total_steps, given.epochs) == (4, 5, None)
    kept = config_from_dict({"entrenar": "1.0", "name": "x", "version": "1",
                             "training": {"checkpoint": {"save_every": None}}}).training.checkpoint
    assert kept.save_every is None  # null is a value here (only the last checkpoint), not "left out"
    lab = config_from_dict({"training": {"total_steps": 5}}).training
    assert (lab.batch_size, lab.drop_last, lab.checkpoint.save_every, lab.checkpoint.save_best) == (8, True, 500, False)


# --- templates and tokens ---------------------------------------------------------------------------------------

HF_LIKE = "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ012345678"  # the shape of a Hugging Face token, not a real one


def test_a_yaml_flow_value_in_set_is_not_a_template():
    from minitrain.config import config_from_dict

    cfg = config_from_dict({"training": {"total_steps": 5}}, ["data.augmentation=[{random_swap: {probability: 0.1}}]"])
    assert "random_swap" in str(cfg.data.augmentation) and "0.1" in str(cfg.data.augmentation)
    cfg = config_from_dict({"training": {"total_steps": 5}}, ["name=run-{{ env.WHO }}"], env={"WHO": "ana"})
    assert cfg.name == "run-ana"  # a template on the command line is still one


def test_a_token_is_refused_whatever_the_variable_is_called_and_never_echoed(tmp_path, capsys):
    from minitrain.config import ConfigError, config_from_dict

    for name in ("HF_AUTH", "HF_PAT", "MY_THING"):
        try:
            config_from_dict({"training": {"total_steps": 5}, "name": f"{{{{ env.{name} }}}}"}, env={name: HF_LIKE})
        except ConfigError as exc:
            assert f"env.{name} holds what looks like an access token (hf_…(masked))" in str(exc)
            assert HF_LIKE not in str(exc) and HF_LIKE[3:] not in str(exc)
        else:
            raise AssertionError(f"env.{name} holding a token was accepted")
    pasted = config_for(make_corpus(tmp_path / "d"), f"description: {HF_LIKE}\n")
    clean = config_for(tmp_path / "d", name="ok.yaml")
    for argv, echoed in ((["validate", pasted], False), (["validate", clean, "--set", f"version={HF_LIKE}"], True),
                         (["train", clean, "--set", f"training.batch_size={HF_LIKE}"], True)):
        code, out, err = run(argv, capsys)
        assert code == 2 and "looks like an access token" in err
        assert HF_LIKE[3:] not in out + err  # the --set flag is named, with the token masked
        assert (f"={HF_LIKE[:3]}…(masked)" in err) == echoed


def test_init_dash_prints_the_config_instead_of_writing_a_file_named_dash(tmp_path, capsys, monkeypatch):
    folder = make_corpus(tmp_path / "d")
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(["init", "--data", folder, "-o", "-"], capsys)
    assert code == 0 and "model:" in out and not (tmp_path / "-").exists()


def test_the_committed_spec_shaped_run_resolves_to_its_committed_config():
    # experiments/digits-mlp is a spec manifest trained with minitrain's defaults, which its config now states:
    # the spec's Appendix A defaults must not change what it resolves to (and so its results).
    from minitrain.config import load_config, resolved_dict

    experiment = ROOT / "experiments" / "digits-mlp"
    committed = yaml.safe_load((experiment / "config.resolved.yaml").read_text(encoding="utf-8"))
    now = resolved_dict(load_config(experiment / "config.yaml"))
    assert now["training"] == committed["training"] and now["data"] == committed["data"]
