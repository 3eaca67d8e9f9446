"""The training loop: a generator of step records; the caller decides when to evaluate,
checkpoint, update progress and stop."""
from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from topictk.inference.base import Driver, StepInfo


@dataclass
class StepRecord:
    """One completed step: its 1-based number, what it did and how long it took."""

    step: int
    info: StepInfo
    seconds: float


def train_steps(driver: Driver, state, start: int, stop: int) -> Iterator[StepRecord]:
    """Run steps ``start`` .. ``stop - 1`` (0-based t), yielding after each one."""
    for t in range(start, stop):
        began = time.perf_counter()
        if driver.cluster is not None:     # what to go back to if the cluster is lost
            driver.mark_step(state)
        info = driver.step(state, t)
        driver.check_state(state)
        if driver.cluster is not None:     # the traffic and time of the shard work so far
            info.extra.update(driver.cluster.counters())
        yield StepRecord(step=t + 1, info=info, seconds=time.perf_counter() - began)
