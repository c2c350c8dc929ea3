"""Value types of config keys that need more than a range: durations, alert rules, Hub repo ids, run names."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Annotated

from pydantic import AfterValidator, Field

from minitrain.common.hub_id import hub_id_problem
from minitrain.evaluation.alerts import parse_alert

# "90s", "1h30m", "2h", "1.5h", "45m10s", or ISO 8601 "PT1H30M".
_DURATION = re.compile(r"^(?:(?P<h>\d+(?:\.\d+)?)h)?(?:(?P<m>\d+(?:\.\d+)?)m)?(?:(?P<s>\d+(?:\.\d+)?)s)?$")


def parse_duration(text: str) -> float:
    """Seconds in a duration string: `90s`, `1h30m`, `2h`, `1.5h`, or ISO 8601 `PT1H30M`. ValueError if bad."""
    body = text.strip().lower()
    if body.startswith("pt"):
        body = body[2:]
    match = _DURATION.match(body)
    if not body or match is None:
        raise ValueError(f"{text!r} is not a duration; write it like '90s', '45m', '1h30m' or 'PT1H30M'")
    hours, minutes, seconds = (float(match.group(k) or 0) for k in "hms")
    total = 3600 * hours + 60 * minutes + seconds
    if total <= 0:
        raise ValueError(f"duration {text!r} must be longer than zero")
    return total


def _parses(parse: Callable[[str], object]) -> AfterValidator:
    """A validator of text that `parse` reads without a ValueError (its message names what is wrong)."""
    def check(text: str) -> str:
        parse(text)
        return text
    return AfterValidator(check)


def _check_repo_id(text: str) -> str:
    if problem := hub_id_problem(text):  # the one Hub id check (minitrain/common/hub_id.py)
        raise ValueError(problem)
    return text


# A run's name becomes a folder name (runs/<name>): one path component, nothing that climbs out or hides.
_NAME = re.compile(r"^\w[\w.+-]{0,99}$")


def _check_name(text: str) -> str:
    if not _NAME.match(text) or any(unicodedata.category(c).startswith("C") for c in text):
        raise ValueError(f"{text!r} cannot name a run folder: write one file name of at most 100 letters, digits, "
                         "'_', '-', '.' or '+', starting with a letter or digit (no '/', no spaces)")
    return text


def default_name(stem: str) -> str:
    """A run name made from a file or folder name: every character a name may not hold becomes '-'."""
    name = re.sub(r"[^\w.+-]", "-", stem).lstrip(".+-")[:100]
    return name if name and _NAME.match(name) else "run"


RunName = Annotated[str, AfterValidator(_check_name)]
SeedInt = Annotated[int, Field(ge=0, lt=2**63)]
Duration = Annotated[str, _parses(parse_duration)]
AlertRule = Annotated[str, _parses(parse_alert)]
RepoId = Annotated[str, AfterValidator(_check_repo_id)]
