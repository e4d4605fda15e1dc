"""Where a deadline job's money goes against the best possible schedule, per start point.

Usage: .venv/bin/python benchmarks/spot_gap.py [--trace FILE ...] [--nodes 16] [--work-hours 48]
           [--deadline-hours D] [--restart-hours 0.2] [--starts 5 | --start-hours LIST]
           [--policy skyless|expected-cost|uniform-progress|greedy]   (the policy replayed, told and not)

Default: the 16-node traces of "Can't Be Late" (3 zones in 2 regions), 16 nodes all or nothing, 48 h of
work due in 60 h, restart 0.2 h: the setting where skyless is farthest from the best possible (issue 18).
For each start point, replayed through the product's `decide` (`shared.spot_policy.replay`) beside the
best possible schedule (the dynamic program of `shared.spot_policy.optimal`, here keeping each label's
schedule): cost relative to all on-demand, on-demand hours, spot hours, launches and the slack left unused
at the end. Then the same replay with oracles: the history the policy is given says, for each place with
capacity at the moment, that its spot run will last exactly as long as the trace says ("runs told") and,
also, with no capacity anywhere, that the outage ends exactly when the trace says ("+outages"); everything
else the policy sees is unchanged. The distance from an oracle to skyless is what better estimates alone
could recover; the oracle's own distance to the best is what the policy's rules lose even knowing them.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

from spot_peers import PEERS  # noqa: E402
from trace_cloud import ZoneTrace, load_zone_trace  # noqa: E402

from shared.spot_policy import (  # noqa: E402
    AvailabilityTrace,
    DeadlineState,
    Decision,
    PlaceOption,
    Policy,
    SpotHistory,
    decide,
    optimal_cost,
    replay,
)
from shared.spot_policy.deadline_policy import DEFAULT_CONFIG  # noqa: E402

HOUR = 3600.0
Label = tuple[float, float, Any]  # progress seconds, dollars, schedule: (tick, mode, previous) or None
DEFAULT_TRACES = ROOT.parent / "shared" / "spot-traces" / "availability" / "16-node" / "aws-08-27-2023"


@dataclass
class Schedule:
    cost: float  # relative to all on-demand
    on_demand_hours: float  # cluster hours, restart overheads included
    spot_hours: float
    launches: int
    unused_hours: float  # slack left at the end: the deadline less the finish


def availability(trace: ZoneTrace, nodes: int) -> AvailabilityTrace:
    return AvailabilityTrace(
        trace.zone, trace.gap, tuple(trace.spot_for(nodes, i) for i in range(len(trace.counts)))
    )


def best_schedule(
    traces: Sequence[AvailabilityTrace],
    places: Sequence[PlaceOption],
    *,
    start_tick: int,
    total_work: float,
    deadline_after: float,
    restart_overhead: float,
) -> tuple[float, list[tuple[float, str]]]:
    """`shared.spot_policy.optimal_cost`'s program, each label carrying its schedule: the least cost and
    the (tick, mode) steps of a schedule that pays it; mode is "idle", "od", a place, or "end" (whose
    tick is fractional: the finish)."""
    gap = traces[0].gap
    by_place = {t.place: t for t in traces}
    spot = [(p.place, (p.spot_price or 0.0) / HOUR) for p in places if p.spot_price is not None]
    od = min(p.on_demand_price for p in places if p.on_demand_price is not None) / HOUR
    cheapest = min([price for _, price in spot] + [od])
    work, overhead = total_work, restart_overhead
    best, best_path = math.inf, None

    def front(labels: list[Label]) -> list[Label]:
        labels.sort(key=lambda label: (-label[0], label[1]))
        kept: list[Label] = []
        lowest = math.inf
        for label in labels:
            adjusted = label[1] - cheapest * label[0]
            if adjusted < lowest - 1e-12:
                kept.append(label)
                lowest = adjusted
        return kept

    def advance(labels: list[Label], price: float, length: float, k: int) -> list[Label]:
        nonlocal best, best_path
        moved = []
        for p, c, path in labels:
            if work - p <= length + 1e-9:
                if c + price * max(0.0, work - p) < best:
                    finish = k * gap + max(0.0, work - p)  # seconds after the start
                    best, best_path = c + price * max(0.0, work - p), (finish / gap, "end", path)
            elif length >= gap:
                moved.append((p + gap, c + price * gap, path))
        return moved

    idle: list[Label] = [(0.0, 0.0, None)]
    on_demand: list[Label] = []
    on_spot: list[list[Label]] = [[] for _ in spot]
    for k in range(math.ceil(deadline_after / gap - 1e-9)):
        remaining = deadline_after - k * gap
        stopped = [(p, c, (k, "idle", path)) for p, c, path in on_demand]
        stopped += [(p, c, (k, "idle", path)) for labels in on_spot for p, c, path in labels]
        idle = [
            lb for lb in front(idle + stopped) if work - lb[0] + overhead <= remaining + 1e-9 and lb[1] < best
        ]
        launched = [(p - overhead, c, path) for p, c, path in idle]
        fresh = [(p, c, (k, "od", path)) for p, c, path in launched]
        on_demand = advance(front(on_demand + fresh), od, min(gap, remaining), k)
        for i, (place, price) in enumerate(spot):
            if by_place[place].up_at(start_tick + k):
                fresh = [(p, c, (k, place, path)) for p, c, path in launched]
                on_spot[i] = advance(front(on_spot[i] + fresh), price, min(gap, remaining), k)
            else:
                on_spot[i] = []
        left = remaining - gap
        on_demand = [lb for lb in on_demand if work - lb[0] <= left + 1e-9 and lb[1] < best]
        on_spot = [
            [lb for lb in labels if work - lb[0] <= left + 1e-9 and lb[1] < best] for labels in on_spot
        ]
    steps: list[tuple[float, str]] = []
    node = best_path
    while node is not None:
        steps.append((node[0], node[1]))
        node = node[2]
    return best, steps[::-1]


def summarize_steps(
    steps: list[tuple[float, str]], gap: float, deadline_after: float
) -> tuple[float, float, int, float]:
    """On-demand hours, spot hours, launches and unused hours of a best schedule's steps."""
    od = spot = 0.0
    launches = 0
    for (k, mode), (k_next, _) in itertools.pairwise(steps):
        if mode == "idle":
            continue
        launches += 1
        hours = (k_next - k) * gap / HOUR
        if mode == "od":
            od += hours
        else:
            spot += hours
    end = steps[-1][0] * gap if steps else 0.0
    return od, spot, launches, max(0.0, deadline_after - end) / HOUR


