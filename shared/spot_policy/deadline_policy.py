"""The deadline policy: spot wherever the plan allows while the deadline is safe, on-demand when it must.

Thresholds on the job's slack (time to the deadline that the work does not need) decide:

- **safety net** `net = restart_overhead + reaction`: at or below it the job runs on-demand to the end,
  since one more restart is all the slack still covers;
- **reserve** `net + rate * work_left`: the slack the rest of the job is expected to spend on restarts
  and outages. `rate` is the smaller of what the places' history predicts and the job's own starting
  slack per hour of work (Uniform Progress's pace), so a job never plans to spend slack faster than evenly.
  With spot in several regions the share of that pace is larger: a preemption there is followed by a
  restart elsewhere rather than a wait, so the rest of the job pays more restarts (on the 16-node traces
  of "Can't Be Late" this and the short runs expected of a region that just lost spot, when leaving
  on-demand, take 3 zones from 1.26x to 1.14x the best possible over 10 starts; one zone is unchanged).
  With no spot anywhere, the job runs on-demand only if waiting out the outage (expected to last as long
  again as it has) would eat into the reserve and the outage outlasts an on-demand restart; otherwise
  it waits. With one place it waits too when on-demand, once started, could not be left in the first
  half of the remaining work: those on-demand hours are paid as well by going at the net, as greedy
  does, and waiting keeps the chance that spot comes back first;
- **hysteresis**: a running cluster is never moved; on-demand is left for spot only with two restarts of
  slack above the net and when the place's expected spot run saves more than the restarts cost (counting,
  when the job is behind its reserve, the slack they spend as future on-demand hours).

Every spot place of the plan is a candidate; they are tried best first (expected price per useful hour,
from the price and the expected run length of `SpotHistory`, shorter for an hour in a region that just
lost capacity, since its zones fail together), skipping places refused moments ago.
The caller launches the answer; a refused launch is recorded in the history and the policy asked again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from shared.spot_policy.job_state import (
    DeadlineState,
    Decision,
    Market,
    PlaceOption,
    UseOnDemand,
    UseSpot,
    Wait,
)
from shared.spot_policy.spot_history import SpotHistory

HOUR = 3600.0
_NO_HISTORY = SpotHistory()


@dataclass(frozen=True)
class PolicyConfig:
    reaction: float = 300.0  # seconds the control plane may take to act on an event; kept spare by the net
    retry: float = 300.0  # a place refused capacity is tried again after this long
    prior_run: float = 4 * HOUR  # expected spot run at a place with no history
    prior_weight: float = 1.0  # how many runs that prior counts for
    outage: float = 0.5 * HOUR  # expected outage of spot at one place
    outage_restarts: float = 1.0  # on-demand in an outage only if it should outlast this many restarts
    pace_share: float = 0.4  # the reserve never asks for more than this share of the job's even pace
    pace_share_regions: float = 0.8  # the same with spot in several regions (more restarts to cover)
    leave_restarts: float = 2.0  # on-demand is left for spot with this many restarts of slack to spare
    one_way_share: float = 0.5  # one place: on-demand before the net only if it can be left this early
    region_window: float = 1 * HOUR  # after a preemption or refusal in a region, its other places are
    region_penalty: float = 3.0  # expected to run this many times shorter for this long (they fail together)


DEFAULT_CONFIG = PolicyConfig()


def decide(
    job: DeadlineState,
    places: Sequence[PlaceOption],
    history: Mapping[str, SpotHistory] | None = None,
    config: PolicyConfig = DEFAULT_CONFIG,
) -> Decision:
    """Spot at a place, on-demand at a place, or wait until a time; only places of `places` are named.

    Pure: the same inputs give the same decision. `history` maps places to what is known of their spot
    capacity (absent places: nothing known). Raises ValueError when `places` offers no market at all."""
    history = history or {}
    spot = [p for p in places if p.spot_price is not None]
    on_demand = _on_demand_place(job, places)
    if on_demand is None:
        if not spot:
            raise ValueError("no place of the plan offers spot or on-demand")
        return _spot_only(job, spot, history, config)
    if not spot:
        return UseOnDemand(on_demand.place, "the plan has no spot place")

    d = job.restart_overhead
    net = d + config.reaction
    slack = job.slack
    if _running_spot(job, spot):
        assert job.current is not None
        return UseSpot(
            job.current.place, "spot is running; a running cluster is not moved", _net_time(job, net)
        )
    if slack <= net:
        return UseOnDemand(
            on_demand.place, f"safety net: {_hours(slack)} of slack covers only one more restart"
        )

    reserve = net + _reserve_rate(job, spot, history, config) * job.work_left
    ready = _ranked_spot(job, spot, history, config)
    if job.current is not None and job.current.market is Market.ON_DEMAND:
        behind = slack < reserve + config.leave_restarts * d
        # With one place, a preemption means an outage and on-demand again: leave only when ahead.
        # With several, another place likely has capacity: leave when the run pays back its restarts.
        if (
            ready
            and slack >= net + 2 * d
            and (
                not behind
                or (len(spot) > 1 and _pays_back(job, ready[0], on_demand, spot, history, config, True))
            )
        ):
            return UseSpot(ready[0].place, f"{_hours(slack)} of slack allows spot again")
        why = "the slack is too close to the reserve to risk spot" if behind else "no spot capacity"
        return UseOnDemand(on_demand.place, f"on-demand: {why}", job.now + config.retry)

    if ready and slack - d >= net:
        return UseSpot(ready[0].place, f"spot; {_hours(slack)} of slack")
    outage = _expected_outage(job, spot, history, config)
    # On-demand saves slack only if the outage outlasts its restart overhead; it never saves money.
    on_demand_pays = outage > config.outage_restarts * d and slack - outage < reserve
    # With one place, on-demand that would hold the job for most of its work is taken at the net, as greedy.
    one_way = on_demand_pays and len(spot) == 1 and _stuck_on_demand(job, slack - d, net, reserve, config)
    if one_way or not on_demand_pays:
        if slack - min(config.retry, slack) <= net + d:
            why = f"one more wait would cross the safety net ({_hours(slack)} of slack)"
            return UseOnDemand(on_demand.place, f"no spot capacity; {why}", job.now + config.retry)
        until = job.now + min(config.retry, slack - net - d)
        if one_way:
            why = "on-demand now would hold the job for most of its work; waiting for spot until the net"
            return Wait(until, f"no spot capacity; {why} ({_hours(slack)} of slack)")
        return Wait(until, f"no spot capacity; waiting ({_hours(slack)} of slack)")
    return UseOnDemand(
        on_demand.place,
        f"no spot capacity; waiting out the outage (~{_hours(outage)}) would leave less than the "
        f"{_hours(reserve)} of slack the rest may need",
        job.now + config.retry,
    )


def _stuck_on_demand(
    job: DeadlineState, slack_after: float, net: float, reserve: float, config: PolicyConfig
) -> bool:
    """Whether on-demand, started now with `slack_after` of slack left, would hold the job past
    `one_way_share` of its remaining work. On on-demand the slack stays put while the reserve's part above
    the net shrinks in step with the work left; the job may leave once its slack clears the reserve by
    `leave_restarts` restarts. Until then it pays on-demand hours it would pay as well by waiting and going
    on-demand at the safety net, and waiting keeps the chance that spot comes back first."""
    room = slack_after - net - config.leave_restarts * job.restart_overhead
    return room < config.one_way_share * (reserve - net)


def _on_demand_place(job: DeadlineState, places: Sequence[PlaceOption]) -> PlaceOption | None:
    """The cheapest on-demand place; the current one when it is among the cheapest (no move for nothing)."""
    offered = [p for p in places if p.on_demand_price is not None]
    if not offered:
        return None
    cheapest = min(p.on_demand_price for p in offered if p.on_demand_price is not None)
    current = job.current
    if current is not None and current.market is Market.ON_DEMAND:
        for option in offered:
            if option.place == current.place and option.on_demand_price == cheapest:
                return option
    return next(p for p in offered if p.on_demand_price == cheapest)


def _running_spot(job: DeadlineState, spot: Sequence[PlaceOption]) -> bool:
    current = job.current
    return (
        current is not None and current.market is Market.SPOT and any(p.place == current.place for p in spot)
    )


def _net_time(job: DeadlineState, net: float) -> float | None:
    """While a spot cluster is still in its restart overhead the slack shrinks: the moment it would reach
    the safety net, if that comes before the overhead ends."""
    if job.overhead_left <= 0:
        return None
    hits_net = job.now + max(0.0, job.slack - net)
    return hits_net if hits_net < job.now + job.overhead_left else None


def _expected_run(
    option: PlaceOption,
    history: Mapping[str, SpotHistory],
    config: PolicyConfig,
    troubled: frozenset[str] = frozenset(),
) -> float:
    run = history.get(option.place, _NO_HISTORY).mean_run(config.prior_run, config.prior_weight)
    return run / config.region_penalty if option.group in troubled else run


def _troubled_regions(
    job: DeadlineState, spot: Sequence[PlaceOption], history: Mapping[str, SpotHistory], config: PolicyConfig
) -> frozenset[str]:
    """Regions (place groups) where spot was taken away or refused within `region_window`."""
    troubled = set()
    for option in spot:
        seen = history.get(option.place, _NO_HISTORY).last_unavailable
        if seen is not None and job.now - seen < config.region_window:
            troubled.add(option.group)
    return frozenset(troubled)


def _ranked_spot(
    job: DeadlineState, spot: Sequence[PlaceOption], history: Mapping[str, SpotHistory], config: PolicyConfig
) -> list[PlaceOption]:
    """Spot places not refused moments ago, best first: the lowest expected price per useful hour (a run
    of the expected length loses one restart overhead), then the plan's order."""
    ready = [p for p in spot if not history.get(p.place, _NO_HISTORY).unavailable_at(job.now, config.retry)]
    troubled = _troubled_regions(job, spot, history, config)

    def expected_price(option: PlaceOption) -> float:
        run = _expected_run(option, history, config, troubled)
        assert option.spot_price is not None
        return option.spot_price * (run + job.restart_overhead) / max(run, 1.0)

    order = {p.place: i for i, p in enumerate(spot)}
    return sorted(ready, key=lambda p: (expected_price(p), order[p.place]))


