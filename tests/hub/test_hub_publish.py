"""`publish` against the loopback stand-in Hub, with the real huggingface_hub client."""

from __future__ import annotations

import hashlib
import logging
import types
from pathlib import Path

import pytest
from fakehub import TOKEN, make_run
from huggingface_hub.utils import _http
from test_cli import run as cli_run

from minitrain.common.errors import UserError
from minitrain.config.schema import Config
from minitrain.hub.export_hf import EXPORT_FILES, export_model
from minitrain.hub.upload import maybe_publish_after_training, publish

REPO = "alice/minigpt"


def tree_digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_uploaded_bytes_equal_the_local_export(hub, run, tmp_path, capsys):
    url = publish(run, REPO)
    assert url == f"{hub.url}/{REPO}"
    assert f"Published: {hub.url}/{REPO}" in capsys.readouterr().out
    local = tmp_path / "local"
    export_model(run, local, repo_id=REPO)
    remote = hub.repos[REPO].files
    assert sorted(remote) == sorted(EXPORT_FILES)
    for name in EXPORT_FILES:
        assert remote[name] == (local / name).read_bytes(), name
    assert "model.safetensors" in hub.repos[REPO].lfs_paths  # the weights went through the LFS upload
    assert len(hub.paths_requested("PUT")) == 1
    assert not hub.repos[REPO].private


def test_an_existing_repo_is_reused(hub, tmp_path):
    first, second = make_run(tmp_path / "a", seed=1), make_run(tmp_path / "b", seed=2)
    publish(first, REPO)
    publish(second, REPO)  # create_repo answers 409: the repo is reused, not an error
    assert list(hub.repos) == [REPO]
    assert len(hub.repos[REPO].snapshots) == 2
    assert hub.paths_requested("POST").count("/api/repos/create") == 2
    export_model(second, tmp_path / "local", repo_id=REPO)
    weights = hub.repos[REPO].files["model.safetensors"]
    assert weights == (tmp_path / "local" / "model.safetensors").read_bytes()


def test_private_repo(hub, run):
    publish(run, REPO, private=True)
    assert hub.repos[REPO].private


def test_no_token_fails_before_any_request(hub, run, monkeypatch):
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(UserError, match="no Hugging Face token found; set HF_TOKEN or run `hf auth login`"):
        publish(run, REPO)
    assert hub.requests == []


def test_the_token_file_is_used_when_hf_token_is_unset(hub, run, monkeypatch, tmp_path):
    monkeypatch.delenv("HF_TOKEN")
    (tmp_path / "hf").mkdir(exist_ok=True)
    (tmp_path / "hf" / "token").write_text(TOKEN)  # what `hf auth login` leaves behind
    publish(run, REPO)
    assert sorted(hub.repos[REPO].files) == sorted(EXPORT_FILES)


def test_a_rejected_token_is_a_clear_error_and_uploads_nothing(hub, run, monkeypatch):
    wrong = "hf_wrongTokenAbc123"
    monkeypatch.setenv("HF_TOKEN", wrong)
    before = tree_digest(run.parent)
    with pytest.raises(UserError, match=r"rejected the token \(HTTP 401\)") as err:
        publish(run, REPO)
    assert wrong not in str(err.value) and err.value.exit_code == 5  # a failed Hub request
    assert hub.repos == {} and hub.paths_requested("PUT") == []
    assert tree_digest(run.parent) == before


def test_a_connection_drop_mid_upload_is_a_clear_error(hub, run, monkeypatch):
    sleeps: list[float] = []
    # The client retries a dropped upload 5 times with exponential backoff; record the waits instead of waiting.
    monkeypatch.setattr(_http, "time", types.SimpleNamespace(sleep=sleeps.append, time=_http.time.time,
                                                            monotonic=_http.time.monotonic))
    hub.drop_uploads = True
    before = tree_digest(run.parent)
    with pytest.raises(UserError, match=r"connection to .* failed .*run the command again"):
        publish(run, REPO)
    assert len(hub.paths_requested("PUT")) == 6 and len(sleeps) == 5  # first try + 5 retries
    assert not any(p.endswith("/commit/main") for p in hub.paths_requested("POST"))
    assert hub.repos[REPO].files == {}  # nothing was committed
    assert tree_digest(run.parent) == before

    hub.drop_uploads = False  # the line is back: running the command again completes the upload
    publish(run, REPO)
    assert sorted(hub.repos[REPO].files) == sorted(EXPORT_FILES)


