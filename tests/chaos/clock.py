"""Simulated time: `time.time()` everywhere runs ahead of the real clock by an offset the run advances
when nothing is ready (delayed messages, heartbeat silence, reconcile's thresholds), so hours of a
control plane's life pass in seconds. Monotonic time is untouched.

`detached=True` (the chaos run): the clock does not follow the real one at all. Following it, on a loaded
machine the real seconds an operation took passed in the simulation too: a 100-job wave on the DynamoDB
store took 1,000-2,000 s at load 15, and nodes whose agents were only waiting for their turn were judged
silent and their jobs failed (12 of 1,000). Each reading is then a microsecond after the one before, so
events written one after another keep their order. `start` fixes where a detached clock begins: a chaos
run starts at RUN_START, so its timestamps, like everything else in it, depend on its seed alone."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

TICK = 1e-6
RUN_START = 1_796_083_200.0  # 2026-12-01T00:00:00Z


class SimClock:
    def __init__(self, detached: bool = False, start: float | None = None) -> None:
        self.offset = 0.0
        self._real = time.time
        self._detached = detached
        self._start = self._real() if start is None else start
        self._ticks = 0

    def now(self) -> float:
        if not self._detached:
            return self._real() + self.offset
        self._ticks += 1
        return self._start + self.offset + self._ticks * TICK

    def advance(self, seconds: float) -> None:
        self.offset += max(0.0, seconds)

    @contextmanager
    def installed(self) -> Iterator[SimClock]:
        time.time = self.now  # type: ignore[assignment]
        try:
            yield self
        finally:
            time.time = self._real  # type: ignore[assignment]