def _reserve_rate(
    job: DeadlineState, spot: Sequence[PlaceOption], history: Mapping[str, SpotHistory], config: PolicyConfig
) -> float:
    """Slack the rest of the job is expected to spend per second of work: a restart (and, when every place
    may be down, an outage) per expected run of the best place; never more than the job's own pace."""
    best_run = max(max(_expected_run(p, history, config) for p in spot), 1.0)
    learned = (job.restart_overhead + _place_outage(spot, history, config)) / best_run
    total_slack = (job.deadline - job.submitted_at) - job.total_work
    pace = total_slack / job.total_work if job.total_work > 0 else learned
    share = config.pace_share_regions if len({p.group for p in spot}) > 1 else config.pace_share
    return min(learned, share * max(pace, 0.0))


def _pays_back(
    job: DeadlineState,
    option: PlaceOption,
    on_demand: PlaceOption,
    spot: Sequence[PlaceOption],
    history: Mapping[str, SpotHistory],
    config: PolicyConfig,
    behind: bool,
) -> bool:
    """Leaving on-demand for spot costs a restart on spot and, after the preemption, one more on
    on-demand; when the job is behind its reserve, the slack the restart spends will be made up on
    on-demand too. Worth it when the expected spot run saves more than that; a run in a region that just
    lost spot is expected to be short (its capacity flickers back before it holds)."""
    run = _expected_run(option, history, config, _troubled_regions(job, spot, history, config))
    od, sp = on_demand.on_demand_price, option.spot_price
    assert od is not None and sp is not None
    cost = (od + sp + (od - sp if behind else 0.0)) * job.restart_overhead
    return (od - sp) * min(run, job.work_left) > cost


