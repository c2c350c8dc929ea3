"""A Hugging Face Hub repo id, `user/name`: the one check every entry point makes before a Hub request.

huggingface_hub refuses an id it cannot send (`validate_repo_id`, raising HFValidationError) only once a request is
on its way; minitrain checks first, at least as strictly, so a bad id is one `error:` line (exit 2) naming the key
or flag, and an id minitrain accepts is one the client accepts too (tests/hub/test_damage_hub.py checks that over
generated ids). The rules, per part of `user/name`:

    1 to 96 characters of ASCII letters, digits, '.', '_' and '-'
    starting and ending with a letter or digit
    no '--' and no '..' anywhere, and the id does not end in '.git'
"""

from __future__ import annotations

import re
from pathlib import Path

from minitrain.common.io import path_exists

_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
HUB_ID = re.compile(rf"{_PART}/{_PART}")
RULE = ("write it as user/name, each part 1 to 96 letters, digits, '.', '_' or '-' that starts and ends with a "
        "letter or digit, with no '--' or '..'")


def hub_id_problem(text: str) -> str | None:
    """None when `text` is a Hub repo id minitrain sends; otherwise why it is not one (for a message)."""
    if not HUB_ID.fullmatch(text) or "--" in text or ".." in text or text.endswith(".git"):
        return f"{text!r} is not a Hub repo id; {RULE}"
    return None


def is_hub_id(text: str) -> bool:
    return hub_id_problem(text) is None


def missing_local_path(text: str) -> str | None:
    """Why `text` is a local path that is missing (`experiments/18-train-mix` with experiments/ here: a path one
    letter off, never a Hub id to ask for); None when it exists or its folder is not here."""
    folder = Path(text).parent
    if folder == Path(".") or path_exists(text) or not path_exists(folder):
        return None
    return f"no such file or folder ({folder}/ is here: a local path, not a Hub id)"


def names_hub_repo(text: str) -> bool:
    """`user/name` that names no local path, so a model source asks the Hub for it."""
    return not path_exists(text) and hub_id_problem(text) is None and missing_local_path(text) is None
