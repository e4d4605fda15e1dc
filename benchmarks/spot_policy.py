"""Deadline spot policy on real spot availability traces: cost, spot hours, restarts and deadline misses.

Usage: .venv/bin/python benchmarks/spot_policy.py [TRACES] [--trace-set PATH] [--hours 48] [--starts 12]
           [--ratios 0.5,0.6,0.7,0.8,0.9] [--overheads 0.05,0.1,0.2,0.5] [--single-optimal headline|all|none]
       .venv/bin/python benchmarks/spot_policy.py --control-plane [--trace FILE ...] [--nodes N]
           [--work-hours C] [--deadline-hours D|none] [--restart-hours d] [--start-hours LIST]
           [--on-demand-price P] [--spot-price P] [--json]   (see benchmarks/spot_control_plane.py)
           [--policy skyless|uniform-progress|greedy|expected-cost|eager-next-region]
           (peers: benchmarks/spot_peers.py)
       .venv/bin/python benchmarks/spot_policy.py --control-plane --sweep [--trace FILE ...] [--ratios LIST]
           [--restarts LIST] [--starts N]   (each zone alone against greedy: benchmarks/spot_sweep.py)

TRACES is the folder of the "Can't Be Late" traces (default: ../shared/spot-traces beside this repository;
they are read in place, never copied). The default trace set is the 9 zones of p3.2xlarge spot
availability from February-March 2023 (195 s samples, 45 days).

A job of `--hours` of compute is due `hours / ratio` after its start, for each job/deadline ratio and
restart overhead, from `--starts` start points spread evenly over the trace. Every policy is replayed
through the product's own code (`shared.spot_policy`: `decide`, the function the control plane calls, and
the baselines beside it) by `shared.spot_policy.replay`:

- single place: each zone alone (greedy, Uniform Progress, skyless's `decide`, spot only), the mean over
  zones and start points;
- multi place: all zones are the plan's places, with their regions (skyless, greedy over every zone,
  spot only).

"best" is `shared.spot_policy.optimal_cost`, the least any schedule could pay on the same trace and start
points knowing the future. Single-place optima are slow (0.1-1 s each), so by default they are computed
for the headline setting only (`--single-optimal all` for every setting).

Costs are relative to running the whole job on on-demand (one launch). Prices: on-demand $3.06/h
(p3.2xlarge, us-east-1), spot 3.1x cheaper (`--od-price`, `--spot-discount`). "spot only" is SkyPilot's
managed spot recovery, which knows no deadline: its misses are what a deadline protects against.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shared.spot_policy import (  # noqa: E402
    AvailabilityTrace,
    PlaceOption,
    Policy,
    decide,
    decide_greedy,
    decide_spot_only,
    decide_uniform_progress,
    optimal_cost,
    replay,
)

DEFAULT_TRACES = ROOT.parent / "shared" / "spot-traces"
DEFAULT_SET = "availability/1-node/aws-02-15-2023"
HOUR = 3600.0
HEADLINE = (0.8, 0.2)  # job/deadline ratio, restart overhead (h) of the multi-place target

SINGLE_POLICIES: dict[str, Policy] = {
    "greedy": decide_greedy,
    "uniform progress": decide_uniform_progress,
    "skyless": decide,
    "spot only": decide_spot_only,
}
MULTI_POLICIES: dict[str, Policy] = {
    "greedy": decide_greedy,
    "skyless": decide,
    "spot only": decide_spot_only,
}
DEADLINE_POLICIES = ("greedy", "uniform progress", "skyless")  # spot only is not meant to keep deadlines


@dataclass
class Tally:
    cost: float = 0.0  # sum of cost / all-on-demand cost
    spot_hours: float = 0.0
    restarts: int = 0
    misses: int = 0
    runs: int = 0

    def add(self, ratio: float, spot_hours: float, restarts: int, missed: bool) -> None:
        self.cost += ratio
        self.spot_hours += spot_hours
        self.restarts += restarts
        self.misses += int(missed)
        self.runs += 1

    def mean_cost(self) -> float:
        return self.cost / self.runs if self.runs else float("nan")


@dataclass
class Setting:
    ratio: float
    overhead_hours: float
    policies: dict[str, Tally] = field(default_factory=dict)
    best: Tally = field(default_factory=Tally)


def load_traces(folder: Path) -> list[AvailabilityTrace]:
    files = sorted(folder.glob("*.json"))
    if not files:
        raise SystemExit(f"no trace files (*.json) in {folder}")
    traces = []
    for path in files:
        body = json.loads(path.read_text())
        place = path.stem.split("_")[0]
        gap = float(body["metadata"]["gap_seconds"])
        traces.append(AvailabilityTrace(place, gap, tuple(bool(v) for v in body["data"])))
    return traces


def region_of(zone: str) -> str:
    """`us-east-1a` -> `us-east-1`, `us-central1-b` -> `us-central1`: zones of a region lose spot together."""
    return re.sub(r"-?[a-z]$", "", zone)


def start_ticks(traces: Sequence[AvailabilityTrace], longest_window: float, count: int) -> list[int]:
    length = min(len(t.available) for t in traces)
    last = length - int(longest_window / traces[0].gap) - 2
    if last <= 0:
        raise SystemExit("the trace is shorter than the longest deadline window")
    return [round(i * last / max(count - 1, 1)) for i in range(count)]


def run_scope(
    traces_by_run: Sequence[Sequence[AvailabilityTrace]],
    policies: dict[str, Policy],
    settings: list[Setting],
    starts: list[int],
    args: argparse.Namespace,
    with_best: set[tuple[float, float]],
) -> None:
    spot_price = args.od_price / args.spot_discount
    work = args.hours * HOUR
    for setting in settings:
        deadline = work / setting.ratio
        overhead = setting.overhead_hours * HOUR
        all_on_demand = args.od_price * (work + overhead) / HOUR
        tallies = {name: Tally() for name in policies}
        for traces in traces_by_run:
            places = [PlaceOption(t.place, spot_price, args.od_price, region_of(t.place)) for t in traces]
            for start in starts:
                feasible = []
                for name, policy in policies.items():
                    result = replay(
                        policy,
                        traces,
                        places,
                        start_tick=start,
                        total_work=work,
                        deadline_after=deadline,
                        restart_overhead=overhead,
                    )
                    tallies[name].add(
                        result.cost / all_on_demand,
                        result.spot_seconds / HOUR,
                        result.restarts,
                        result.missed,
                    )
                    if not result.missed:
                        feasible.append(result.cost)
                if (setting.ratio, setting.overhead_hours) in with_best:
                    best = optimal_cost(
                        traces,
                        places,
                        start_tick=start,
                        total_work=work,
                        deadline_after=deadline,
                        restart_overhead=overhead,
                        upper_bound=min(feasible, default=float("inf")),
                    )
                    setting.best.add(best / all_on_demand, 0.0, 0, False)
        setting.policies = tallies


def print_scope(title: str, settings: list[Setting], names: Sequence[str]) -> None:
    print(f"\n{title}")
    print("cost relative to all on-demand | spot hours | restarts | deadline misses (of runs), per policy")
    header = f"{'ratio':>5} {'restart':>7} " + " ".join(f"{name:>26}" for name in names) + f" {'best':>6}"
    print(header)
    print("-" * len(header))
    for setting in settings:
        cells = []
        for name in names:
            t = setting.policies[name]
            cells.append(
                f"{t.mean_cost():6.3f} {t.spot_hours / t.runs:5.1f}h {t.restarts / t.runs:5.1f} "
                f"{t.misses:3d}/{t.runs:<3d}"
            )
        best = f"{setting.best.mean_cost():6.3f}" if setting.best.runs else f"{'-':>6}"
        print(
            f"{setting.ratio:5.2f} {setting.overhead_hours:6.2f}h "
            + " ".join(f"{c:>26}" for c in cells)
            + f" {best}"
        )


def check_targets(single: list[Setting], multi: list[Setting]) -> list[str]:
    verdicts = []
    misses = [
        f"{scope} {s.ratio}/{s.overhead_hours}h {name}: {s.policies[name].misses}"
        for scope, settings in (("single", single), ("multi", multi))
        for s in settings
        for name in DEADLINE_POLICIES
        if name in s.policies and s.policies[name].misses
    ]
    verdicts.append(
        ("PASS" if not misses else "FAIL") + " zero deadline misses (greedy, uniform progress, "
        "skyless; every setting)" + ("" if not misses else ": " + "; ".join(misses))
    )
    headline = [s for s in multi if (s.ratio, s.overhead_hours) == HEADLINE]
    if headline and headline[0].best.runs:
        ours, best = headline[0].policies["skyless"].mean_cost(), headline[0].best.mean_cost()
        gap = ours / best - 1
        verdicts.append(
            f"{'PASS' if gap <= 0.05 else 'FAIL'} multi place within 5 % of best at ratio {HEADLINE[0]}, "
            f"restart {HEADLINE[1]} h: {ours:.3f} vs {best:.3f} (+{100 * gap:.1f} %)"
        )
    worse = [
        f"{s.ratio}/{s.overhead_hours}h: {s.policies['skyless'].mean_cost():.3f} > "
        f"{s.policies['greedy'].mean_cost():.3f}"
        for s in single
        if s.policies["skyless"].mean_cost() > s.policies["greedy"].mean_cost() + 1e-9
    ]
    verdicts.append(
        ("PASS" if not worse else "FAIL")
        + " single place no worse than greedy in every setting"
        + ("" if not worse else ": " + "; ".join(worse))
    )
    return verdicts


def parse_floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--control-plane" in argv:  # the same judgement through the real handlers: spot_control_plane.py
        sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "benchmarks")]
        from spot_control_plane_cli import main as control_plane

        return control_plane([a for a in argv if a != "--control-plane"])
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("traces", nargs="?", type=Path, default=DEFAULT_TRACES)
    parser.add_argument(
        "--trace-set", default=DEFAULT_SET, help="folder of one trace per place, inside TRACES"
    )
    parser.add_argument("--hours", type=float, default=48.0, help="the job's compute, hours")
    parser.add_argument("--starts", type=int, default=10, help="start points per setting (and per zone)")
    parser.add_argument("--ratios", type=parse_floats, default=[0.5, 0.6, 0.7, 0.8, 0.9])
    parser.add_argument("--overheads", type=parse_floats, default=[0.05, 0.1, 0.2, 0.5], help="hours")
    parser.add_argument("--od-price", type=float, default=3.06)
    parser.add_argument("--spot-discount", type=float, default=3.1, help="on-demand price / spot price")
    parser.add_argument("--single-optimal", choices=["headline", "all", "none"], default="headline")
    args = parser.parse_args(argv)

    began = time.perf_counter()
    traces = load_traces(args.traces / args.trace_set)
    starts = start_ticks(traces, args.hours * HOUR / min(args.ratios), args.starts)
    grid = [(r, o) for r in args.ratios for o in args.overheads]
    every = set(grid)
    single_best = (
        every
        if args.single_optimal == "all"
        else {HEADLINE} & every
        if args.single_optimal == "headline"
        else set()
    )
    print(
        f"traces: {args.trace_set} ({len(traces)} places, {traces[0].gap:.0f} s samples); "
        f"job {args.hours:g} h of compute; {len(starts)} start points; "
        f"on-demand ${args.od_price}/h, spot {args.spot_discount}x cheaper"
    )

    single = [Setting(r, o) for r, o in grid]
    run_scope([[t] for t in traces], SINGLE_POLICIES, single, starts, args, single_best)
    multi = [Setting(r, o) for r, o in grid]
    run_scope([traces], MULTI_POLICIES, multi, starts, args, every)

    print_scope(
        f"single place (each of {len(traces)} zones alone; mean over zones and starts)",
        single,
        list(SINGLE_POLICIES),
    )
    print_scope(f"multi place (all {len(traces)} zones in the plan)", multi, list(MULTI_POLICIES))
    verdicts = check_targets(single, multi)
    print("\ntargets")
    for verdict in verdicts:
        print("  " + verdict)
    print(f"\n({time.perf_counter() - began:.0f} s)")
    return 0 if all(v.startswith("PASS") for v in verdicts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