def _expected_outage(
    job: DeadlineState, spot: Sequence[PlaceOption], history: Mapping[str, SpotHistory], config: PolicyConfig
) -> float:
    """How much longer no spot place is expected to have capacity: as long again as this outage has
    lasted (outages have long tails), and at least one place's typical outage (not the mean, which the
    rare long outages make) shared among the regions."""
    began = [history.get(p.place, _NO_HISTORY).down_since for p in spot]
    known = [b for b in began if b is not None]
    age = job.now - max(known) if len(known) == len(began) else 0.0
    return max(_place_outage(spot, history, config, typical=True), age)


def _place_outage(
    spot: Sequence[PlaceOption],
    history: Mapping[str, SpotHistory],
    config: PolicyConfig,
    typical: bool = False,
) -> float:
    """The expected wait for capacity at some place once every place is down: the shortest expected
    (or, with `typical`, typical) outage of one place, shared among the groups (regions) whose outages
    are independent. The places of one group fail together, so ten instance types in one region wait as
    long as one."""
    shortest = min(
        (h.typical_outage if typical else h.mean_outage)(config.outage, config.prior_weight)
        for h in (history.get(p.place, _NO_HISTORY) for p in spot)
    )
    return shortest / len({p.group for p in spot})


def _spot_only(
    job: DeadlineState, spot: Sequence[PlaceOption], history: Mapping[str, SpotHistory], config: PolicyConfig
) -> Decision:
    if _running_spot(job, spot):
        assert job.current is not None
        return UseSpot(job.current.place, "spot is running (the plan has no on-demand place: no safety net)")
    ready = _ranked_spot(job, spot, history, config)
    if ready:
        return UseSpot(ready[0].place, "spot (the plan has no on-demand place: no safety net)")
    return Wait(job.now + config.retry, "no spot capacity (the plan has no on-demand place: no safety net)")


def _hours(seconds: float) -> str:
    if abs(seconds) >= HOUR:
        return f"{seconds / HOUR:.1f} h"
    return f"{seconds / 60:.0f} min" if abs(seconds) >= 60 else f"{seconds:.0f} s"
