"""Spot probes: when a job may try spot in a zone again, and how many refused spot launches one job may
cause in an hour. Pure: it reads the refused spot launches every job recorded (shared/store/cooldowns.py).

- **A zone waits longer as the evidence grows.** Each refused spot launch in a zone, by any job, counts 1
  when it happens and half as much every PROBE_HALF_LIFE_SECONDS after. After the zone's latest refusal,
  whose count (itself and the earlier ones, decayed) is n, no job probes the zone for
  `retry * 2 ** (n - 1)` seconds, at most MAX_PROBE_GAP_SECONDS: one refusal waits the retry (300 s by
  default); a zone refused every few minutes for an hour waits about 20 minutes between probes; an hour
  without refusals and it is back to the retry. The wait is the zone's, not a job's: ten jobs waiting for
  one zone share its probes instead of each making its own.
- **A job's refused launches are bounded.** A job whose own refused spot launches in the last hour reached
  `per_hour` makes no spot launch until the oldest of them is an hour old.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from shared.optimizer.cooling import decayed_count

PROBE_HALF_LIFE_SECONDS = 1800.0
MAX_PROBE_GAP_SECONDS = 3600.0
BUDGET_WINDOW_SECONDS = 3600.0
RECENT_SECONDS = 600.0

Refusal = tuple[float, str]  # (epoch seconds, who: "<job id>-<attempt>")


@dataclass(frozen=True)
class ZoneProbe:
    """A zone's refused spot launches and when spot may be tried there again."""

    place: str  # cloud/region/zone
    recent: int  # refused there in the last RECENT_SECONDS, by any job
    last_refused: float
    next_at: float  # no spot launch there before this (epoch seconds)


@dataclass(frozen=True)
class ProbeBudget:
    used: int  # the job's refused spot launches in the last hour
    per_hour: int
    open_at: float | None  # None: the job may launch spot now; else not before this


@dataclass(frozen=True)
class SpotProbes:
    zones: Mapping[str, ZoneProbe]
    budget: ProbeBudget
    now: float

    def zone_wait(self, place: str) -> float | None:
        """When the evidence lets any job probe `place` (cloud/region/zone) again; None: now."""
        zone = self.zones.get(place)
        return zone.next_at if zone is not None and zone.next_at > self.now else None

    def not_before(self, place: str) -> float | None:
        """When this job may next launch spot in `place`: its zone's wait and its own budget; None: now."""
        zone = self.zones.get(place)
        times = [t for t in (zone.next_at if zone else None, self.budget.open_at) if t and t > self.now]
        return max(times) if times else None

    def budget_until(self) -> float | None:
        """When the job may be refused spot again; None: now."""
        at = self.budget.open_at
        return at if at is not None and at > self.now else None

    def lines(self, places: Sequence[str]) -> list[str]:
        """What `status` says: each of `places` with refusals or a wait, then the job's budget if spent."""
        out = []
        for place in places:
            zone = self.zones.get(place)
            if zone is None or (zone.recent == 0 and zone.next_at <= self.now):
                continue
            wait = self.not_before(place)
            nxt = f"next probe in {_span(wait - self.now)}" if wait else "may be probed now"
            out.append(f"spot in {place}: {zone.recent} refusal(s) in the last 10 min; {nxt}")
        if self.budget.open_at is not None:
            out.append(
                f"spot probes: {self.budget.used} refused launch(es) in the last hour, the limit of "
                f"{self.budget.per_hour}/h; next probe in {_span(self.budget.open_at - self.now)} "
                f"(at {datetime.fromtimestamp(self.budget.open_at, UTC).strftime('%H:%M UTC')})"
            )
        return out


def spot_probes(
    refusals: Mapping[str, Sequence[Refusal]], job_id: str, now: float, *, retry: float, per_hour: int
) -> SpotProbes:
    """Each zone's wait and `job_id`'s budget, from every job's refused spot launches per zone."""
    zones: dict[str, ZoneProbe] = {}
    mine: list[float] = []
    for place, listed in refusals.items():
        times = sorted(t for t, _ in listed if t <= now)
        mine += [t for t, who in listed if _job_of(who) == job_id and 0 <= now - t < BUDGET_WINDOW_SECONDS]
        if not times:
            continue
        last = times[-1]
        count = decayed_count(times, last, PROBE_HALF_LIFE_SECONDS)
        gap = min(MAX_PROBE_GAP_SECONDS, retry * 2 ** max(0.0, count - 1))
        recent = sum(1 for t in times if now - t <= RECENT_SECONDS)
        zones[place] = ZoneProbe(place, recent, last, last + gap)
    return SpotProbes(zones, _budget(sorted(mine), per_hour), now)


def with_refusal(
    refusals: Mapping[str, Sequence[Refusal]], place: str, at: float, who: str
) -> dict[str, list[Refusal]]:
    """`refusals` and one more (a launch just refused, not yet read back from the store)."""
    out = {p: list(listed) for p, listed in refusals.items()}
    out.setdefault(place, []).append((at, who))
    return out


def _budget(mine: list[float], per_hour: int) -> ProbeBudget:
    if per_hour <= 0 or len(mine) < per_hour:
        return ProbeBudget(len(mine), per_hour, None)
    # the count falls below the limit when the (len - per_hour + 1)-th oldest leaves the window
    return ProbeBudget(len(mine), per_hour, mine[len(mine) - per_hour] + BUDGET_WINDOW_SECONDS)


def _job_of(who: str) -> str:
    job, _, attempt = who.rpartition("-")
    return job if attempt.isdigit() else who


def _span(seconds: float) -> str:
    minutes = max(1, round(seconds / 60))
    return f"{minutes} min" if minutes < 120 else f"{minutes / 60:.1f} h"
