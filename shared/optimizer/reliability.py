"""The provider scorecard as an opt-in prior on where to launch: each candidate priced at what it is expected
to cost once the deployment's recorded preemptions and refused launches there are counted.

Pure: candidates and each place's record (a scorecard line: shared/reports/reliability_snapshot.py writes
them) in, the candidates reordered and the plan's notes out.

- A spot candidate's place (cloud, region, instance family) with `p` preemptions per spot-hour, over at least
  `MIN_SPOT_HOURS` of spot, is expected to cost `price x (1 + p x lost)`: each preemption loses `lost` hours
  of the node, the place's median time from launch to RUNNING plus `REDONE_HOURS` of work since the last
  checkpoint.
- A place that refused a share `r` of at least `MIN_LAUNCH_REQUESTS` launch requests makes a launch take
  `r / (1 - r)` refused tries on average, each `TRY_HOURS` of the job's time, spread over its estimated hours.
- With no such evidence a candidate keeps its price. The prior only reorders a list the optimizer ranked by
  price (a task's `ordered` resources keep the order written), and only for the cost objective.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from shared.optimizer.plan import Candidate, instance_family_of

SNAPSHOT_KEY = "reports/place-reliability.json"  # in skyless's bucket: shared/reports/reliability_snapshot.py
MIN_SPOT_HOURS = 0.25
MIN_LAUNCH_REQUESTS = 3
REDONE_HOURS = 0.25
DEFAULT_RELAUNCH_SECONDS = 180.0
TRY_HOURS = 0.05
MAX_REFUSAL_RATE = 0.95
NOTED_PLACES = 3


@dataclass(frozen=True)
class PlaceRecord:
    """What one place (cloud, region, instance family) delivered: a provider scorecard line's counts."""

    cloud: str
    region: str
    family: str
    launch_requests: int
    refusals: int
    spot_hours: float
    preemptions: int
    median_seconds_to_running: float | None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.cloud, self.region, self.family)


def snapshot_records(text: str) -> list[PlaceRecord]:
    """The records of a snapshot object's text."""
    return [PlaceRecord(**place) for place in json.loads(text)["places"]]


@dataclass(frozen=True)
class Expected:
    """A candidate's price as the prior sees it, and why."""

    candidate: Candidate
    hourly: float  # one node, $/h, expected
    preemptions_per_spot_hour: float | None
    refusal_rate: float

    @property
    def factor(self) -> float:
        return self.hourly / self.candidate.hourly_price if self.candidate.hourly_price > 0 else 1.0


def expected_price(candidate: Candidate, line: PlaceRecord | None) -> Expected:
    if line is None:
        return Expected(candidate, candidate.hourly_price, None, 0.0)
    factor = 1.0
    per_hour = None
    if candidate.use_spot and line.spot_hours >= MIN_SPOT_HOURS:
        per_hour = line.preemptions / line.spot_hours
        lost = (line.median_seconds_to_running or DEFAULT_RELAUNCH_SECONDS) / 3600 + REDONE_HOURS
        factor += per_hour * lost
    refused = 0.0
    if line.launch_requests >= MIN_LAUNCH_REQUESTS:
        refused = min(MAX_REFUSAL_RATE, line.refusals / line.launch_requests)
        tries = refused / (1 - refused)
        factor += tries * TRY_HOURS / max(candidate.estimated_hours, 1.0)
    return Expected(candidate, round(candidate.hourly_price * factor, 6), per_hour, refused)


def _ranked_by_price(candidates: Sequence[Candidate]) -> bool:
    costs = [c.hourly_price * c.num_nodes for c in candidates]
    return all(a <= b + 1e-9 for a, b in itertools.pairwise(costs))


def _why(one: Expected) -> str:
    said = []
    if one.preemptions_per_spot_hour:
        said.append(f"{one.preemptions_per_spot_hour:.2f} preemptions per spot-hour")
    if one.refusal_rate:
        said.append(f"{100 * one.refusal_rate:.0f} % of launches refused")
    return ", ".join(said)


def weigh_by_scorecard(
    candidates: Sequence[Candidate], lines: Iterable[PlaceRecord], *, objective: str, days: int
) -> tuple[list[Candidate], list[str]]:
    """The candidates by expected price (stable), and the notes a plan shows; unchanged (no note) when the
    prior moves nothing."""
    if objective != "cost" or len(candidates) < 2 or not _ranked_by_price(candidates):
        return list(candidates), []
    by_place = {line.key: line for line in lines}
    weighed = [
        expected_price(c, by_place.get((c.cloud, c.region, instance_family_of(c.instance_type))))
        for c in candidates
    ]
    ordered = sorted(weighed, key=lambda e: e.hourly * e.candidate.num_nodes)
    if [e.candidate for e in ordered] == list(candidates):
        return list(candidates), []
    notes = []
    for one in [e for e in weighed if e.factor > 1.0][:NOTED_PLACES]:
        c = one.candidate
        market = " (spot)" if c.use_spot else ""
        notes.append(
            f"reliability prior (the provider scorecard of the last {days} days, opt-in): {c.place} "
            f"{c.instance_type}{market} at ${c.hourly_price:.4f}/h is expected at ${one.hourly:.4f}/h "
            f"({_why(one)})"
        )
    top = ordered[0].candidate
    notes.append(f"reliability prior: chose {top.place} {top.instance_type} at ${top.hourly_price:.4f}/h")
    return [e.candidate for e in ordered], notes
