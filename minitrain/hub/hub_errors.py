"""What a failed download from the Hub means, said once for every reader of a Hub repo (minitrain/hub/sources.py:
an exported model; hub/pretrained.py: a pretrained base), and the download both make (`download_repo`).

    with hub_download_errors(f"{KEY} {repo_id}", "a file it needs (config.json, model.safetensors)"):
        hf_hub_download(repo_id, "config.json")
        ...

turns huggingface_hub's errors inside the block into one UserError naming the repo: not cached and the Hub out of
reach, no such repo (or a private one), a file the repo lacks, any other HTTP failure (exit code HUB_FAILED); and
an id the client refuses to send (HFValidationError: exit code 2, though minitrain/common/hub_id.py checks first).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from minitrain.common.errors import BAD_INPUT, HUB_FAILED, UserError
from minitrain.common.io import read_json_object
from minitrain.formats.safetensors_folder import INDEX_FILE, WEIGHTS_FILE


@contextmanager
def hub_download_errors(where: str, needs: str) -> Iterator[None]:
    """Downloads inside the block fail as `UserError(f"{where}: ...")`; `needs` says which files the repo must
    hold ("a file it needs (config.json, ...)")."""
    # Imported here: a run that reads no Hub repo does not pay for the client's errors and httpx2 (about 0.2 s)
    import httpx2  # huggingface_hub's HTTP library: its errors are what a failed download raises
    from huggingface_hub import constants, errors

    try:
        yield
    except errors.LocalEntryNotFoundError:  # before EntryNotFoundError: it is one (a file not in the offline cache)
        raise UserError(f"{where}: not in the local Hugging Face cache ({constants.HF_HUB_CACHE}) and the Hub at "
                        f"{constants.ENDPOINT} cannot be reached (offline mode or no network)", HUB_FAILED) from None
    except errors.RepositoryNotFoundError:
        raise UserError(f"{where}: no such model repo on {constants.ENDPOINT} (or it is private and no token "
                        "with access is set)", HUB_FAILED) from None
    except errors.EntryNotFoundError as e:
        raise UserError(f"{where}: the repo lacks {needs}: {e}", HUB_FAILED) from None
    except httpx2.HTTPError as e:
        raise UserError(f"{where}: download from {constants.ENDPOINT} failed ({type(e).__name__}: {e})",
                        HUB_FAILED) from None
    except errors.HFValidationError as e:
        raise UserError(f"{where}: not a Hub repo id the client accepts ({e})", BAD_INPUT) from None


def download_repo(repo_id: str, where: str, needs: str, optional: tuple[str, ...], weights: bool = True,
                  shards: bool = True) -> Path:
    """The snapshot folder of a Hub model repo in the Hugging Face cache (HF_HOME: a second read is offline), with
    config.json, the weights (with `shards`: model.safetensors, or else the shards its index lists) unless not
    `weights`, and whichever of `optional` the repo has; a failure is one UserError led by `where`."""
    from huggingface_hub import hf_hub_download  # here: importing the client takes about 0.4 s
    from huggingface_hub.errors import EntryNotFoundError

    with hub_download_errors(where, needs):
        snapshot = Path(hf_hub_download(repo_id, "config.json")).parent
        try:
            if weights:
                hf_hub_download(repo_id, WEIGHTS_FILE)
        except EntryNotFoundError:  # a big model: shards listed by the index
            if not shards:
                raise
            index = read_json_object(hf_hub_download(repo_id, INDEX_FILE), "weights index")
            for shard in dict.fromkeys(index.get("weight_map", {}).values()):
                hf_hub_download(repo_id, str(shard))
        for name in optional:  # reading the folder says which it lacks
            with contextlib.suppress(EntryNotFoundError):
                hf_hub_download(repo_id, name)
    return snapshot
