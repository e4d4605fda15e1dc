"""Where the control plane and the replay of its policy part, for one start point: the clusters each ran
(place or on-demand, from and to, hours after the start) side by side, the hours on each market, and with
`--decisions` every answer of the policy (when, what ran, the answer, the slack, why) in both.

Usage: .venv/bin/python benchmarks/spot_timeline.py --start-hours H [--trace FILE ...] [--nodes 16]
           [--work-hours 48] [--deadline-hours 60] [--restart-hours 0.2] [--decisions]

Default: the 16-node traces of "Can't Be Late" (3 zones in 2 regions), 16 nodes all or nothing, as
`benchmarks/spot_gap.py`. The control plane is `spot_control_plane.ControlPlaneRun` (the real handlers in
simulated time; its clusters as the trace cloud ran them); the replay is `shared.spot_policy.replay` from the
same trace sample. Both ask skyless's `decide`; each call is recorded on the way through.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

from spot_control_plane import ControlPlaneRun, availability, trace_start  # noqa: E402
from spot_gap import DEFAULT_TRACES  # noqa: E402
from trace_cloud import Prices, load_zone_trace  # noqa: E402

from shared.spot_policy import (  # noqa: E402
    DEFAULT_CONFIG,
    DeadlineState,
    Decision,
    PlaceOption,
    PolicyConfig,
    SpotHistory,
    Wait,
    decide,
    replay,
)

HOUR = 3600.0
SAME = 0.05  # hours: clusters of the two that start this close are printed on one line


@dataclass(frozen=True)
class Call:
    at: float  # hours after the start
    running: str | None  # "zone market" of the cluster the policy was told of
    since: float | None  # when that cluster was launched, hours after the start
    decision: Decision
    slack: float  # hours


@dataclass(frozen=True)
class Cluster:
    began: float  # hours after the start
    ended: float
    where: str  # a zone (spot) or "on-demand"


def _short(place: str) -> str:
    """`aws/us-east-2/us-east-2b p3.2xlarge` (the control plane's place key) or `us-east-2b`: the zone."""
    return place.split(" ", 1)[0].rsplit("/", 1)[-1]


class Recorder:
    """`decide`, recording each call with times relative to `origin` (epoch seconds)."""

    def __init__(self, origin: float) -> None:
        self.origin = origin
        self.calls: list[Call] = []

    def __call__(
        self,
        job: DeadlineState,
        places: Sequence[PlaceOption],
        history: Mapping[str, SpotHistory] | None = None,
        config: PolicyConfig = DEFAULT_CONFIG,
    ) -> Decision:
        answer = decide(job, places, history, config)
        current = job.current
        running = None if current is None else f"{_short(current.place)} {current.market}"
        since = None if current is None else (current.started_at - self.origin) / HOUR
        self.calls.append(Call((job.now - self.origin) / HOUR, running, since, answer, job.slack / HOUR))
        return answer


@contextmanager
def recording_control_plane(recorder: Recorder) -> Iterator[None]:
    from shared.jobs import deadline_launch

    saved = deadline_launch.decide
    deadline_launch.decide = recorder
    try:
        yield
    finally:
        deadline_launch.decide = saved


def control_plane_clusters(run: ControlPlaneRun) -> list[Cluster]:
    cloud = run.cloud
    out = []
    for nodes in cloud.clusters.values():
        first = nodes[0]
        began = cloud.started.get(first.instance_id)
        if began is None:
            continue
        ended = cloud.ended.get(first.instance_id, began)
        where = (first.spec.zone or "?") if first.spec.use_spot else "on-demand"
        out.append(Cluster((began - cloud.t0) / HOUR, (ended - cloud.t0) / HOUR, where))
    return sorted(out, key=lambda c: c.began)


def replay_clusters(calls: list[Call], finished: float) -> list[Cluster]:
    """The replay's clusters from its policy calls. An answer naming what was not running launched it
    unless the replay asked again at once (a refused spot launch); the cluster ended at the first later call
    that was not told of it (a preemption: the replay asks at that moment) or whose answer let it go (not a
    launch elsewhere that was refused: the running cluster stays), else at the finish."""
    out = []
    for i, call in enumerate(calls):
        if isinstance(call.decision, Wait):
            continue
        key = f"{_short(call.decision.place)} {call.decision.market}"
        if call.running == key:
            continue
        if _refused(calls, i):
            continue
        ended = finished
        for j in range(i + 1, len(calls)):
            nxt = calls[j]
            told = nxt.running == key and nxt.since is not None and abs(nxt.since - call.at) < 1e-6
            if not told or not (_keeps(nxt.decision, key) or _refused(calls, j)):
                ended = nxt.at
                break
        zone, market = key.split(" ")
        out.append(Cluster(call.at, ended, zone if market == "spot" else "on-demand"))
    return out


def _refused(calls: list[Call], i: int) -> bool:
    """The launch answered at call `i` was refused: the replay asked again at once."""
    return i + 1 < len(calls) and calls[i + 1].at <= calls[i].at + 1e-9


def _keeps(decision: Decision, key: str) -> bool:
    if isinstance(decision, Wait):
        return False
    zone, market = key.split(" ")
    return _short(decision.place) == zone and str(decision.market) == market


def side_by_side(left: list[Cluster], right: list[Cluster]) -> list[str]:
    def cell(c: Cluster) -> str:
        return f"{c.began:7.2f}-{c.ended:7.2f} {c.where:>10}"

    lines = [f"{'control plane':>30} | {'replay':>30}"]
    i = j = 0
    while i < len(left) or j < len(right):
        if j >= len(right) or (i < len(left) and left[i].began < right[j].began - SAME):
            lines.append(f"{cell(left[i]):>30} |")
            i += 1
        elif i >= len(left) or right[j].began < left[i].began - SAME:
            lines.append(f"{'':>30} | {cell(right[j])}")
            j += 1
        else:
            lines.append(f"{cell(left[i]):>30} | {cell(right[j])}")
            i, j = i + 1, j + 1
    return lines


def hours_on(clusters: list[Cluster], on_demand: bool) -> float:
    return sum(c.ended - c.began for c in clusters if (c.where == "on-demand") == on_demand)


def _answer(call: Call) -> str:
    decision = call.decision
    what = "wait" if isinstance(decision, Wait) else f"{decision.market} {_short(decision.place)}"
    ran = call.running or "-"
    return f"{call.at:8.3f} h  ran {ran:>20}  {what:>20}  slack {call.slack:5.2f} h  {decision.reason}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trace", type=Path, nargs="+", default=None)
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--work-hours", type=float, default=48.0)
    parser.add_argument("--deadline-hours", type=float, default=60.0)
    parser.add_argument("--restart-hours", type=float, default=0.2)
    parser.add_argument("--start-hours", type=float, required=True)
    parser.add_argument("--on-demand-price", type=float, default=3.06)
    parser.add_argument("--spot-price", type=float, default=round(3.06 / 3.1, 4))
    parser.add_argument("--decisions", action="store_true", help="every answer of the policy, both runs")
    args = parser.parse_args(argv)
    traces = [load_zone_trace(Path(f)) for f in (args.trace or sorted(DEFAULT_TRACES.glob("*.json")))]
    if not traces:
        parser.error(f"no trace files in {DEFAULT_TRACES}: give --trace FILE ...")
    if len({t.gap for t in traces}) != 1:
        parser.error("the traces must share one sample gap (the replay needs one clock)")
    prices = Prices(args.on_demand_price, args.spot_price)
    run = ControlPlaneRun(traces, args.nodes, args.work_hours, args.deadline_hours, args.restart_hours,
                          args.start_hours, prices)  # fmt: skip
    ours = Recorder(run.cloud.t0)
    with recording_control_plane(ours):
        result = run.run()
    n, gap = args.nodes, traces[0].gap
    begin = trace_start(traces, args.start_hours)
    theirs = Recorder(begin)
    places = [PlaceOption(t.zone, args.spot_price * n, args.on_demand_price * n, t.region) for t in traces]
    replayed = replay(
        theirs, [availability(t, n) for t in traces], places, start_tick=round(begin / gap),
        total_work=args.work_hours * HOUR, deadline_after=args.deadline_hours * HOUR,
        restart_overhead=args.restart_hours * HOUR,
    )  # fmt: skip
    all_on_demand = args.on_demand_price * n * (args.work_hours + args.restart_hours)
    left = control_plane_clusters(run)
    right = replay_clusters(theirs.calls, (replayed.finished_at - begin) / HOUR)
    print(
        f"start {args.start_hours:g} h: control plane {result.cost:.3f} ({result.launches} launches, "
        f"{result.refused} refused, finished {result.finished_hours or float('nan'):.2f} h); replay "
        f"{replayed.cost / all_on_demand:.3f} ({replayed.restarts} launches, {replayed.refused} refused, "
        f"finished {(replayed.finished_at - begin) / HOUR:.2f} h)"
    )
    print("\n".join(side_by_side(left, right)))
    print(
        f"on-demand hours: control plane {hours_on(left, True):.2f}, replay {hours_on(right, True):.2f}; "
        f"spot hours: {hours_on(left, False):.2f}, {hours_on(right, False):.2f}"
    )
    if args.decisions:
        for name, recorder in (("control plane", ours), ("replay", theirs)):
            print(f"\n{name}: the policy's answers")
            for call in recorder.calls:
                print(_answer(call))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
