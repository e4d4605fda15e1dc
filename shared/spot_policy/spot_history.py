"""What skyless has seen of spot capacity at one place: how long spot ran there, how often it was taken
away or refused, and when it was last seen up or down. Built from the control plane's own observations
(launches, preemptions, capacity errors, of every job) and, where a cloud offers one, its capacity signal."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

_SHORTEST_OUTAGE = 60.0  # seconds an outage (or the prior) counts for at least in `typical_outage`


@dataclass(frozen=True)
class SpotHistory:
    up_seconds: float = 0.0  # spot run time observed at this place
    interruptions: int = 0  # runs ended by a preemption, and outages first seen as a capacity error
    last_unavailable: float | None = None  # the last preemption or capacity error
    last_available: float | None = None  # the last launch that got spot capacity
    down_since: float | None = None  # when the outage now under way began (None: last seen with capacity)
    outage_seconds: float = 0.0  # total length of the outages seen to end (by a launch that got capacity)
    outages: int = 0  # how many outages were seen to end
    capacity_score: float | None = None  # 0..1 (an EC2 spot placement score / 10), where a cloud has one
    outage_log_seconds: float = 0.0  # the sum of ln(seconds) of the outages seen to end
    logged_outages: int = 0  # how many outages that sum holds (none in histories stored before it)

    def unavailable_at(self, now: float, cooldown: float) -> bool:
        """Seen without capacity less than `cooldown` ago, and not seen with capacity since."""
        if self.last_unavailable is None or now - self.last_unavailable >= cooldown:
            return False
        return self.last_available is None or self.last_unavailable >= self.last_available

    def mean_run(self, prior_run: float, prior_weight: float = 1.0) -> float:
        """The expected length of a spot run here: observed run time per interruption, shrunk towards
        `prior_run` (scaled by the capacity score, if any) with the weight of `prior_weight` runs."""
        prior = prior_run if self.capacity_score is None else prior_run * (0.25 + 1.5 * self.capacity_score)
        return (self.up_seconds + prior * prior_weight) / (self.interruptions + prior_weight)

    def mean_outage(self, prior_outage: float, prior_weight: float = 1.0) -> float:
        """The expected length of an outage here, shrunk towards `prior_outage` like `mean_run`."""
        return (self.outage_seconds + prior_outage * prior_weight) / (self.outages + prior_weight)

    def typical_outage(self, prior_outage: float, prior_weight: float = 1.0) -> float:
        """The typical length of an outage here: the geometric mean of the outages seen to end, shrunk
        towards `prior_outage` like `mean_outage`. Outages are heavy-tailed: a few long ones make the mean,
        while most are short; how long the outage under way has lasted is what tells a long one."""
        logs = self.outage_log_seconds + math.log(max(prior_outage, _SHORTEST_OUTAGE)) * prior_weight
        return math.exp(logs / (self.logged_outages + prior_weight))

    def launched(self, at: float) -> SpotHistory:
        """A spot launch got capacity at `at` (which ends the outage under way, if one was)."""
        began = self.down_since
        ended = began is not None and at >= began
        outage = at - began if began is not None and ended else 0.0
        return replace(
            self,
            last_available=_later(self.last_available, at),
            down_since=None,
            outage_seconds=self.outage_seconds + outage,
            outages=self.outages + (1 if ended else 0),
            outage_log_seconds=self.outage_log_seconds
            + (math.log(max(outage, _SHORTEST_OUTAGE)) if ended else 0.0),
            logged_outages=self.logged_outages + (1 if ended else 0),
        )

    def ran(self, started_at: float, ended_at: float, *, preempted: bool) -> SpotHistory:
        """A spot cluster ran from `started_at` to `ended_at`; `preempted` if the cloud took it back."""
        up = self.up_seconds + max(0.0, ended_at - started_at)
        if not preempted:
            return replace(self, up_seconds=up, last_available=_later(self.last_available, ended_at))
        return replace(
            self,
            up_seconds=up,
            interruptions=self.interruptions + 1,
            last_unavailable=_later(self.last_unavailable, ended_at),
            down_since=ended_at,
        )

    def refused(self, at: float) -> SpotHistory:
        """A spot launch failed for lack of capacity at `at`. Only the first refusal of an outage counts as
        an interruption, so retrying a place that stays down does not make it look worse and worse."""
        new_outage = self.last_unavailable is None or (
            self.last_available is not None and self.last_available > self.last_unavailable
        )
        return replace(
            self,
            interruptions=self.interruptions + (1 if new_outage else 0),
            last_unavailable=_later(self.last_unavailable, at),
            down_since=at if new_outage or self.down_since is None else self.down_since,
        )


def _later(known: float | None, at: float) -> float:
    return at if known is None else max(known, at)
