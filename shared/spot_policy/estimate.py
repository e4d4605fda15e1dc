"""What a deadline job is expected to cost before it runs: the policy replayed over synthetic spot
availability (the product has no traces at run time). Each place alternates spot runs and outages of
random (exponential) length with the given means, independently of the others; on-demand always has
capacity. An estimate under those assumptions, not a promise; the deadline itself is kept either way."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from shared.spot_policy.deadline_policy import decide
from shared.spot_policy.job_state import PlaceOption
from shared.spot_policy.replay import AvailabilityTrace, Policy, replay

HOUR = 3600.0


@dataclass(frozen=True)
class Estimate:
    expected_cost: float  # dollars, mean over the runs
    on_demand_cost: float  # the whole job on the cheapest on-demand place, one launch
    spot_share: float  # of cluster hours, on spot
    restarts: float  # mean launches per run
    missed: int  # runs that ended after the deadline (0 when the plan has on-demand)
    runs: int
    mean_run_hours: float
    mean_outage_hours: float

    @property
    def ratio(self) -> float:
        return self.expected_cost / self.on_demand_cost if self.on_demand_cost else float("nan")


def estimate_cost(
    places: Sequence[PlaceOption],
    *,
    total_work: float,
    deadline_after: float,
    restart_overhead: float,
    mean_run: float = 4 * HOUR,
    mean_outage: float = 1 * HOUR,
    runs: int = 40,
    seed: int = 0,
    policy: Policy = decide,
) -> Estimate:
    """Mean cost of `policy` over `runs` synthetic futures (deterministic for a `seed`)."""
    on_demand = [p.on_demand_price for p in places if p.on_demand_price is not None]
    od_cost = min(on_demand) * (total_work + restart_overhead) / HOUR if on_demand else float("nan")
    gap = 300.0
    ticks = int((deadline_after + total_work) / gap) + 10
    rng = random.Random(seed)
    total = spot = busy = launches = 0.0
    missed = 0
    for _ in range(runs):
        traces = [
            AvailabilityTrace(p.place, gap, _alternating(rng, ticks, gap, mean_run, mean_outage))
            for p in places
        ]
        result = replay(policy, traces, places, start_tick=0, total_work=total_work,
                        deadline_after=deadline_after, restart_overhead=restart_overhead)  # fmt: skip
        total += result.cost
        spot += result.spot_seconds
        busy += result.spot_seconds + result.on_demand_seconds
        launches += result.restarts
        missed += int(result.missed)
    return Estimate(
        expected_cost=total / runs,
        on_demand_cost=od_cost,
        spot_share=spot / busy if busy else 0.0,
        restarts=launches / runs,
        missed=missed,
        runs=runs,
        mean_run_hours=mean_run / HOUR,
        mean_outage_hours=mean_outage / HOUR,
    )


def _alternating(
    rng: random.Random, ticks: int, gap: float, mean_up: float, mean_down: float
) -> tuple[bool, ...]:
    up = rng.random() < mean_up / (mean_up + mean_down)
    out: list[bool] = []
    while len(out) < ticks:
        length = max(1, round(rng.expovariate(1.0 / (mean_up if up else mean_down)) / gap))
        out += [up] * length
        up = not up
    return tuple(out[:ticks])
