"""The command line of `benchmarks/spot_policy.py --control-plane` (the runs: spot_control_plane.py): one
row per start point, the control plane beside the replay and the best possible cost, and their means."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import spot_control_plane
from spot_control_plane import DEFAULT_TRACES, HOUR, ControlPlaneRun, RunResult, replayed
from spot_peers import PEERS
from trace_cloud import Prices, load_zone_trace

from shared.config import Settings


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def _deadline(text: str) -> float | None:
    return None if text.lower() == "none" else float(text)


def _spread(lo: float, hi: float) -> str:
    return f"min {lo:.3f}" if lo == hi else f"{lo:.3f}-{hi:.3f}"


def main(argv: list[str]) -> int:
    if "--sweep" in argv:  # every zone alone, every ratio and restart: spot_sweep.py
        from spot_sweep import main as sweep

        return sweep([a for a in argv if a != "--sweep"])
    parser = argparse.ArgumentParser(
        prog="spot_policy.py --control-plane",
        description=spot_control_plane.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--trace",
        type=Path,
        nargs="+",
        default=None,
        help="trace files, one zone each (default: the 9 zones of aws-02-15-2023)",
    )
    parser.add_argument("--nodes", type=int, default=1, help="nodes of the job's cluster (all or nothing)")
    parser.add_argument("--work-hours", type=float, default=48.0, help="the job's compute, hours")
    parser.add_argument(
        "--deadline-hours",
        type=_deadline,
        default=-1.0,
        help="hours from the start to the deadline, or none (default: work / 0.8)",
    )
    parser.add_argument("--restart-hours", type=float, default=0.2, help="restart overhead, hours")
    parser.add_argument(
        "--start-hours",
        type=_floats,
        default=None,
        help="offsets into the traces, comma separated (default: 5 spread over the trace)",
    )
    parser.add_argument("--on-demand-price", type=float, default=3.06, help="$/h per node")
    parser.add_argument("--spot-price", type=float, default=round(3.06 / 3.1, 4), help="$/h per node")
    parser.add_argument(
        "--policy",
        choices=["skyless", *PEERS],
        default="skyless",
        help="who decides on the deadline path: skyless's policy or a peer (benchmarks/spot_peers.py)",
    )
    parser.add_argument("--no-best", dest="best", action="store_false", help="skip the best possible cost")
    parser.add_argument("--json", action="store_true", help="one JSON line per start")
    args = parser.parse_args(argv)
    if args.deadline_hours == -1.0:
        args.deadline_hours = args.work_hours / 0.8
    files = args.trace or sorted((DEFAULT_TRACES / "availability/1-node/aws-02-15-2023").glob("*.json"))
    traces = [load_zone_trace(Path(f)) for f in files]
    span = min(len(t.counts) * t.gap for t in traces) / HOUR - (args.deadline_hours or args.work_hours) - 1
    starts = args.start_hours or [round(i * max(span, 0) / 4, 1) for i in range(5)]
    env = Settings.from_env(os.environ)
    if not args.json:
        print(
            f"control plane: {len(traces)} zone(s) ({', '.join(t.zone for t in traces)}), "
            f"{args.nodes} node(s), "
            f"{args.work_hours:g} h of work, deadline {args.deadline_hours or 'none'} h, restart "
            f"{args.restart_hours:g} h, on-demand ${args.on_demand_price}/h, "
            f"spot ${args.spot_price}/h per node; policy {args.policy}; refused spot launches per job "
            f"<= {env.spot_refusals_per_hour or 'any'}/h, retry {env.deadline_retry_seconds} s, reaction "
            f"{env.deadline_reaction_seconds} s (SKYLESS_*)"
        )
        print(
            f"{'start h':>8} {'cost':>6} {'replay':>6} {'best':>6} {'finished h':>10} {'missed':>6} "
            f"{'launches':>8} {'refused':>7} {'preempted':>9} {'state':>18} {'sim s':>6}"
        )
    rows = []
    for start in starts:
        began = time.perf_counter()
        run = ControlPlaneRun(
            traces,
            args.nodes,
            args.work_hours,
            args.deadline_hours,
            args.restart_hours,
            start,
            Prices(args.on_demand_price, args.spot_price),
            policy=args.policy,
        )
        result = run.run()
        seconds = time.perf_counter() - began
        other = replayed(traces, args, start)
        rows.append((result, other))
        if args.json:
            print(json.dumps({**result.as_json(), "replay_cost": other and round(other["cost"], 4)}))
            continue
        finished = "-" if result.finished_hours is None else f"{result.finished_hours:.2f}"
        rep = f"{other['cost']:6.3f}" if other else f"{'-':>6}"
        best = f"{other['best']:6.3f}" if other and "best" in other else f"{'-':>6}"
        print(
            f"{start:8.1f} {result.cost:6.3f} {rep} {best} {finished:>10} {result.missed!s:>6} "
            f"{result.launches:8d} {result.refused:7d} {result.preemptions:9d} {result.state:>18} "
            f"{seconds:6.1f}"
        )
        for problem in run.errors + [f"{result.two_running_tasks} job(s) with two running tasks"] * bool(
            result.two_running_tasks
        ):
            print(f"         ! {problem}")
    if not args.json:
        summarize(rows)
    return 0


def summarize(rows: list[tuple[RunResult, dict[str, float] | None]]) -> None:
    costs = [r.cost for r, _ in rows]
    print(
        f"\ncontrol plane: mean cost {statistics.mean(costs):.3f} of all on-demand "
        f"({_spread(min(costs), max(costs))}, median {statistics.median(costs):.3f}); "
        f"missed {sum(r.missed for r, _ in rows)} of {len(rows)}"
    )
    replays = [o for _, o in rows if o]
    if len(replays) == len(rows):
        mean = statistics.mean(o["cost"] for o in replays)
        print(
            f"replay:        mean cost {mean:.3f}; missed {sum(int(o['missed']) for o in replays)} of "
            f"{len(rows)}; control plane / replay = {statistics.mean(costs) / mean:.3f}"
        )
        greedy = [o["greedy"] for o in replays if "greedy" in o]
        if len(greedy) == len(rows):
            print(f"greedy replay: mean cost {statistics.mean(greedy):.3f}")
        bests = [o["best"] for o in replays if "best" in o]
        if len(bests) == len(rows):
            best = statistics.mean(bests)
            print(
                f"best possible: mean cost {best:.3f}; "
                f"control plane / best = {statistics.mean(costs) / best:.3f}"
                f", replay / best = {mean / best:.3f}"
            )
