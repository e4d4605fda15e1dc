"""Simulated time: `time.time()` everywhere runs ahead of the real clock by an offset the run advances
when nothing is ready (delayed messages, heartbeat silence, reconcile's thresholds), so hours of a
control plane's life pass in seconds. Monotonic time is untouched."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class SimClock:
    def __init__(self) -> None:
        self.offset = 0.0
        self._real = time.time

    def now(self) -> float:
        return self._real() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += max(0.0, seconds)

    @contextmanager
    def installed(self) -> Iterator[SimClock]:
        time.time = self.now  # type: ignore[assignment]
        try:
            yield self
        finally:
            time.time = self._real  # type: ignore[assignment]
