"""Hub ids, generated rather than listed, through every place that takes one.

Ids are drawn as valid ones (the rule of minitrain/common/hub_id.py) and then damaged: a revision (`@main`), a
split (`:train`), a query, a space, a climbing path (`../`, `%2e%2e`), `--`, `.git`, a non-ASCII letter, a control
character, a part over 96 characters, a third part, or plain random text. Two properties:

    whatever minitrain accepts as a Hub id, huggingface_hub's `validate_repo_id` accepts too;
    every entry point (publish.repo and model.init_from in a config, `sample`, `init --base`, `eval`, `export`,
    `publish --repo` with and without --dry-run, data.source hf://) exits with a documented code and one
    `error:` line, never a traceback; an id minitrain refuses is exit 2 with no request sent to the Hub, and a
    valid id that names no repo on the (loopback stand-in) Hub is exit 5, a failed Hub request.

`make test` runs a fixed number of examples from a fixed seed; MINITRAIN_DAMAGE_EXAMPLES runs more (`make fuzz`),
like tests/training/test_damage.py.
"""

from __future__ import annotations

import os

import pytest
import yaml
from fakehub import TINY_MODEL, make_run
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_cli import run
from test_damage import STATS, count

from minitrain.common.errors import UserError
from minitrain.common.hub_id import HUB_ID, is_hub_id
from minitrain.data.locate import download_dataset

EXAMPLES = int(os.environ.get("MINITRAIN_DAMAGE_EXAMPLES", "12"))
FUZZ = "MINITRAIN_DAMAGE_EXAMPLES" in os.environ
EXIT_CODES = {0, 1, 2, 3, 4, 5, 130, 143}

DAMAGES = ["@main", ":train", "?x=1", " ", "/../x", "/%2e%2e", "--", ".git", "..", "é", "\n", "\x00", "/c", "#", "\\"]


@st.composite
def hub_ids(draw) -> str:
    """A valid id, or one damaged in one of the ways that escaped before (module docstring), or random text."""
    valid = draw(st.from_regex(HUB_ID, fullmatch=True))
    kind = draw(st.sampled_from(["valid", "insert", "long", "text"]))
    if kind == "valid":
        return valid
    if kind == "long":  # a part over 96 characters (the client's limit)
        return valid.split("/")[0] + "/" + "a" * draw(st.integers(95, 130))
    if kind == "text":
        return draw(st.text(min_size=1, max_size=40))
    at = draw(st.integers(0, len(valid)))
    return valid[:at] + draw(st.sampled_from(DAMAGES)) + valid[at:]


def dataset_url_valid(text: str) -> bool:
    """Whether hf://datasets/TEXT names a dataset: its first two parts a valid id, the rest a path inside it with no
    empty, '.' or '..' part (so '0/0/%2e%2e' is the file '%2e%2e' of the repo 0/0: a request, not a refusal)."""
    parts = f"datasets/{text}".strip("/").split("/")[1:]
    return (len(parts) >= 2 and is_hub_id("/".join(parts[:2]))
            and all(part not in ("", ".", "..") for part in parts[2:]))


def client_accepts(repo_id: str) -> bool:
    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        return False
    return True


@settings(max_examples=20 * EXAMPLES, derandomize=not FUZZ, deadline=None, database=None)
@given(repo_id=hub_ids())
def test_what_minitrain_accepts_the_client_accepts(repo_id):
    count("hub ids vs the client")
    if is_hub_id(repo_id):
        assert client_accepts(repo_id), repo_id


@pytest.mark.parametrize("repo_id", ["a/b@main", "a/b:train", "a/b?x=1", "a/b c", "a/../x", "a/%2e%2e",
                                     "u/" + "a" * 97, "a/b--c", "a/b.git", "datasets/a/b"])
def test_the_ids_that_escaped_are_refused(repo_id):
    assert not is_hub_id(repo_id)


def config_text(tmp_path, **section) -> str:
    """A config for the stand-in run's data, with `section` ({"publish": {...}} or {"model": {...}}) merged in."""
    data = tmp_path / "work" / "data"
    config = {"model": dict(TINY_MODEL), "training": {"total_steps": 2, "batch_size": 2},
              "data": {"train_path": str(data / "train.jsonl"), "val_path": str(data / "val.jsonl"),
                       "vocab_path": str(data / "vocab.json"), "heldout_policy": "none"}}
    for key, value in section.items():
        config[key] = {**config.get(key, {}), **value}
    return yaml.safe_dump(config, allow_unicode=True)


def check(argv, capsys, hub, valid: bool, expected_ok: int | None = None) -> int:
    """Run one command in-process: a documented exit code, one error line (or none), no traceback; an id
    minitrain refuses is exit 2 with nothing sent to the Hub."""
    hub.requests.clear()
    code, _, err = run(argv, capsys)
    context = f"{argv}: {code} {err[-400:]}"
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code in EXIT_CODES and "Traceback" not in err, context
    assert len(errors) == (0 if code == 0 else 1), context
    if not valid:
        assert code == 2 and hub.requests == [], context
    elif expected_ok is not None:
        assert code == expected_ok, context
    STATS["commands"] += 1
    return code


@settings(max_examples=EXAMPLES, derandomize=not FUZZ, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(repo_id=hub_ids())
@example(repo_id="0/0/%2e%2e")  # found by `make fuzz`: a bad id, but as hf://datasets/... a file of the repo 0/0
def test_every_entry_point_refuses_a_bad_id_before_any_request(repo_id, hub, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    count("hub ids at every entry point")
    hub.repos.clear()  # the examples share one stand-in Hub: an id an earlier one published must not exist here
    folder = tmp_path / "work" / "run"
    if not folder.exists():
        make_run(tmp_path / "work")
    valid = is_hub_id(repo_id) and not os.path.lexists(repo_id)
    publish_config = tmp_path / "publish.yaml"
    publish_config.write_text(config_text(tmp_path, publish={"repo": repo_id}), encoding="utf-8")
    # A config key: publish.repo is checked by the schema (a YAML that cannot hold the text is exit 2 too)
    check(["validate", publish_config, "--no-data"], capsys, hub, valid, expected_ok=0)
    init_config = tmp_path / "init.yaml"
    init_config.write_text(config_text(tmp_path, model={"init_from": repo_id}), encoding="utf-8")
    # model.init_from and the commands that download: a valid id names no repo on the stand-in Hub (exit 5)
    validated = check(["validate", init_config], capsys, hub, valid)
    assert not valid or (validated != 0 and hub.requests), (repo_id, validated)
    # (`--` and `--flag=ID`: an id that starts with '-' is the id, not an option)
    for argv in (["sample", "--prompt", "comer|", "--", repo_id], ["init", f"--base={repo_id}", "--data", "work/data"],
                 ["eval", "--data", "work/data/val.jsonl", "--", repo_id]):
        check(argv, capsys, hub, valid, expected_ok=5)
    check(["export", "--", repo_id, tmp_path / "export"], capsys, hub, valid)
    check(["publish", f"--repo={repo_id}", folder, "--dry-run"], capsys, hub, valid, expected_ok=0)
    check(["publish", f"--repo={repo_id}", folder], capsys, hub, valid, expected_ok=0)
    try:
        download_dataset(f"hf://datasets/{repo_id}")
    except UserError as error:
        assert error.exit_code == (5 if dataset_url_valid(repo_id) else 2), (repo_id, error)
    else:
        pytest.fail(f"hf://datasets/{repo_id}: the stand-in Hub has no such dataset")