def test_dry_run_lists_the_files_and_sends_nothing(hub, run, monkeypatch, capsys):
    monkeypatch.delenv("HF_TOKEN")  # a dry run needs no token
    url = publish(run, REPO, dry_run=True)
    out = capsys.readouterr().out
    assert url == f"{hub.url}/{REPO}" and "Dry run: would upload" in out
    for name in EXPORT_FILES:
        assert f"  {name}  (" in out
    assert hub.requests == []


def test_the_token_never_reaches_a_file_or_the_output(hub, run, tmp_path, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    publish(run, REPO)
    export_model(run, tmp_path / "local", repo_id=REPO)
    captured = capsys.readouterr()
    texts = [captured.out, captured.err, caplog.text]
    texts += [p.read_bytes().decode("utf-8", "replace") for p in tmp_path.rglob("*") if p.is_file()]
    texts += [data.decode("utf-8", "replace") for data in hub.repos[REPO].files.values()]
    assert all(TOKEN not in text for text in texts)
    assert len(texts) > 3 + len(EXPORT_FILES)  # the scan did read the run, the cache and the uploads


@pytest.mark.parametrize("repo", ["minigpt", "alice/mini gpt", "alice/minigpt/extra", "../x", "u/" + "a" * 120,
                                  "a/b--c", "a/b.git", "a/-b"])
@pytest.mark.parametrize("dry_run", [False, True])
def test_a_malformed_repo_id_is_refused(hub, run, repo, dry_run):
    with pytest.raises(UserError, match="is not a Hub repo id") as err:
        publish(run, repo, dry_run=dry_run)  # a dry run refuses what the upload would
    assert err.value.exit_code == 2 and hub.requests == []


def test_a_bare_model_file_publishes_with_its_vocab(hub, run, capsys):
    model_file = run.parent / "models" / "minigpt-test.safetensors"  # records no vocabulary: --vocab gives it
    code, _, err = cli_run(["publish", "--repo", REPO, model_file, "--dry-run"], capsys)
    assert code == 2 and "pass it with --vocab" in err
    code, out, err = cli_run(["publish", "--repo", REPO, model_file, "--vocab", run.parent / "data" / "vocab.json"],
                             capsys)
    assert code == 0 and f"Published: {hub.url}/{REPO}" in out, err
    assert sorted(hub.repos[REPO].files) == sorted(EXPORT_FILES)


@pytest.mark.parametrize(("status", "published"), [("completed", True), ("early_stopped", True),
                                                    ("diverged", False), ("interrupted", False)])
def test_the_publish_section_runs_only_after_a_successful_run(hub, run, status, published):
    cfg = Config(publish={"repo": REPO})
    result = maybe_publish_after_training(cfg, run, status)
    assert (result is not None) == published
    assert (REPO in hub.repos) == published


def test_a_publish_section_with_model_card_false_uploads_no_card_and_says_so(hub, run, capsys):
    with_card = maybe_publish_after_training(Config(publish={"repo": REPO}), run, "completed")
    cfg = Config(publish={"repo": "alice/no-card", "model_card": False})
    assert maybe_publish_after_training(cfg, run, "completed") and with_card
    out = capsys.readouterr().out
    assert "Publishing to alice/no-card (publish: section of the config; no model card: publish.model_card is " \
        "false)" in out and "Model card: not written" in out
    assert "README.md" in hub.repos[REPO].files and "README.md" not in hub.repos["alice/no-card"].files
    assert set(hub.repos[REPO].files) - set(hub.repos["alice/no-card"].files) == {"README.md"}


def test_no_publish_section_means_no_publishing(hub, run):
    assert maybe_publish_after_training(Config(), run, "completed") is None
    assert hub.requests == []


def test_tests_cannot_reach_the_internet(hub):
    import socket

    with pytest.raises(ConnectionRefusedError, match="must not touch the internet"):
        socket.create_connection(("192.0.2.1", 443), timeout=1)  # TEST-NET-1: never routed
    assert hub.url.startswith("http://127.0.0.1:")


@pytest.mark.parametrize("quiet", [True, False])
def test_quiet_silences_the_upload_progress_bars(hub, run, monkeypatch, quiet):
    from huggingface_hub import HfApi
    from huggingface_hub.utils import are_progress_bars_disabled

    seen = []
    upload = HfApi.upload_folder

    def watched(self, *args, **kwargs):
        seen.append(are_progress_bars_disabled())
        return upload(self, *args, **kwargs)

    monkeypatch.setattr(HfApi, "upload_folder", watched)
    maybe_publish_after_training(Config(publish={"repo": REPO}), run, "completed", quiet=quiet)
    assert seen == [quiet] and REPO in hub.repos
    assert not are_progress_bars_disabled()  # as it was before
