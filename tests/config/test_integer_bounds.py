"""Every integer key of the config (a step count, a size, an index) is bounded (issue 43): a huge value is one
`error:` line naming the key, exit 2, from `validate` and from `train --dry-run`, never an OverflowError in the plan.

The keys are read from the schema itself (every int field of every section), so a key added later is covered.
"""

from __future__ import annotations

import contextlib
import os
import types
import typing

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from test_config_data import config_for, make_corpus
from test_damage import count, run_cli

from minitrain.config.schema import Config

EXAMPLES = int(os.environ.get("MINITRAIN_DAMAGE_EXAMPLES", "25"))
SETTINGS = settings(max_examples=EXAMPLES, derandomize="MINITRAIN_DAMAGE_EXAMPLES" not in os.environ, deadline=None,
                    database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _members(annotation) -> typing.Iterator:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for member in typing.get_args(annotation):
            yield from _members(member)
    elif typing.get_origin(annotation) is typing.Annotated:
        yield from _members(typing.get_args(annotation)[0])
    else:
        yield annotation


def integer_keys(model: type[BaseModel], prefix: str = "") -> typing.Iterator[str]:
    """The dotted keys of `model`'s int fields, nested sections included (seeds excepted: any int64 is a seed)."""
    for name, field in model.model_fields.items():
        for member in _members(field.annotation):
            if member is int and "seed" not in name:
                yield prefix + name
            elif isinstance(member, type) and issubclass(member, BaseModel):
                yield from integer_keys(member, f"{prefix}{name}.")


KEYS = sorted(set(integer_keys(Config)))


def test_the_walk_finds_the_keys_of_the_issue():
    assert {"scheduler.total_steps", "training.total_steps", "training.batch_size", "model.max_seq_len",
            "pruning.end_step", "runtime.data_parallel.workers"} <= set(KEYS)


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    return config_for(make_corpus(tmp_path_factory.mktemp("bounds")))


@SETTINGS
@given(key=st.sampled_from(KEYS), value=st.integers(min_value=2**31, max_value=10**30 - 1),  # 31 digits: not YAML
       command=st.sampled_from([["validate"], ["train", "--dry-run"]]))
def test_a_huge_integer_is_one_error_line_naming_its_key(config, key, value, command):
    count("huge integer keys")
    with contextlib.chdir(config.parent):
        code, _, err = run_cli([command[0], str(config), *command[1:], "--set", f"{key}={value}"])
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, err
    assert f" {key}" in err and "must be less than or equal to 2147483647" in err, err  # a union names its branch


def test_the_issue_case_is_refused_before_the_plan(config):
    code, _, err = run_cli(["train", str(config), "--dry-run", "--set", "training.total_steps=9223372036854775808"])
    assert code == 2 and "training.total_steps: must be less than or equal to 2147483647" in err, err
