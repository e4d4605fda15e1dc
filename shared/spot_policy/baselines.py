"""The two baselines of "Can't Be Late" (Wu et al., NSDI '24), with the same inputs and answers as
`decide`, so the benchmark can replay all three through the same code.

- **Greedy**: spot whenever a place has capacity, otherwise wait; on-demand from the moment the slack
  only covers one more restart, and to the end.
- **Uniform Progress** (the paper's rules, single place): expected progress grows evenly to the deadline,
  ep(t) = total_work * elapsed / window. (1) Idle and behind ep(t): on-demand, to catch up. (2) Taking
  risks: spot whenever it has capacity, kept until preempted. (3) Hysteresis: on on-demand, stay until
  progress >= ep(t + 2d). (4) Safety net: idle with slack < 2d: on-demand to the end.

And, for what a deadline is worth, **spot only**: SkyPilot's managed spot recovery (EAGER_NEXT_REGION),
which knows no deadline: spot, and after a preemption spot again at the next place of the plan that has
capacity, waiting while none has.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from shared.spot_policy.deadline_policy import DEFAULT_CONFIG, PolicyConfig
from shared.spot_policy.job_state import (
    DeadlineState,
    Decision,
    Market,
    Placement,
    PlaceOption,
    UseOnDemand,
    UseSpot,
    Wait,
)
from shared.spot_policy.spot_history import SpotHistory

_NO_HISTORY = SpotHistory()


def decide_greedy(
    job: DeadlineState,
    places: Sequence[PlaceOption],
    history: Mapping[str, SpotHistory] | None = None,
    config: PolicyConfig = DEFAULT_CONFIG,
) -> Decision:
    history = history or {}
    on_demand = _cheapest_on_demand(places)
    net = job.restart_overhead + config.reaction
    current = _still_offered(job, places)
    if current is not None and current.market is Market.ON_DEMAND:
        return UseOnDemand(current.place, "greedy: on-demand to the end")
    if current is not None and current.market is Market.SPOT:
        return UseSpot(current.place, "greedy: spot is running")
    if job.slack <= net + job.restart_overhead:
        return UseOnDemand(on_demand.place, "greedy: the slack covers only one more restart")
    ready = _ready_spot(job, places, history, config)
    if ready:
        return UseSpot(ready[0].place, "greedy: spot has capacity")
    until = job.now + min(config.retry, job.slack - net - job.restart_overhead)
    return Wait(until, "greedy: waiting for spot")


def decide_uniform_progress(
    job: DeadlineState,
    places: Sequence[PlaceOption],
    history: Mapping[str, SpotHistory] | None = None,
    config: PolicyConfig = DEFAULT_CONFIG,
) -> Decision:
    history = history or {}
    on_demand = _cheapest_on_demand(places)
    d = job.restart_overhead
    current = _still_offered(job, places)
    window = job.deadline - job.submitted_at
    done = job.total_work - job.work_left

    def expected(at: float) -> float:
        return job.total_work * (at - job.submitted_at) / window

    if current is not None and current.market is Market.SPOT:
        return UseSpot(current.place, "uniform progress: spot is running")
    ready = _ready_spot(job, places, history, config)
    if current is not None and current.market is Market.ON_DEMAND:
        # The safety net holds once the slack is too small to leave on-demand and come back.
        if job.slack <= 2 * d + config.reaction or done < expected(job.now + 2 * d):
            return UseOnDemand(
                current.place, "uniform progress: on-demand until ahead", job.now + config.retry
            )
        if ready:
            return UseSpot(ready[0].place, "uniform progress: ahead; spot has capacity")
        return Wait(_ahead_until(job, d, config), "uniform progress: ahead; waiting for spot")
    if job.slack < 2 * d + config.reaction:
        return UseOnDemand(on_demand.place, "uniform progress: safety net")
    if ready:
        return UseSpot(ready[0].place, "uniform progress: spot has capacity")
    if done < expected(job.now):
        return UseOnDemand(on_demand.place, "uniform progress: behind; on-demand", job.now + config.retry)
    return Wait(_ahead_until(job, d, config), "uniform progress: ahead; waiting for spot")


def _ahead_until(job: DeadlineState, d: float, config: PolicyConfig) -> float:
    """How long a job ahead of even progress waits for spot: a retry, and never past the moment it falls
    behind or its slack reaches the safety net (left on-demand with the net near, a whole retry's wait
    could pass the net and the deadline)."""
    window = job.deadline - job.submitted_at
    done = job.total_work - job.work_left
    behind_at = job.submitted_at + done * window / job.total_work if job.total_work > 0 else job.deadline
    net_at = job.now + job.slack - 2 * d - config.reaction
    return max(min(job.now + config.retry, max(behind_at, job.now), net_at), job.now)


def decide_spot_only(
    job: DeadlineState,
    places: Sequence[PlaceOption],
    history: Mapping[str, SpotHistory] | None = None,
    config: PolicyConfig = DEFAULT_CONFIG,
) -> Decision:
    history = history or {}
    current = _still_offered(job, places)
    if current is not None and current.market is Market.SPOT:
        return UseSpot(current.place, "spot only: spot is running")
    ready = _ready_spot(job, places, history, config)
    if ready:
        return UseSpot(ready[0].place, "spot only: the next place with capacity")
    return Wait(job.now + config.retry, "spot only: waiting for spot")


def _still_offered(job: DeadlineState, places: Sequence[PlaceOption]) -> Placement | None:
    """The current cluster, if the plan still offers its market at its place."""
    current = job.current
    if current is None:
        return None
    for option in places:
        price = option.spot_price if current.market is Market.SPOT else option.on_demand_price
        if option.place == current.place and price is not None:
            return current
    return None


def _cheapest_on_demand(places: Sequence[PlaceOption]) -> PlaceOption:
    offered = [p for p in places if p.on_demand_price is not None]
    if not offered:
        raise ValueError("the baselines need an on-demand place")
    return min(offered, key=lambda p: p.on_demand_price or 0.0)


def _ready_spot(
    job: DeadlineState,
    places: Sequence[PlaceOption],
    history: Mapping[str, SpotHistory],
    config: PolicyConfig,
) -> list[PlaceOption]:
    return [
        p
        for p in places
        if p.spot_price is not None
        and not history.get(p.place, _NO_HISTORY).unavailable_at(job.now, config.retry)
    ]
