"""Training progress on stderr: what is known, never a NaN.

On a terminal, a tqdm bar with the step, the rate, the time left and the last evaluated
perplexity ("—" before the first finite one; deep LDA's evaluations during burn-in have
none); in a Jupyter notebook, the same bar as tqdm's widget. When stderr is neither (a run
logging to a file), one log line per evaluation instead of a bar redrawn with carriage
returns. Nothing when quiet.
"""
from __future__ import annotations

import logging
import math
import sys
import time

from tqdm import tqdm

from topictk.progress import bar, in_notebook, is_terminal

log = logging.getLogger("topictk")

UNKNOWN = "—"


class Progress:
    """Progress of steps ``initial``..``total``: :meth:`step` after every step,
    :meth:`evaluated` after every evaluation, :meth:`close` at the end."""

    def __init__(self, total: int, initial: int, *, quiet: bool, stream=None):
        stream = sys.stderr if stream is None else stream
        self.total, self.initial, self.done = total, initial, initial
        self.perplexity: float | None = None
        self.began = time.perf_counter()
        self.bar = None
        # a notebook's stderr is no terminal, but shows tqdm's widget (progress.bar)
        self.lines = not quiet and not is_terminal(stream) and not (
            stream is sys.stderr and in_notebook())
        if not quiet and not self.lines:
            self.bar = bar(total, initial=initial, desc=None, unit="step", show=True,
                           stream=stream)
            self.bar.set_postfix_str(self._postfix(), refresh=False)

    def _postfix(self) -> str:
        shown = UNKNOWN if self.perplexity is None else f"{self.perplexity:.1f}"
        return f"perplexity={shown}"

    def step(self) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update(1)

    def evaluated(self, step: int, perplexity: float | None) -> None:
        """Show ``perplexity`` (ignored unless finite) as the last one evaluated at ``step``."""
        if perplexity is not None and math.isfinite(perplexity):
            self.perplexity = float(perplexity)
        if self.bar is not None:
            self.bar.set_postfix_str(self._postfix(), refresh=False)
        elif self.lines:
            log.info("%s", self.line(step))

    def line(self, step: int) -> str:
        """One plain line: step, rate, time left and the last perplexity."""
        elapsed = time.perf_counter() - self.began
        steps = step - self.initial
        rate = steps / elapsed if elapsed > 0 and steps > 0 else None
        left = (self.total - step) / rate if rate else None
        return (f"step {step}/{self.total}, "
                f"{f'{rate:.2f} step/s' if rate else UNKNOWN + ' step/s'}, "
                f"ETA {tqdm.format_interval(left) if left is not None else UNKNOWN}, "
                f"perplexity {UNKNOWN if self.perplexity is None else f'{self.perplexity:.1f}'}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
