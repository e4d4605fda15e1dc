"""Replay a spot availability trace through a policy, the way the control plane would live it.

The model (the one "Can't Be Late" simulates): time moves in the trace's ticks; spot at a place can be
launched at a tick where it has capacity and runs until the first tick without; on-demand always has
capacity. Every launch costs `restart_overhead` seconds (paid, no progress); billing is per second of
every cluster. The policy is asked at the start, after each preemption, at the time it asked for, and
again at once after each refused launch (which is recorded in the history, as the control plane does).
Decisions take effect on tick boundaries (a later time is rounded up to the next one), so
`shared.spot_policy.optimal.optimal_cost` on the same trace is the least any policy can pay here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from shared.spot_policy.job_state import (
    DeadlineState,
    Decision,
    Market,
    Placement,
    PlaceOption,
    UseSpot,
    Wait,
    next_check,
)
from shared.spot_policy.spot_history import SpotHistory

Policy = Callable[[DeadlineState, Sequence[PlaceOption], Mapping[str, SpotHistory]], Decision]


class PolicyError(Exception):
    """The policy named a place or market that is not in the plan, or kept asking for refused places."""


@dataclass(frozen=True)
class AvailabilityTrace:
    """Spot capacity at one place, one sample per `gap` seconds from time 0 (True: has capacity). Past its
    end the trace starts over (a run that crosses the end is preempted there), so a policy that ignores
    the deadline still finishes."""

    place: str
    gap: float
    available: tuple[bool, ...]
    _next_down: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        down = [len(self.available)] * (len(self.available) + 1)
        for i in range(len(self.available) - 1, -1, -1):
            down[i] = i if not self.available[i] else down[i + 1]
        object.__setattr__(self, "_next_down", tuple(down))

    def up_at(self, tick: int) -> bool:
        return tick >= 0 and self.available[tick % len(self.available)]

    def next_down(self, tick: int) -> int:
        """The first tick at or after `tick` without capacity (the trace's end counts as one)."""
        laps, index = divmod(max(tick, 0), len(self.available))
        return laps * len(self.available) + self._next_down[index]


@dataclass(frozen=True)
class ReplayResult:
    cost: float  # dollars
    spot_seconds: float  # cluster time on spot (overheads included)
    on_demand_seconds: float
    restarts: int  # launches, the first included
    refused: int  # spot launches refused for lack of capacity
    finished_at: float
    deadline: float

    @property
    def missed(self) -> bool:
        return self.finished_at > self.deadline + 1e-6


def replay(
    policy: Policy,
    traces: Sequence[AvailabilityTrace],
    places: Sequence[PlaceOption],
    *,
    start_tick: int,
    total_work: float,
    deadline_after: float,
    restart_overhead: float,
    history: Mapping[str, SpotHistory] | None = None,
) -> ReplayResult:
    """One job from `start_tick`: `total_work` seconds of compute due `deadline_after` seconds later.
    Every place of `places` with a spot price needs a trace. Raises PolicyError for a decision the plan
    does not allow. A job that misses its deadline is still run to its end (the policy decides how)."""
    gap = traces[0].gap
    if any(t.gap != gap for t in traces):
        raise ValueError("all traces must have the same gap")
    by_place = {t.place: t for t in traces}
    options = {p.place: p for p in places}
    for option in places:
        if option.spot_price is not None and option.place not in by_place:
            raise ValueError(f"no trace for the spot place {option.place}")
    run = _Run(
        policy=policy,
        by_place=by_place,
        places=tuple(places),
        options=options,
        gap=gap,
        start=start_tick * gap,
        deadline=start_tick * gap + deadline_after,
        total_work=total_work,
        overhead=restart_overhead,
        history=dict(history or {}),
    )
    return run.play()


@dataclass
class _Run:
    policy: Policy
    by_place: Mapping[str, AvailabilityTrace]
    places: tuple[PlaceOption, ...]
    options: Mapping[str, PlaceOption]
    gap: float
    start: float
    deadline: float
    total_work: float
    overhead: float
    history: dict[str, SpotHistory]
    cost: float = 0.0
    spot_seconds: float = 0.0
    on_demand_seconds: float = 0.0
    restarts: int = 0
    refused: int = 0

    def play(self) -> ReplayResult:
        now = self.start
        work_left = self.total_work
        current: Placement | None = None
        limit = self.deadline + 1000 * (self.total_work + self.gap)
        while True:
            decision, current = self._act(now, work_left, current)
            check = next_check(decision)
            wake = self._tick_after(now) if check is None else self._tick_at_or_after(max(check, now))
            if wake <= now:
                wake = self._tick_after(now)
            if current is None:
                now = wake
                if now > limit:
                    raise PolicyError("the job never finished")
                continue
            productive_from = current.started_at + self.overhead
            finish = max(now, productive_from) + work_left
            end = min(wake, finish)
            preempted_at = None
            if current.market is Market.SPOT:
                trace = self.by_place[current.place]
                down = self._time_of(trace.next_down(self._tick_of(now)))
                if down < end:
                    end = preempted_at = down
            self._bill(current, now, end)
            work_left -= max(0.0, end - max(now, productive_from))
            if end >= finish:
                self._ended(current, end, preempted=False)
                return self._result(end)
            if preempted_at is not None:
                self._ended(current, end, preempted=True)
                current = None
            now = end

    def _act(
        self, now: float, work_left: float, current: Placement | None
    ) -> tuple[Decision, Placement | None]:
        """Ask the policy and carry out its answer; refused spot launches are asked about again."""
        for _ in range(2 * len(self.places) + 2):
            state = DeadlineState(
                now=now,
                deadline=self.deadline,
                work_left=max(work_left, 0.0),
                restart_overhead=self.overhead,
                total_work=self.total_work,
                submitted_at=self.start,
                current=current,
            )
            decision = self.policy(state, self.places, self.history)
            if isinstance(decision, Wait):
                if current is not None:
                    self._ended(current, now, preempted=False)
                return decision, None
            market = Market.SPOT if isinstance(decision, UseSpot) else Market.ON_DEMAND
            option = self.options.get(decision.place)
            price = (
                None
                if option is None
                else option.spot_price
                if market is Market.SPOT
                else option.on_demand_price
            )
            if price is None:
                raise PolicyError(f"{market} at {decision.place} is not in the plan")
            if current is not None and current.place == decision.place and current.market is market:
                return decision, current
            if isinstance(decision, UseSpot) and not self.by_place[decision.place].up_at(self._tick_of(now)):
                self.refused += 1
                self.history[decision.place] = self.history.get(decision.place, SpotHistory()).refused(now)
                continue
            if current is not None:
                self._ended(current, now, preempted=False)
            if isinstance(decision, UseSpot):
                self.history[decision.place] = self.history.get(decision.place, SpotHistory()).launched(now)
            self.restarts += 1
            return decision, Placement(decision.place, market, now)
        raise PolicyError(f"the policy kept asking for refused places at t={now}")

    def _ended(self, cluster: Placement, at: float, *, preempted: bool) -> None:
        if cluster.market is Market.SPOT:
            old = self.history.get(cluster.place, SpotHistory())
            self.history[cluster.place] = old.ran(cluster.started_at, at, preempted=preempted)

    def _bill(self, cluster: Placement, start: float, end: float) -> None:
        option = self.options[cluster.place]
        seconds = end - start
        if cluster.market is Market.SPOT:
            self.spot_seconds += seconds
            self.cost += (option.spot_price or 0.0) * seconds / 3600
        else:
            self.on_demand_seconds += seconds
            self.cost += (option.on_demand_price or 0.0) * seconds / 3600

    def _result(self, finished_at: float) -> ReplayResult:
        return ReplayResult(
            cost=self.cost,
            spot_seconds=self.spot_seconds,
            on_demand_seconds=self.on_demand_seconds,
            restarts=self.restarts,
            refused=self.refused,
            finished_at=finished_at,
            deadline=self.deadline,
        )

    def _tick_of(self, at: float) -> int:
        return math.floor(at / self.gap + 1e-9)

    def _time_of(self, tick: int) -> float:
        return tick * self.gap

    def _tick_at_or_after(self, at: float) -> float:
        return math.ceil(at / self.gap - 1e-9) * self.gap

    def _tick_after(self, at: float) -> float:
        return (self._tick_of(at) + 1) * self.gap
