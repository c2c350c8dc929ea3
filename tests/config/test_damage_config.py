"""Generated damage for the config's switches and the lock command (issue 26): every section that has an `enabled`
switch, given or not, with or without `enabled`, and every kind of `lock -o` target.

Like tests/training/test_damage.py: `make test` runs a fixed number of examples from a fixed seed (hypothesis'
derandomize); MINITRAIN_DAMAGE_EXAMPLES runs that many, from random seeds. Each command runs in-process under a
hang guard.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_config_data import config_for, make_corpus
from test_damage import count, run_cli

from minitrain.config import ConfigError, config_from_dict
from minitrain.config.spec_shape import SWITCHED_SECTIONS

EXAMPLES = int(os.environ.get("MINITRAIN_DAMAGE_EXAMPLES", "25"))
FUZZ = "MINITRAIN_DAMAGE_EXAMPLES" in os.environ
SETTINGS = settings(max_examples=EXAMPLES, derandomize=not FUZZ, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

# A few valid keys of each switched section, so a section given without `enabled` is more than `{}`.
KEYS = {("lora",): {"rank": 4, "alpha": 8.0, "dropout": 0.0},
        ("quantize",): {"bits": 4, "scheme": "asymmetric"},
        ("quantize", "qat"): {"observer": "histogram"},
        ("pruning",): {"sparsity": 0.3, "every": 2},
        ("distillation",): {"teacher": "user/teacher", "temperature": 2.0},
        ("training", "early_stopping"): {"patience": 2, "min_delta": 0.01},
        ("monitoring", "tracking"): {"backend": "jsonl"},
        ("monitoring", "system"): {"interval": 500},
        ("training", "mixed_precision"): {"dtype": "bfloat16"}}
FORMS = ["absent", "no enabled", "enabled true", "enabled false", "enabled not a bool"]


def is_on(cfg, path: tuple) -> bool:
    """Whether the loaded config has the section at `path` switched on."""
    if path == ("training", "early_stopping"):
        return cfg.training.early_stopping is not None
    if path[0] == "monitoring":
        section = getattr(cfg.monitoring, path[1])
        return section is not None and section.enabled
    section = cfg
    for part in path:
        section = getattr(section, part)
    return section.enabled


@SETTINGS
@given(forms=st.fixed_dictionaries({path: st.sampled_from(FORMS) for path in SWITCHED_SECTIONS}),
       keys=st.fixed_dictionaries({path: st.booleans() for path in SWITCHED_SECTIONS}))
def test_a_switched_section_is_on_exactly_when_present_without_enabled_false(forms, keys):
    count("switched sections")
    data = {"training": {"total_steps": 10}, "model": {"init_from": "user/base"}}
    for path, form in sorted(forms.items(), key=lambda item: len(item[0])):  # quantize before quantize.qat
        if form == "absent":
            continue
        node = data
        for part in path[:-1]:
            node = node.setdefault(part, {})
        section = node.setdefault(path[-1], {})
        section.update(KEYS[path] if keys[path] else {})
        if form != "no enabled":
            section["enabled"] = {"enabled true": True, "enabled false": False}.get(form, "yes")
    try:
        cfg = config_from_dict(data)
    except ConfigError as exc:  # refusals (QAT without quantize, mixed precision on a CPU...) name their key
        assert all(p.path for p in exc.problems) and str(exc).count("\n") == len(exc.problems)
        if any(form == "enabled not a bool" for form in forms.values()):
            return
        refused = {("training", "mixed_precision"), ("quantize", "qat"), ("quantize",), ("lora",), ("pruning",),
                   ("distillation",)}  # a distillation section on without a teacher, say
        assert any(p.path[: len(s)] == s for p in exc.problems for s in refused), exc
        return
    for path, form in forms.items():
        if path == ("training", "mixed_precision"):
            assert form in ("absent", "enabled false")  # on is refused: there is no half precision on a CPU
            continue
        if path == ("quantize",) and form == "absent" and forms[("quantize", "qat")] != "absent":
            form = "no enabled"  # a qat: section gives quantize: a section, present without `enabled`
        parent_off = path == ("quantize", "qat") and forms[("quantize",)] == "enabled false"
        expected = form in ("no enabled", "enabled true") and not parent_off
        assert is_on(cfg, path) == expected, (path, form, data)


# --- lock -o --------------------------------------------------------------------------------------------------

TARGET_KINDS = ["the config", "a link to the config", "a hard link to the config", "a text file", "a binary file",
                "an empty file", "an earlier lock", "a folder", "stdout", "a new file", "a file in a missing folder",
                "a path through a file"]


def make_target(kind: str, folder: Path, config: Path, junk: bytes, name: str = "out.yaml") -> Path | str:
    """The `-o` argument of one kind, made in `folder` (tests/commands/test_output_rule.py's too, named `name`)."""
    target = folder / name
    if kind == "the config":
        return config
    if kind == "a link to the config":
        target.symlink_to(config)
    elif kind == "a hard link to the config":
        os.link(config, target)
    elif kind in ("a text file", "a binary file"):
        target.write_bytes(junk if kind == "a binary file" else b"# my notes\n" + junk.hex().encode())
    elif kind == "an empty file":
        target.write_bytes(b"")
    elif kind == "an earlier lock":
        target.write_text("minitrain_lock: 1\nconfig: {}\ndata: {}\nversions: {}\n", encoding="utf-8")
    elif kind == "a folder":
        target.mkdir()
    elif kind == "stdout":
        return "-"
    elif kind == "a file in a missing folder":
        return folder / "missing" / "out.yaml"
    elif kind == "a path through a file":
        (folder / "plain").write_text("x", encoding="utf-8")
        return folder / "plain" / "out.yaml"
    return target


@pytest.fixture(scope="module")
def config_text(tmp_path_factory) -> str:
    """A valid config of a tiny corpus (the corpus stays where it was made; each example copies the config)."""
    return config_for(make_corpus(tmp_path_factory.mktemp("lock-corpus"))).read_text(encoding="utf-8")


@SETTINGS
@given(kind=st.sampled_from(TARGET_KINDS), force=st.booleans(), junk=st.binary(min_size=1, max_size=64))
def test_lock_never_loses_a_file_it_was_not_asked_to_replace(config_text, tmp_path_factory, kind, force, junk):
    count("lock -o targets")
    folder = tmp_path_factory.mktemp("lock")
    config = folder / "c.yaml"
    config.write_text(config_text, encoding="utf-8")
    before = config.read_bytes()
    target = make_target(kind, folder, config, junk)
    held = Path(target).read_bytes() if target != "-" and Path(target).is_file() else None
    with contextlib.chdir(folder):
        code, out, err = run_cli(["lock", str(config), "-o", str(target), *(["--force"] * force)])
    context = f"{kind} (force {force}): minitrain lock -> {code}\n{err}"
    assert code in (0, 2) and "Traceback" not in err, context
    assert len([line for line in err.splitlines() if line.startswith("error:")]) == (code != 0), context
    assert config.read_bytes() == before, context  # the config locked is never written
    assert not (folder / "-").exists(), context
    if kind == "stdout":
        assert code == 0 and yaml.safe_load(out)["minitrain_lock"] == 1, context
        return
    assert out == "", context  # stdout holds a lock or nothing
    replaceable = force or kind in ("an empty file", "an earlier lock", "a new file", "a file in a missing folder")
    if kind in ("a text file", "a binary file") and not force:
        assert code == 2 and Path(target).read_bytes() == held, context
    if code == 0:
        assert replaceable and yaml.safe_load(Path(target).read_text(encoding="utf-8"))["minitrain_lock"] == 1

