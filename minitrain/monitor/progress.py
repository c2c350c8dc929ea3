"""Training progress on the terminal: a tqdm bar, or plain log lines, or nothing.

    progress = Progress(total_steps, mode=cfg.monitoring.progress, every=cfg.training.log_every, quiet=quiet)
    for step in range(start, total_steps):
        ...
        progress.update(step, loss=loss, lr=lr, tokens=n_tokens)    # after each optimizer step
        progress.write("val_loss 2.31 at step 500")                  # a message that does not break the bar
    progress.close()

mode "bar" shows a tqdm bar with ETA and, after it, loss, lr, tokens/s and a sparkline of the recent loss
(`▇▆▅▄▃▂▂▁`); "plain" prints one line every `every` steps (what a log file or CI wants); "auto" picks the bar
when the stream is a terminal and plain lines otherwise; "none" (and quiet=True) prints nothing; "log" is
"plain" for a stream that is no screen (a run that shows nothing still keeps its lines in logs/train.log).
tokens/s = tokens counted since the first update / seconds since the first update.
"""

from __future__ import annotations

import math
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import TextIO

from tqdm import tqdm

BLOCKS = "▁▂▃▄▅▆▇█"


def sparkline(values: Iterable[float]) -> str:
    """One block per value, scaled between the values' min (▁) and max (█); a non-finite value is '×'."""
    values = list(values)
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return "×" * len(values)
    low, high = min(finite), max(finite)
    span = high - low
    top = len(BLOCKS) - 1
    return "".join(
        "×" if not math.isfinite(v) else BLOCKS[round((v - low) / span * top) if span > 0 else top // 2]
        for v in values
    )


def format_seconds(seconds: float) -> str:
    """`3725.0` -> `1h02m05s`, `65` -> `1m05s`, `7` -> `7s`."""
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class Progress:
    """Shows training progress; see the module docstring for the modes."""

    def __init__(self, total_steps: int | None, mode: str = "auto", *, every: int = 10, quiet: bool = False,
                 start_step: int = 0, window: int = 30, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        if mode not in ("auto", "bar", "plain", "none", "log"):
            raise ValueError(f"progress mode must be auto, bar, plain or none, got {mode!r}")
        self.stream = stream if stream is not None else sys.stdout
        if quiet:
            mode = "none"
        elif mode == "auto":
            mode = "bar" if self.stream.isatty() else "plain"
        self.mode, self.total, self.every, self.clock = mode, total_steps, max(1, every), clock
        self.losses: deque[float] = deque(maxlen=window)
        self.done = start_step  # steps completed
        self._first_step = start_step
        self._start: float | None = None
        self._tokens = 0
        self._bar = None
        if mode == "bar":
            self._bar = tqdm(total=total_steps, initial=start_step, file=self.stream, unit="step", dynamic_ncols=True,
                             smoothing=0.1, leave=True)

    def tokens_per_second(self) -> float | None:
        if self._start is None:
            return None
        elapsed = self.clock() - self._start
        return self._tokens / elapsed if elapsed > 0 else None

    def eta_seconds(self) -> float | None:
        """Seconds left at the average pace so far (None without a total or before the second update)."""
        if self.total is None or self._start is None or self.done <= self._first_step:
            return None
        pace = (self.clock() - self._start) / (self.done - self._first_step)
        return pace * max(self.total - self.done, 0)

    def update(self, step: int, *, loss: float | None = None, lr: float | None = None, tokens: int = 0) -> None:
        """Record that 0-based optimizer step `step` finished, with its loss, lr and tokens processed."""
        if self._start is None:
            # The clock starts at the first report, so start-up work does not count against the pace.
            self._start, self._first_step, self.done = self.clock(), step + 1, step + 1
        else:
            self._tokens += tokens
            self.done = step + 1
        if loss is not None:
            self.losses.append(float(loss))
        if self.mode == "bar":
            self._bar.set_postfix_str(self._status(loss, lr, with_eta=False), refresh=False)
            self._bar.update(self.done - self._bar.n)
        elif self.mode in ("plain", "log") and (step + 1) % self.every == 0:
            print(self._plain_line(step, loss, lr), file=self.stream, flush=True)

    def _status(self, loss: float | None, lr: float | None, *, with_eta: bool) -> str:
        parts = []
        if loss is not None:
            parts.append(f"loss {loss:.4f}")
        if lr is not None:
            parts.append(f"lr {lr:.2e}")
        tps = self.tokens_per_second()
        if tps is not None:
            parts.append(f"{tps:,.0f} tok/s")
        eta = self.eta_seconds()
        if with_eta and eta is not None:
            parts.append(f"eta {format_seconds(eta)}")
        if self.losses:
            parts.append(sparkline(self.losses))
        return " | ".join(parts)

    def _plain_line(self, step: int, loss: float | None, lr: float | None) -> str:
        total = f"/{self.total}" if self.total is not None else ""
        return f"step {step + 1}{total} | {self._status(loss, lr, with_eta=True)}"

    def write(self, message: str) -> None:
        """Print a line (a validation result, an alert) without garbling the bar."""
        if self.mode == "bar":
            self._bar.write(message, file=self.stream)
        elif self.mode in ("plain", "log"):
            print(message, file=self.stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
