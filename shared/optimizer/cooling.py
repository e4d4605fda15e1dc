"""Correlated preemptions, as policy: when and for how long a zone or region is "cooling" for spot.

A cloud reclaiming spot capacity reclaims it from many VMs of a zone at once, so one job's preemption is
news for every job planning spot there. Each preemption is kept as a time against its zone (the store:
shared/store/cooldowns.py). From those times, with no state of its own, this module decides:

- each preemption counts 1 when it happens and half as much every half-life after; a place starts cooling
  when its count reaches the threshold and cools until the count has decayed to half the threshold;
- a zone's threshold is ZONE_THRESHOLD, one preemption (half-life ZONE_HALF_LIFE_SECONDS): one preemption
  cools its zone for one half-life (10 min), two at once for two, n at once for log2(2n) half-lives — the
  period decays with the evidence, it is not a fixed timer;
- a region's is REGION_THRESHOLD over all its zones' preemptions (REGION_HALF_LIFE_SECONDS): three within
  about eight minutes, a storm, not one unlucky VM; three at once cool the region for 19 minutes;
- no cooling lasts past MAX_COOLING_SECONDS from now, and preemptions older than FORGET_AFTER_SECONDS
  no longer count (the store prunes them, and keeps only a zone's newest ones: shared/store/cooldowns.py);
- a spot launch refused for capacity, by any job, is the same kind of evidence about its zone (and region)
  as a preemption, counted the same way: the control plane learns where spot is short from every job's
  launches, instead of each job probing on its own.

Cooling never removes a place from a plan: spot candidates in a cooling zone or region move to the end of
the failover list, behind every other candidate (other zones, regions, clouds, then on-demand where the task
allows it), so a job goes back there only when nothing else is left.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from shared.optimizer.plan import Candidate

ZONE_HALF_LIFE_SECONDS = 600.0
ZONE_THRESHOLD = 1.0
REGION_HALF_LIFE_SECONDS = 900.0
REGION_THRESHOLD = 2.5  # three preemptions within about eight minutes
MAX_COOLING_SECONDS = 3600.0
FORGET_AFTER_SECONDS = 4 * 3600.0


def place_of(cloud: str, region: str, zone: str | None) -> str:
    """`cloud/region/zone` (or `cloud/region` where a cloud has no zones): the key preemptions are kept by."""
    return "/".join(p for p in (cloud, region, zone) if p)


def region_of(place: str) -> str:
    return "/".join(place.split("/")[:2])


@dataclass(frozen=True)
class Cooling:
    """A zone (or region) that spot plans avoid until `until` (epoch seconds)."""

    place: str
    scope: str  # "zone" | "region"
    preemptions: int  # preemptions there within FORGET_AFTER_SECONDS
    until: float
    refusals: int = 0  # spot launches refused for capacity there within FORGET_AFTER_SECONDS
    last_refused: float | None = None

    def covers(self, candidate: Candidate) -> bool:
        if not candidate.use_spot:
            return False
        if self.scope == "region":
            return region_of(place_of(candidate.cloud, candidate.region, candidate.zone)) == self.place
        return place_of(candidate.cloud, candidate.region, candidate.zone) == self.place

    def describe(self) -> str:
        clock = datetime.fromtimestamp(self.until, UTC).strftime("%H:%M UTC")
        refused = f" and {self.refusals} refused spot launch(es)" if self.refusals else ""
        return (
            f"{self.scope} {self.place} cooling after {self.preemptions} spot preemption(s){refused}, "
            f"until {clock}"
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "place": self.place,
            "scope": self.scope,
            "preemptions": self.preemptions,
            "refusals": self.refusals,
            "until": self.until,
        }


def decayed_count(times: Iterable[float], now: float, half_life: float) -> float:
    """Each preemption counts 1 when it happens and half as much every `half_life` seconds after."""
    return sum(2 ** (-max(0.0, now - t) / half_life) for t in times if now - t <= FORGET_AFTER_SECONDS)


def cooling_until(times: Sequence[float], now: float, half_life: float, threshold: float) -> float | None:
    """When a place that reached `threshold` stops cooling (its count decays to threshold / 2, no more
    preemptions assumed), or None when it is not cooling now."""
    recent = [t for t in times if t <= now]
    if not recent:
        return None
    peak = decayed_count(recent, max(recent), half_life)  # the count just after the latest preemption
    score = decayed_count(recent, now, half_life)
    if peak < threshold or score < threshold / 2:
        return None
    return now + min(MAX_COOLING_SECONDS, half_life * math.log2(score / (threshold / 2)))


def cooling_places(
    preemptions: Mapping[str, Sequence[float]],
    now: float,
    refusals: Mapping[str, Sequence[float]] | None = None,
) -> list[Cooling]:
    """The cooling zones and regions, given each zone's preemption times and refused spot launches."""
    refusals = refusals or {}
    cooling: list[Cooling] = []
    by_region: dict[str, list[float]] = defaultdict(list)
    refused_in: dict[str, list[float]] = defaultdict(list)
    for place in sorted(set(preemptions) | set(refusals)):
        taken = [t for t in preemptions.get(place, ()) if now - t <= FORGET_AFTER_SECONDS]
        refused = [t for t in refusals.get(place, ()) if now - t <= FORGET_AFTER_SECONDS]
        by_region[region_of(place)].extend(taken + refused)
        refused_in[region_of(place)].extend(refused)
        until = cooling_until(taken + refused, now, ZONE_HALF_LIFE_SECONDS, ZONE_THRESHOLD)
        if until is not None:
            last = max(refused) if refused else None
            cooling.append(Cooling(place, "zone", len(taken), until, len(refused), last))
    for region, times in sorted(by_region.items()):
        until = cooling_until(times, now, REGION_HALF_LIFE_SECONDS, REGION_THRESHOLD)
        if until is not None:
            refused = refused_in[region]
            last = max(refused) if refused else None
            cooling.append(Cooling(region, "region", len(times) - len(refused), until, len(refused), last))
    return cooling


def refused_recently(refusals: Sequence[float], now: float, window: float = 600.0) -> int:
    """How many of a place's refused spot launches fall in the last `window` seconds."""
    return sum(1 for t in refusals if 0 <= now - t <= window)


def forgotten(times: Iterable[float], now: float) -> list[float]:
    """The preemption times old enough to drop from the record."""
    return [t for t in times if now - t > FORGET_AFTER_SECONDS]


def order_for_cooling(
    candidates: Sequence[Candidate], cooling: Sequence[Cooling]
) -> tuple[list[Candidate], list[str]]:
    """Spot candidates in a cooling place moved behind all others (each group in its order), and a note
    per cooling place that moved something."""
    if not cooling:
        return list(candidates), []
    kept: list[Candidate] = []
    moved: list[Candidate] = []
    used: dict[str, Cooling] = {}
    for candidate in candidates:
        hit = next((c for c in cooling if c.covers(candidate)), None)
        if hit is None:
            kept.append(candidate)
        else:
            moved.append(candidate)
            used.setdefault(hit.place, hit)
    if not kept:
        notes = [f"{c.describe()}: no other place, planned anyway" for c in used.values()]
    else:
        notes = [f"{c.describe()}: its spot candidates are tried last" for c in used.values()]
    return kept + moved, notes