def oracle(traces: Sequence[AvailabilityTrace], *, outages: bool, policy_told: Policy = decide) -> Policy:
    """`policy_told` (skyless's `decide` unless said), given a history in which every place with capacity
    now is expected to run exactly as long as its trace says (the mean run of `SpotHistory` set to it)
    and, with `outages`, when no place has capacity, the outage is expected to last exactly until the
    first place has it again (the mean and the typical outage set to it, the outage's age hidden); nothing
    else the policy sees is changed."""
    by_place = {t.place: t for t in traces}
    gap = traces[0].gap
    config = DEFAULT_CONFIG
    weight = config.prior_weight

    def policy(
        job: DeadlineState, places: Sequence[PlaceOption], history: Mapping[str, SpotHistory]
    ) -> Decision:
        tick = math.floor(job.now / gap + 1e-9)
        told = dict(history)
        spot = [p for p in places if p.spot_price is not None and p.place in by_place]
        up = [p for p in spot if by_place[p.place].up_at(tick)]
        for option in up:
            trace = by_place[option.place]
            run = (trace.next_down(tick) - tick) * gap
            known = told.get(option.place, SpotHistory())
            seconds = run * (known.interruptions + weight) - config.prior_run * weight  # mean_run() == run
            told[option.place] = dataclasses.replace(known, up_seconds=seconds, capacity_score=None)
        if outages and spot and not up:
            back = min(_next_up(by_place[p.place], tick) for p in spot)
            wait = (back - tick) * gap * len({p.group for p in spot})  # shared among the regions
            for option in spot:
                known = told.get(option.place, SpotHistory())
                seconds = wait * (known.outages + weight) - config.outage * weight  # mean_outage() == wait
                logs = (
                    math.log(max(wait, 1.0)) * (known.logged_outages + weight)
                    - math.log(config.outage) * weight
                )
                told[option.place] = dataclasses.replace(  # and typical_outage() == wait
                    known, outage_seconds=seconds, outage_log_seconds=logs, down_since=None
                )
        return policy_told(job, places, told)

    return policy


def _next_up(trace: AvailabilityTrace, tick: int) -> int:
    k = tick
    while not trace.up_at(k) and k < tick + len(trace.available):
        k += 1
    return k


