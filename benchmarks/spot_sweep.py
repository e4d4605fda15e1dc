"""`benchmarks/spot_policy.py --control-plane --sweep`: each zone trace alone, every deadline ratio and
restart overhead, through the control plane (spot_control_plane.ControlPlaneRun) beside the replay of
skyless's policy and of greedy on the same start points. A row is "worse" when the control plane's mean
cost is above greedy's replay (the control plane's own reaction and boot times cost it about 0.1 % where
both run spot throughout); the end lists every such row with its margin and the mean over zones per
setting.

  --trace FILE ...        zones, one each (default: the 9 zones of aws-02-15-2023)
  --ratios 0.5,...,0.9    job / deadline      --restarts 0.05,0.1,0.2,0.5   hours
  --starts N              start points per zone and setting, spread over the trace (default 5)
  --work-hours C          (default 48)        --json   one line per zone and setting
  --replay-only           the pure policy's replay in place of the control plane (the grid in seconds)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]  # run alone too, as its --help says

from spot_control_plane import DEFAULT_TRACES, HOUR, ControlPlaneRun, replayed  # noqa: E402
from trace_cloud import Prices, ZoneTrace, load_zone_trace  # noqa: E402


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def _starts(trace: ZoneTrace, window_hours: float, count: int) -> list[float]:
    span = len(trace.counts) * trace.gap / HOUR - window_hours - 1
    return [round(i * max(span, 0) / max(count - 1, 1), 1) for i in range(count)]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="spot_policy.py --control-plane --sweep", description=__doc__)
    parser.add_argument("--trace", type=Path, nargs="+", default=None)
    parser.add_argument("--ratios", type=_floats, default=[0.5, 0.6, 0.7, 0.8, 0.9])
    parser.add_argument("--restarts", type=_floats, default=[0.05, 0.1, 0.2, 0.5])
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--work-hours", type=float, default=48.0)
    parser.add_argument("--on-demand-price", type=float, default=3.06)
    parser.add_argument("--spot-price", type=float, default=round(3.06 / 3.1, 4))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--replay-only", action="store_true")
    args = parser.parse_args(argv)
    default = DEFAULT_TRACES / "availability/1-node/aws-02-15-2023"
    files = args.trace or sorted(default.glob("*.json"))
    if not files:  # a git worktree elsewhere than beside shared/ has no default traces: say so, not "0 of 0"
        parser.error(f"no traces: {default} has no *.json; name them with --trace FILE ...")
    prices = Prices(args.on_demand_price, args.spot_price)
    worse: list[str] = []
    means: dict[tuple[float, float], list[tuple[float, float]]] = {}
    missed = runs = 0
    if not args.json:
        column = "replay" if args.replay_only else "control"
        print(f"{'zone':>12} {'ratio':>5} {'restart':>7} {column:>7} {'replay':>6} {'greedy':>6} late")
    for path in files:
        trace = load_zone_trace(Path(path))
        for ratio in args.ratios:
            deadline = args.work_hours / ratio
            starts = _starts(trace, deadline, args.starts)
            for restart in args.restarts:
                setting = argparse.Namespace(
                    nodes=1,
                    spot_price=args.spot_price,
                    on_demand_price=args.on_demand_price,
                    work_hours=args.work_hours,
                    restart_hours=restart,
                    deadline_hours=deadline,
                    policy="skyless",
                    best=False,
                )
                costs, replays, greedy, late = [], [], [], 0
                for start in starts:
                    other = replayed([trace], setting, start)
                    assert other is not None
                    if args.replay_only:
                        costs.append(other["cost"])
                        late += int(other["missed"])
                    else:
                        run = ControlPlaneRun([trace], 1, args.work_hours, deadline, restart, start, prices)
                        result = run.run()
                        costs.append(result.cost)
                        late += result.missed
                    replays.append(other["cost"])
                    greedy.append(other["greedy"])
                row = (statistics.mean(costs), statistics.mean(replays), statistics.mean(greedy))
                means.setdefault((ratio, restart), []).append((row[0], row[2]))
                missed, runs = missed + late, runs + len(starts)
                if row[0] > row[2] + 1e-9:
                    worse.append(
                        f"{trace.zone} {ratio}/{restart} h: {row[0]:.4f} > greedy {row[2]:.4f} "
                        f"(+{100 * (row[0] / row[2] - 1):.1f} %)"
                    )
                if args.json:
                    print(json.dumps({"zone": trace.zone, "ratio": ratio, "restart_hours": restart,
                                      "control_plane": None if args.replay_only else round(row[0], 4),
                                      "replay": round(row[1], 4),
                                      "greedy": round(row[2], 4), "missed": late}))  # fmt: skip
                else:
                    print(
                        f"{trace.zone:>12} {ratio:5.2f} {restart:6.2f}h {row[0]:7.3f} {row[1]:6.3f} "
                        f"{row[2]:6.3f} {late:4d}{'  WORSE' if row[0] > row[2] + 1e-9 else ''}",
                        flush=True,
                    )
    if args.json:
        return 0
    judged = "replay" if args.replay_only else "control plane"
    print(f"\nmean over zones per setting ({judged} vs greedy); missed {missed} of {runs} runs")
    for (ratio, restart), pairs in means.items():
        ours, theirs = statistics.mean(p[0] for p in pairs), statistics.mean(p[1] for p in pairs)
        flag = "  WORSE" if ours > theirs + 1e-9 else ""
        print(f"  {ratio:4.2f} {restart:5.2f} h: {ours:.3f} vs {theirs:.3f}{flag}")
    cells = sum(len(v) for v in means.values())
    print(f"\nat or below greedy in {cells - len(worse)} of {cells} zone x setting cells; above in:")
    for line in worse:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
