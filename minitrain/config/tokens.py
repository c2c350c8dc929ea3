"""Access tokens in a config: refused, and masked wherever a message would echo one.

A config's values are written to config.resolved.yaml, manifest.json, lock files and trackers, so a token that
reaches a value (pasted, or through `{{ env.X }}` whatever X is called) would be copied into all of them.
minitrain reads tokens itself (HF_TOKEN for the Hub), never through the config. A token is recognised by its
shape: the prefixes the common services give their tokens, followed by enough random characters.
"""

from __future__ import annotations

import re

TOKEN_SHAPES = (
    r"hf_[A-Za-z0-9]{30,}",  # Hugging Face
    r"gh[pousr]_[A-Za-z0-9]{30,}", r"github_pat_[A-Za-z0-9_]{30,}",  # GitHub
    r"sk-[A-Za-z0-9_-]{20,}",  # OpenAI, Anthropic and others' secret keys
    r"AKIA[0-9A-Z]{16}",  # AWS access key id
    r"xox[abprs]-[A-Za-z0-9-]{10,}",  # Slack
    r"eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]+",  # a JWT
)
TOKEN = re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(TOKEN_SHAPES) + r")(?![A-Za-z0-9])")
SHOWN = 3  # the characters of a token a message keeps: the service's prefix, none of the secret


def looks_like_token(text: str) -> bool:
    return TOKEN.search(text) is not None


def mask_tokens(text: str) -> str:
    """`text` with every token cut to its prefix: `hf_…(masked)`."""
    return TOKEN.sub(lambda m: m.group()[:SHOWN] + "…(masked)", text)