def _row(schedule: Schedule) -> dict[str, float]:
    return {k: round(v, 4) for k, v in dataclasses.asdict(schedule).items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trace", type=Path, nargs="+", default=None)
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--work-hours", type=float, default=48.0)
    parser.add_argument("--deadline-hours", type=float, default=None, help="default: work / 0.8")
    parser.add_argument("--restart-hours", type=float, default=0.2)
    parser.add_argument("--starts", type=int, default=5, help="start points spread over the traces")
    parser.add_argument("--start-hours", default=None, help="comma separated offsets (overrides --starts)")
    parser.add_argument("--on-demand-price", type=float, default=3.06)
    parser.add_argument("--spot-price", type=float, default=round(3.06 / 3.1, 4))
    parser.add_argument("--json", action="store_true", help="one JSON line per start")
    parser.add_argument("--policy", choices=["skyless", *PEERS], default="skyless", help="replayed")
    args = parser.parse_args(argv)
    replayed: Policy = decide if args.policy == "skyless" else PEERS[args.policy]()
    files = args.trace or sorted(DEFAULT_TRACES.glob("*.json"))
    if not files:
        raise SystemExit(f"no trace files in {DEFAULT_TRACES}; name them with --trace")
    zones = [load_zone_trace(Path(f)) for f in files]
    traces = [availability(z, args.nodes) for z in zones]
    if len({t.gap for t in traces}) != 1:
        raise SystemExit("the traces' sample gaps differ; the replay needs one clock")
    gap = traces[0].gap
    deadline_hours = args.deadline_hours or args.work_hours / 0.8
    span = min(len(z.counts) * z.gap for z in zones) / HOUR - deadline_hours - 1
    starts = (
        [float(x) for x in args.start_hours.split(",") if x.strip()]
        if args.start_hours
        else [round(i * max(span, 0) / max(args.starts - 1, 1), 1) for i in range(args.starts)]
    )
    n = args.nodes
    places = [PlaceOption(z.zone, args.spot_price * n, args.on_demand_price * n, z.region) for z in zones]
    work, overhead, deadline = args.work_hours * HOUR, args.restart_hours * HOUR, deadline_hours * HOUR
    all_on_demand = args.on_demand_price * n * (args.work_hours + args.restart_hours)
    runs_told = oracle(traces, outages=False, policy_told=replayed)
    both_told = oracle(traces, outages=True, policy_told=replayed)

    def say(text: str) -> None:
        if not args.json:
            print(text)

    say(
        f"{len(zones)} zone(s) ({', '.join(z.zone for z in zones)}), {n} node(s), {args.work_hours:g} h of "
        f"work due in {deadline_hours:g} h, restart {args.restart_hours:g} h; replay of {args.policy} "
        "against the best possible schedule (cost relative to all on-demand; hours of on-demand and spot "
        "clusters, overheads included; launches; slack unused at the end)"
    )
    say(
        f"{'start h':>7} | {args.policy[:7]:>7} {'od h':>5} {'spot h':>6} {'launch':>6} {'unused':>6} | "
        f"{'best':>6} {'od h':>5} {'spot h':>6} {'launch':>6} {'unused':>6} | {'gap':>6} | "
        f"{'runs told':>9} {'+outages':>8}"
    )
    rows = []
    for start in starts:
        common = {
            "start_tick": int(start * HOUR // gap),
            "total_work": work,
            "deadline_after": deadline,
            "restart_overhead": overhead,
        }
        ours = replay(replayed, traces, places, **common)
        told = [replay(o, traces, places, **common) for o in (runs_told, both_told)]
        dollars, steps = best_schedule(traces, places, **common)
        check = optimal_cost(traces, places, **common)
        if abs(check - dollars) > 1e-6 * max(1.0, check):
            raise SystemExit(f"start {start}: the schedule's cost {dollars} is not the optimum {check}")
        od, spot, launches, unused = summarize_steps(steps, gap, deadline)
        mine = Schedule(
            ours.cost / all_on_demand,
            ours.on_demand_seconds / HOUR,
            ours.spot_seconds / HOUR,
            ours.restarts,
            (ours.deadline - ours.finished_at) / HOUR,
        )
        best = Schedule(dollars / all_on_demand, od, spot, launches, unused)
        runs, both = (t.cost / all_on_demand for t in told)
        missed = ours.missed or any(t.missed for t in told)
        rows.append((mine, best, runs, both, missed))
        if args.json:
            print(
                json.dumps(
                    {
                        "start_hours": start,
                        "policy": args.policy,
                        "replayed": _row(mine),
                        "best": _row(best),
                        "runs_told": round(runs, 4),
                        "runs_and_outages_told": round(both, 4),
                    }
                )
            )
        say(
            f"{start:7.1f} | {mine.cost:7.3f} {mine.on_demand_hours:5.1f} {mine.spot_hours:6.1f} "
            f"{mine.launches:6d} {mine.unused_hours:6.1f} | {best.cost:6.3f} {best.on_demand_hours:5.1f} "
            f"{best.spot_hours:6.1f} {best.launches:6d} {best.unused_hours:6.1f} | "
            f"{mine.cost - best.cost:+6.3f} | {runs:9.3f} {both:8.3f}"
        )
    ours_mean = statistics.mean(r[0].cost for r in rows)
    best_mean = statistics.mean(r[1].cost for r in rows)
    runs_mean = statistics.mean(r[2] for r in rows)
    both_mean = statistics.mean(r[3] for r in rows)
    extra_od = statistics.mean(r[0].on_demand_hours - r[1].on_demand_hours for r in rows)
    extra_launches = statistics.mean(r[0].launches - r[1].launches for r in rows)
    say(
        f"\n{args.policy} {ours_mean:.3f} = {ours_mean / best_mean:.3f}x the best {best_mean:.3f}; told each "
        f"spot run's length {runs_mean:.3f} = {runs_mean / best_mean:.3f}x, and each outage's too "
        f"{both_mean:.3f} = {both_mean / best_mean:.3f}x; per start, {args.policy} runs {extra_od:+.1f} h of "
        f"on-demand and {extra_launches:+.1f} launches against the best; missed deadlines: "
        f"{sum(r[4] for r in rows)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
