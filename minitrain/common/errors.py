"""The exception types for mistakes a user can fix.

Library code raises `UserError` for bad input (a malformed config, a missing file, a corrupted checkpoint, a NaN
loss). Command-line entry points catch it, print its one-line message and exit with `exit_code`, never a
traceback. The teaching core (autograd, nn, models, optim) knows nothing of exit codes: it refuses an argument
with `ArgumentError`, a plain ValueError to anyone calling it from Python, which the CLI prints the same way
(exit 2). Programming errors stay ordinary exceptions, so their tracebacks still reach the developer.
"""

from __future__ import annotations

# Exit code of a UserError about what minitrain was given: an invalid config, a bad command-line argument, or a
# file it has to read (data, a run folder's files, a checkpoint) that is missing, of the wrong kind or damaged.
BAD_INPUT = 2
# Exit code of a request to the Hugging Face Hub that failed: the Hub out of reach, a refused token, no such repo or
# file, any other HTTP error (publish, a download for `sample`/`eval`/`init --base`/`model.init_from`/`data.source`).
HUB_FAILED = 5
# Exit code of a package install a command makes for the user that failed (`lab start`: the package index out of
# reach, or the package refused).
INSTALL_FAILED = 6


class UserError(Exception):
    """A readable, fixable problem: the message names the key, file or step at fault."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class ArgumentError(ValueError):
    """An argument a model, a layer, an optimizer or a schedule refuses (`MiniGPT(d_model=30, n_head=4)`); the
    message names the setting. The CLI prints it as one `error:` line with exit code BAD_INPUT."""


class DataError(UserError):
    """A problem found in the data files that one config key is about (exit code 2).

    `key` is that key's path, e.g. ("data", "preprocessing", 1) or ("model", "layers", 0): `minitrain validate`
    reports it under the key (and its line) with the other problems; raised on its own, the message names it."""

    def __init__(self, key: tuple[str | int, ...], message: str) -> None:
        where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in key).lstrip(".")
        super().__init__(f"{where}: {message}", 2)
        self.key, self.detail = key, message
