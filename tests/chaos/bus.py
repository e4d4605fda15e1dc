"""At-least-twice delivery: every message sent is queued as two or more copies, each late by a random
amount, and the run takes a random visible one (so order is shuffled). A copy whose handler crashed is
put back, visible again after the queue's visibility timeout, as SQS would."""

from __future__ import annotations

import heapq
import itertools
import random
from dataclasses import dataclass, field
from typing import Any

from chaos.clock import SimClock

VISIBILITY_TIMEOUT_SECONDS = 30.0


@dataclass(order=True)
class Copy:
    visible_at: float
    seq: int
    kind: str = field(compare=False)
    body: dict[str, Any] = field(compare=False)
    deliveries: int = field(default=0, compare=False)


class ChaosBus:
    def __init__(
        self,
        rng: random.Random,
        clock: SimClock,
        copies: int = 2,
        extra_copy_rate: float = 0.2,
        late: float = 20.0,
    ) -> None:
        self.rng = rng
        self.clock = clock
        self.copies = copies
        self.extra_copy_rate = extra_copy_rate
        self.late = late  # mean lateness of a copy, seconds
        self.waiting: list[Copy] = []  # a heap by visible_at
        self.ready: list[Copy] = []  # visible, in no order (taken at random)
        self.sent = 0
        self.delivered = 0
        self._seq = itertools.count()

    def send(self, kind: str, body: dict[str, Any], delay_seconds: int = 0) -> None:
        self.sent += 1
        count = self.copies + (1 if self.rng.random() < self.extra_copy_rate else 0)
        for _ in range(count):
            at = self.clock.now() + max(0, delay_seconds) + self.rng.expovariate(1 / self.late)
            heapq.heappush(self.waiting, Copy(at, next(self._seq), kind, dict(body)))

    def take(self) -> Copy | None:
        """A random copy among the visible ones (removed), or None."""
        now = self.clock.now()
        while self.waiting and self.waiting[0].visible_at <= now:
            self.ready.append(heapq.heappop(self.waiting))
        if not self.ready:
            return None
        index = self.rng.randrange(len(self.ready))
        self.ready[index], self.ready[-1] = self.ready[-1], self.ready[index]
        chosen = self.ready.pop()
        chosen.deliveries += 1
        self.delivered += 1
        return chosen

    def put_back(self, copy: Copy) -> None:
        copy.visible_at = self.clock.now() + VISIBILITY_TIMEOUT_SECONDS
        heapq.heappush(self.waiting, copy)

    def next_visible_at(self) -> float | None:
        if self.ready:
            return self.clock.now()
        return self.waiting[0].visible_at if self.waiting else None

    def has_visible(self) -> bool:
        return bool(self.ready) or (bool(self.waiting) and self.waiting[0].visible_at <= self.clock.now())

    def pending(self) -> bool:
        """Copies not delivered yet (visible or not)."""
        return bool(self.ready or self.waiting)


class BusQueue:
    """One queue's `send`, as the wiring's Queues expose it."""

    def __init__(self, bus: ChaosBus, kind: str) -> None:
        self.bus = bus
        self.kind = kind

    def send(self, body: dict[str, Any], delay_seconds: int = 0) -> None:
        self.bus.send(self.kind, body, delay_seconds)


class BusQueues:
    def __init__(self, optimize: Any, provision: Any, spot_watch: Any, teardown: Any) -> None:
        self.optimize = optimize
        self.provision = provision
        self.spot_watch = spot_watch
        self.teardown = teardown
