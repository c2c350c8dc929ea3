"""`minitrain publish`: export a run and upload it to a Hugging Face Hub model repo.

    1. find the token the way huggingface_hub does (HF_TOKEN, then the token file of `hf auth login`);
       no token -> one clear error, before anything is exported or sent
    2. export the run into a temporary folder (minitrain/hub/export_hf.py): a LoRA run's adapter in PEFT's layout,
       or with --merge-adapters the base with the adapters merged in
    3. create_repo(exist_ok=True): a new repo, or the existing one reused
    4. upload_folder: one commit with every file of the export
    5. print the repo URL

The endpoint is the client's: `HF_ENDPOINT` points it elsewhere (a private Hub, or the tests' stand-in).
minitrain never reads, prints or writes the token itself; it only checks that the client has one.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2  # huggingface_hub's HTTP library: its errors are what a failed request raises
from huggingface_hub import HfApi, get_token
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

from minitrain.common.errors import BAD_INPUT, HUB_FAILED, UserError
from minitrain.common.hub_id import hub_id_problem
from minitrain.common.io import read_json_object
from minitrain.hub.export_hf import export_model
from minitrain.runs.run_files import FINISHED


def missing_token(repo_id: str) -> str | None:
    """None when the client has a token (HF_TOKEN, else the token file); otherwise what to tell the user."""
    if get_token() is not None:
        return None
    return f"publish to {repo_id}: no Hugging Face token found; set HF_TOKEN or run `hf auth login`"


def _hub_failure(err: httpx2.HTTPError, repo_id: str, endpoint: str) -> UserError:
    """Turn what the client raised into one readable error (the token is never part of it)."""
    status = err.response.status_code if isinstance(err, HfHubHTTPError) else None
    if status == 401:
        return UserError(f"publish to {repo_id}: the Hub at {endpoint} rejected the token (HTTP 401); check HF_TOKEN "
                         "or run `hf auth login` again", HUB_FAILED)
    if status == 403:
        return UserError(f"publish to {repo_id}: the token has no write access to this repo (HTTP 403)", HUB_FAILED)
    if status is not None:
        detail = str(err).strip().splitlines()[-1]
        return UserError(f"publish to {repo_id}: the Hub answered HTTP {status}: {detail}", HUB_FAILED)
    return UserError(f"publish to {repo_id}: the connection to {endpoint} failed ({type(err).__name__}: {err}); the "
                     "upload did not finish, run the command again (files already uploaded are not sent twice)",
                     HUB_FAILED)


def publish(
    run_dir: str | Path,
    repo_id: str,
    private: bool = False,
    dry_run: bool = False,
    log: Callable[[str], None] = print,
    quiet: bool = False,
    merge_adapters: bool = False,
    base_model: str | None = None,
    vocab_path: str | Path | None = None,
    model_format: str = "hf",
    dtype: str = "f32",
    float_base: bool = False,
    model_card: bool = True,
) -> str:
    """Export `run_dir` and upload it to `repo_id`; return the repo URL (for a dry run, where it would go).
    `quiet`: no upload progress bars (`train --quiet`). A LoRA run uploads its adapter (PEFT's layout), or with
    `merge_adapters` its base with the adapters merged in (`base_model` when the run does not record its base). An
    adapter's base must be a Hub id (recorded, or `base_model`): PEFT loads it by that name. `vocab_path`: the
    vocabulary of a model file that does not record it. `model_format` "gguf": the repo gets one file,
    REPO-NAME-DTYPE.gguf (hub/export_gguf.py; a LoRA run merged), instead of the Hugging Face folder. `float_base`:
    a QLoRA run on a Llama-family base merged into the float base (hub/export_text.py), the gap logged.
    `model_card` false: README.md is left out of the upload."""
    if problem := hub_id_problem(repo_id):  # with and without --dry-run: an id a dry run accepts, the upload can use
        raise UserError(f"publish --repo: {problem}", BAD_INPUT)
    api = HfApi()
    if not dry_run and (problem := missing_token(repo_id)):
        raise UserError(f"{problem} (nothing was uploaded)")
    token = None if dry_run else get_token()
    with tempfile.TemporaryDirectory(prefix="minitrain-publish-") as tmp:
        if model_format == "gguf":
            from minitrain.hub.export_gguf import export_gguf

            name = f"{repo_id.rsplit('/', 1)[-1]}-{dtype}.gguf"
            files = [export_gguf(run_dir, Path(tmp) / name, dtype, vocab_path, base_model)[0]]
        else:
            files = export_model(run_dir, tmp, repo_id=repo_id, vocab_path=vocab_path,
                                 merge_adapters=merge_adapters, base_model=base_model, for_hub=True,
                                 float_base=float_base, log=log)
        if not model_card and (card := Path(tmp) / "README.md").exists():
            card.unlink()
            files = [path for path in files if path != card]
            log("Model card: not written (README.md is left out of the upload)")
        if dry_run:
            log(f"Dry run: would upload to {api.endpoint}/{repo_id} ({'private' if private else 'public'}):")
            for path in files:
                log(f"  {path.name}  ({path.stat().st_size:,} bytes)")
            return f"{api.endpoint}/{repo_id}"
        try:
            url = api.create_repo(repo_id, private=private, exist_ok=True, token=token)
            with _progress_bars(not quiet):
                api.upload_folder(repo_id=repo_id, folder_path=tmp, token=token,
                                  commit_message=f"Upload {_what(tmp)} from {Path(run_dir).name} with minitrain")
        except (httpx2.HTTPError, RuntimeError) as err:
            # The client wraps a failed LFS upload in a RuntimeError whose cause is the HTTP error.
            cause = err.__cause__ if isinstance(err, RuntimeError) else err
            if not isinstance(cause, httpx2.HTTPError):
                raise
            raise _hub_failure(cause, repo_id, api.endpoint) from None
    log(f"Published: {url}")
    return str(url)


def _what(folder: str) -> str:
    """What the export in `folder` holds, for the commit message: its transformers class, or a PEFT adapter."""
    config = Path(folder) / "config.json"
    if any(Path(folder).glob("*.gguf")):
        return "a GGUF"
    if not config.is_file():
        return "a LoRA adapter"
    architectures = read_json_object(config, "model config").get("architectures") or ["MiniGPT"]
    return "MiniGPT" if architectures[0] == "GPT2LMHeadModel" else str(architectures[0])


@contextmanager
def _progress_bars(shown: bool) -> Iterator[None]:
    """huggingface_hub's progress bars off inside the block when not `shown`, as they were after it."""
    was_disabled = are_progress_bars_disabled()
    if not shown:
        disable_progress_bars()
    try:
        yield
    finally:
        if not shown and not was_disabled:
            enable_progress_bars()


def maybe_publish_after_training(cfg, run_dir: str | Path, status: str, quiet: bool = False) -> str | None:
    """Run the config's `publish:` section after a training run that ended well; else do nothing.

    Called by the training command once the run folder is complete (`quiet`: no progress bars). Returns the
    repo URL when it published.
    """
    if cfg.publish is None:
        return None
    if status not in FINISHED:
        print(f"Not publishing to {cfg.publish.repo}: the run ended with status {status!r}")
        return None
    print(f"Publishing to {cfg.publish.repo} (publish: section of the config"
          + ("; no model card: publish.model_card is false)" if not cfg.publish.model_card else ")"))
    return publish(run_dir, cfg.publish.repo, private=cfg.publish.private, quiet=quiet,
                   merge_adapters=cfg.publish.merge_adapters, model_card=cfg.publish.model_card)
