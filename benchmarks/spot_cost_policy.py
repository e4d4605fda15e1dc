"""A deadline policy that compares expected costs instead of following fixed rules: an experiment of
issue 18, not the product's policy (`shared.spot_policy.decide`), which it did not beat (README, "Deadlines").
Run it with `benchmarks/spot_gap.py --policy expected-cost` (replay against the best schedule) or
`benchmarks/spot_policy.py --control-plane --policy expected-cost` (through the handlers).

At each decision a small dynamic program values every state (work left, slack left, running spot /
on-demand / nothing, spot up / down) on a coarse grid, spot being a two-state process whose mean run and
outage are what `SpotHistory` has learned so far (the same estimates `decide` uses), each step's change
of state memoryless, every launch charged its restart overhead in slack and money. The decision is the
action of least expected cost from the job's state. `decide`'s safety net stays the hard floor: at or
below it the job runs on-demand to the end, and the program values every state under it as that.
The table depends on the job only through its size and the learned means (bucketed), so one table
serves many decisions (`lru_cache`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache

from shared.spot_policy import deadline_policy as rules
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

STEP = 3600.0  # seconds of work per grid step
SLACK_STEP = 1800.0  # seconds of slack per grid step
_BUCKETS = 4  # learned means are rounded to 2^(1/4) steps so tables are shared
_INF = math.inf
FIRST_TROUBLED = True  # the first run at a place of a region that just lost spot is expected short

# modes
_NONE, _OD, _SPOT = 0, 1, 2


def decide_cost(
    job: DeadlineState,
    places: Sequence[PlaceOption],
    history: Mapping[str, SpotHistory] | None = None,
    config: rules.PolicyConfig = rules.DEFAULT_CONFIG,
) -> Decision:
    history = history or {}
    spot = [p for p in places if p.spot_price is not None]
    on_demand = rules._on_demand_place(job, places)
    if on_demand is None or not spot:
        return rules.decide(job, places, history, config)
    d = job.restart_overhead
    net = d + config.reaction
    slack = job.slack
    if rules._running_spot(job, spot):
        assert job.current is not None
        return UseSpot(
            job.current.place, "spot is running; a running cluster is not moved", rules._net_time(job, net)
        )
    if slack <= net:
        return UseOnDemand(on_demand.place, "safety net: slack covers only one more restart")
    ready = rules._ranked_spot(job, spot, history, config)
    troubled = rules._troubled_regions(job, spot, history, config)
    run = max(rules._expected_run(p, history, config) for p in spot)  # what later runs may expect
    first_run = (
        rules._expected_run(ready[0], history, config, troubled if FIRST_TROUBLED else frozenset())
        if ready
        else run
    )
    outage = _outage(job, spot, history, config)
    od_price = on_demand.on_demand_price
    sp_price = (ready[0] if ready else min(spot, key=lambda p: p.spot_price or 0.0)).spot_price
    assert od_price is not None and sp_price is not None
    table = _table(
        _size(job.total_work, STEP) + 1,
        _size(max(job.deadline - job.submitted_at - job.total_work, slack), SLACK_STEP) + 2,
        _bucket(run),
        _bucket(outage),
        round(d),
        round(net),
        round(sp_price / od_price, 3),
    )
    mode = _NONE
    if job.current is not None:
        mode = _OD if job.current.market is Market.ON_DEMAND else _SPOT
    costs = table._q(job.work_left / STEP, slack, mode, int(bool(ready)), math.exp(-STEP / first_run))
    best = min(costs, key=lambda a: costs[a])
    if best == "spot":
        assert ready
        return UseSpot(ready[0].place, f"spot: the least expected cost ({_fmt(costs)})")
    if best == "od":
        return UseOnDemand(
            on_demand.place, f"on-demand: the least expected cost ({_fmt(costs)})", job.now + config.retry
        )
    if slack - min(config.retry, slack) > net + d:
        return Wait(
            job.now + min(config.retry, slack - net - d), f"waiting: the least expected cost ({_fmt(costs)})"
        )
    return UseOnDemand(on_demand.place, "on-demand: too little slack to wait", job.now + config.retry)


def _outage(
    job: DeadlineState,
    spot: Sequence[PlaceOption],
    history: Mapping[str, SpotHistory],
    config: rules.PolicyConfig,
) -> float:
    return rules._expected_outage(job, spot, history, config)


def _fmt(costs: Mapping[str, float]) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in costs.items())


def _size(seconds: float, step: float) -> int:
    return max(1, math.ceil(seconds / step - 1e-9))


def _bucket(seconds: float) -> float:
    return 2 ** (round(math.log2(max(seconds, 60.0)) * _BUCKETS) / _BUCKETS)


class _Table:
    """V[mode][up][w][s] in on-demand hours; w in STEP units, s in SLACK_STEP units."""

    def __init__(self, works: int, slacks: int, run: float, outage: float, d: float, net: float, sp: float):
        self.works, self.slacks, self.d, self.net, self.sp = works, slacks, d, net, sp
        self.keep_up = math.exp(-STEP / run)  # spot stays up through a running step
        self.back_run = 1 - math.exp(-STEP / outage)  # spot comes back during a running step
        self.keep_up_idle = math.exp(-SLACK_STEP / run)
        self.back_idle = 1 - math.exp(-SLACK_STEP / outage)
        h = STEP / 3600
        self.h = h
        v = [[[[_INF] * slacks for _ in range(works)] for _ in range(2)] for _ in range(3)]
        self.v = v
        for w in range(works):
            for s in range(slacks):
                for up in (0, 1):
                    for mode in (_NONE, _OD, _SPOT):
                        if mode == _SPOT and not up:
                            continue
                        v[mode][up][w][s] = min(self._q(w, s * SLACK_STEP, mode, up).values())

    def at(self, mode: int, up: int, w: float, s: float) -> float:
        """V at real (work steps, slack seconds), bilinear; the safety net's on-demand run below `net`."""
        if w <= 0:
            return 0.0
        if s <= self.net:
            return w * self.h + (0.0 if mode == _OD else self.d / 3600)
        w = min(w, self.works - 1)
        x = min(s / SLACK_STEP, self.slacks - 1.0)
        w0, x0 = min(int(w), self.works - 2), min(int(x), self.slacks - 2)
        fw, fx = w - w0, x - x0
        grid = self.v[mode][up]

        def cell(i: int, j: int) -> float:
            return grid[i][j] if i > 0 else 0.0

        def row(i: int) -> float:
            return cell(i, x0) if fx < 1e-9 else cell(i, x0) * (1 - fx) + cell(i, x0 + 1) * fx

        return (
            row(w0) if fw < 1e-9 else row(w0 + 1) if fw > 1 - 1e-9 else row(w0) * (1 - fw) + row(w0 + 1) * fw
        )

    def _q(self, w: float, s: float, mode: int, up: int, first_keep: float | None = None) -> dict[str, float]:
        """Expected cost (on-demand hours) of each action from (w steps, s seconds of slack, mode, up)."""
        if w <= 0:
            return {"idle": 0.0}
        if s <= self.net:
            return {"od": w * self.h + (0.0 if mode == _OD else self.d / 3600)}
        out: dict[str, float] = {}
        step = min(1.0, w)
        h = self.h * step
        if mode == _SPOT:  # a running spot cluster is not moved
            nxt = w - step
            out["spot"] = (
                self.sp * h
                + self.keep_up * self.at(_SPOT, 1, nxt, s)
                + (1 - self.keep_up) * self.at(_NONE, 0, nxt, s)
            )
            return out
        restart = 0.0 if mode == _OD else self.d
        s_od = s - restart
        if s_od > 0:
            p_up = self.keep_up if up else self.back_run
            out["od"] = (
                restart / 3600
                + h
                + p_up * self.at(_OD, 1, w - step, s_od)
                + (1 - p_up) * self.at(_OD, 0, w - step, s_od)
            )
        if up and s - self.d > self.net:
            s_sp = s - self.d
            keep = self.keep_up if first_keep is None else first_keep
            out["spot"] = (
                self.sp * (self.d / 3600 + h)
                + keep * self.at(_SPOT, 1, w - step, s_sp)
                + (1 - keep) * self.at(_NONE, 0, w - step, s_sp)
            )
        s_idle = s - SLACK_STEP
        if s_idle > self.net and not (up and "spot" in out):  # idling beside spot capacity buys nothing
            p_up = self.keep_up_idle if up else self.back_idle
            out["idle"] = p_up * self.at(_NONE, 1, w, s_idle) + (1 - p_up) * self.at(_NONE, 0, w, s_idle)
        if not out:
            out["od"] = w * self.h + restart / 3600
        return {
            k: out[k] for k in ("spot", "idle", "od") if k in out
        }  # ties: the cheaper market, then waiting


@lru_cache(maxsize=64)
def _table(works: int, slacks: int, run: float, outage: float, d: float, net: float, sp: float) -> _Table:
    return _Table(works, slacks, run, outage, d, net, sp)
