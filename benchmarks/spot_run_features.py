"""What predicts the length of the next spot run, from what the control plane knows, and where it would pay.

Usage: .venv/bin/python benchmarks/spot_run_features.py [--trace FILE ...] [--nodes 16]
           [--starts 10 | --start-hours LIST] [--work-hours 48] [--deadline-hours D] [--restart-hours 0.2]
           [--on-demand-price 3.06] [--spot-price 0.9871] [--json]

Default: the 16-node traces of "Can't Be Late" (3 zones in 2 regions), 48 h of work due in 60 h (work / 0.8;
issue 18).

1. **The traces** (everything known): each zone's spot runs; their residual life by age (how much longer a
   run that has lasted `age` goes on; Kaplan-Meier, the run still going at the trace's end censored); the
   next run after a short and after a long outage, and after partial capacity (some of the N nodes
   available: a launch that obtains a few before it is refused would show it).
2. **Every decision** of the product's `decide`, replayed from each start: for every spot place with
   capacity at that moment, the features the history the policy is given holds (its mean run, the time
   since the place and its region were last refused or preempted, the interruptions of the last hours, the
   outage a launch would end, the age of capacity seen by the job's own launch) beside the true length of
   the run a launch would get. Spearman's rho and the quartiles of each feature.
3. **The decisions where a run's length matters**: leaving on-demand for spot (`_pays_back`; which of the
   launches it allowed ended within the restarts' payback, by quartile of each feature), and choosing among
   places with capacity (`_ranked_spot`; how often each feature orders two such places as their true runs).
4. **What knowing each run's length is worth, per use**: the replay with the true run length (the trace's)
   put in place of the estimate (`_expected_run`) in one use at a time: the ranking of places, the reserve,
   leaving on-demand; and in all three. Relative to the best possible schedule (`optimal_cost`).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

from spot_gap import DEFAULT_TRACES, availability  # noqa: E402
from trace_cloud import ZoneTrace, load_zone_trace  # noqa: E402

import shared.spot_policy.deadline_policy as policy_module  # noqa: E402
from shared.spot_policy import (  # noqa: E402
    AvailabilityTrace,
    DeadlineState,
    Decision,
    PlaceOption,
    SpotHistory,
    decide,
    optimal_cost,
    replay,
)

HOUR = 3600.0
NEVER = 48.0  # hours shown for "never seen refused or preempted" in this job
Row = dict[str, float]
USES = {"ranking": "_ranked_spot", "reserve": "_reserve_rate", "leaving on-demand": "_pays_back"}


def runs_of(trace: AvailabilityTrace) -> list[tuple[float, bool, float | None]]:
    """Each spot run of the trace: (length in seconds, censored by the trace's end, the outage before it
    in seconds, None for the first run)."""
    out: list[tuple[float, bool, float | None]] = []
    data, gap = trace.available, trace.gap
    k, before = 0, None
    while k < len(data):
        j = k
        while j < len(data) and data[j] == data[k]:
            j += 1
        if data[k]:
            out.append(((j - k) * gap, j == len(data), before if k > 0 else None))
        else:
            before = (j - k) * gap
        k = j
    return out


def residual_life(runs: Sequence[tuple[float, bool]], age: float, short: float) -> tuple[float, float, int]:
    """Kaplan-Meier over the runs (length, censored) that reached `age`: the mean time left (restricted to
    the longest observation), the probability of ending within `short` more, and how many reached `age`."""
    alive = sorted((length - age, censored) for length, censored in runs if length > age)
    survival, mean, last = 1.0, 0.0, 0.0
    ends_soon = None
    for at_risk, (left, censored) in zip(range(len(alive), 0, -1), alive, strict=True):
        mean += survival * (left - last)
        last = left
        if ends_soon is None and left > short:
            ends_soon = 1.0 - survival
        if not censored:
            survival *= 1.0 - 1.0 / at_risk
    if not alive:
        return math.nan, math.nan, 0
    return mean, 1.0 - survival if ends_soon is None else ends_soon, len(alive)


def trace_view(traces: Sequence[AvailabilityTrace], long_outage: float) -> dict[str, Any]:
    everything: list[tuple[float, bool]] = []
    after: dict[str, list[float]] = defaultdict(list)
    zones = {}
    for trace in traces:
        runs = runs_of(trace)
        everything += [(length, censored) for length, censored, _ in runs]
        done = sorted(length / HOUR for length, censored, _ in runs if not censored)
        zones[trace.place] = {
            "runs": len(runs),
            "median_h": statistics.median(done) if done else math.nan,
            "mean_h": statistics.mean(done) if done else math.nan,
            "p90_h": done[int(0.9 * (len(done) - 1))] if done else math.nan,
            "spot_share": sum(trace.available) / len(trace.available),
        }
        for length, censored, before in runs:
            if not censored and before is not None:
                after["long" if before >= long_outage else "short"].append(length / HOUR)
    by_age = []
    for age in (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0):
        mean, soon, count = residual_life(everything, age * HOUR, 0.5 * HOUR)
        by_age.append({"age_h": age, "mean_left_h": mean / HOUR, "p_ends_within_0.5h": soon, "runs": count})
    outages = {
        kind: {
            "runs": len(v),
            "mean_h": statistics.mean(v),
            "median_h": statistics.median(v),
            "share_below_0.5h": sum(x < 0.5 for x in v) / len(v),
        }
        for kind, v in sorted(after.items())
    }
    return {"zones": zones, "residual_life": by_age, "after_outage": outages}


def after_partial(zones: Sequence[ZoneTrace], nodes: int) -> dict[str, dict[str, float]]:
    """The runs of `nodes` ended within the trace, by what came just before them: no node available, or
    some (1..nodes-1); and whether any sample of the hour before was partial."""
    kinds: dict[str, list[float]] = defaultdict(list)
    for zone in zones:
        counts, gap = zone.counts, zone.gap
        hour = max(1, int(HOUR // gap))
        k = 1
        while k < len(counts):
            if counts[k] >= nodes > counts[k - 1]:
                j = k
                while j < len(counts) and counts[j] >= nodes:
                    j += 1
                if j < len(counts):
                    length = (j - k) * gap / HOUR
                    kinds["after none" if counts[k - 1] == 0 else "after some"].append(length)
                    partial = any(0 < c < nodes for c in counts[max(0, k - hour) : k])
                    kinds["partial in the hour before" if partial else "none partial in the hour"].append(
                        length
                    )
                k = j
            k += 1
    return {
        kind: {"runs": len(v), "mean_h": statistics.mean(v), "median_h": statistics.median(v)}
        | {"share_below_0.6h": sum(x < 0.6 for x in v) / len(v)}
        for kind, v in sorted(kinds.items())
    }


def _since(now: float, times: Sequence[float | None]) -> float:
    known = [t for t in times if t is not None]
    return NEVER if not known else min(NEVER, max(0.0, now - max(known)) / HOUR)


class Recorder:
    """Replays `decide` and records, at each decision, the features of every place with capacity then."""

    def __init__(self, traces: Sequence[AvailabilityTrace]) -> None:
        self.by_place = {t.place: t for t in traces}
        self.gap = traces[0].gap
        self.rows: dict[tuple[int, str, int], Row] = {}
        self.start = 0
        self.events: dict[str, list[float]] = defaultdict(list)  # interruptions seen, per place
        self.counts: dict[str, int] = defaultdict(int)

    def begin(self, start: int) -> None:
        self.start = start
        self.events.clear()
        self.counts.clear()

    def run_left(self, place: str, now: float) -> float | None:
        """Hours of spot a launch at `place` would get now (the trace's next outage); None: no capacity."""
        trace = self.by_place[place]
        tick = math.floor(now / self.gap + 1e-9)
        return (trace.next_down(tick) - tick) * self.gap / HOUR if trace.up_at(tick) else None

    def features(
        self, now: float, option: PlaceOption, spot: Sequence[PlaceOption], history: Mapping[str, SpotHistory]
    ) -> Row:
        known = history.get(option.place, SpotHistory())
        config = policy_module.DEFAULT_CONFIG
        row: Row = {"mean run (h)": known.mean_run(config.prior_run, config.prior_weight) / HOUR}
        row["since place refused/preempted (h)"] = _since(now, [known.last_unavailable])
        row["since region refused/preempted (h)"] = _since(
            now,
            [history.get(p.place, SpotHistory()).last_unavailable for p in spot if p.group == option.group],
        )
        row["since other regions refused/preempted (h)"] = _since(
            now,
            [history.get(p.place, SpotHistory()).last_unavailable for p in spot if p.group != option.group],
        )
        row["outage a launch would end (h)"] = (now - known.down_since) / HOUR if known.down_since else 0.0
        for hours in (3, 12):
            row[f"interruptions last {hours} h (place)"] = sum(
                1 for t in self.events[option.place] if now - t < hours * HOUR
            )
            row[f"interruptions last {hours} h (region)"] = sum(
                1
                for p in spot
                if p.group == option.group
                for t in self.events[p.place]
                if now - t < hours * HOUR
            )
        seen_up = known.last_available is not None and (
            known.last_unavailable is None or known.last_available > known.last_unavailable
        )
        row["age of capacity seen (h)"] = (
            (now - known.last_available) / HOUR if seen_up and known.last_available else 0.0
        )
        return row

    def __call__(
        self, job: DeadlineState, places: Sequence[PlaceOption], history: Mapping[str, SpotHistory]
    ) -> Decision:
        for place, known in history.items():
            if known.interruptions > self.counts[place] and known.last_unavailable is not None:
                self.events[place].append(known.last_unavailable)
            self.counts[place] = known.interruptions
        tick = math.floor(job.now / self.gap + 1e-9)
        spot = [p for p in places if p.spot_price is not None]
        for option in spot:
            run = self.run_left(option.place, job.now)
            if run is None or (self.start, option.place, tick) in self.rows:
                continue
            self.rows[(self.start, option.place, tick)] = {
                "run": run,
                **self.features(job.now, option, spot, history),
            }
        return decide(job, places, history)


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    def ranks(values: Sequence[float]) -> list[float]:
        order = sorted(range(len(values)), key=lambda i: values[i])
        out = [0.0] * len(values)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
                j += 1
            for k in order[i : j + 1]:
                out[k] = (i + j) / 2
            i = j + 1
        return out

    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    spread = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return cov / spread if spread else math.nan


def quartiles(rows: Sequence[Row], name: str, short: float) -> list[dict[str, float]]:
    ordered = sorted(rows, key=lambda r: r[name])
    out = []
    for q in range(4):
        part = ordered[q * len(ordered) // 4 : (q + 1) * len(ordered) // 4]
        if part:
            runs = [r["run"] for r in part]
            out.append(
                {
                    "value": statistics.median(r[name] for r in part),
                    "mean_run_h": statistics.mean(runs),
                    "median_run_h": statistics.median(runs),
                    "short": sum(v < short for v in runs) / len(runs),
                }
            )
    return out


def concordance(moments: Sequence[Sequence[Row]], name: str) -> tuple[float, int]:
    """Of the pairs of places with capacity at one moment whose runs and `name` differ: the share where
    the larger `name` has the longer run, and how many pairs."""
    agree = total = 0
    for rows in moments:
        for i, a in enumerate(rows):
            for b in rows[i + 1 :]:
                if a["run"] != b["run"] and a[name] != b[name]:
                    total += 1
                    agree += (a["run"] > b["run"]) == (a[name] > b[name])
    return (agree / total if total else math.nan), total


@contextmanager
def decision_moments(recorder: Recorder) -> Iterator[tuple[list[Row], list[list[Row]]]]:
    """Records, while open, the launches `_pays_back` allows from on-demand (the place's features and its
    true run; places without capacity left out: a refused launch costs no restart) and, at each ranking
    with two or more places with capacity, those places' features, the policy's estimate among them."""
    leaving: list[Row] = []
    ranking: list[list[Row]] = []
    pays_back, ranked_spot = policy_module._pays_back, policy_module._ranked_spot

    def pays_back_recorded(
        job: DeadlineState,
        option: PlaceOption,
        on_demand: PlaceOption,
        spot: Sequence[PlaceOption],
        history: Mapping[str, SpotHistory],
        *rest: Any,
    ) -> bool:
        allowed = pays_back(job, option, on_demand, spot, history, *rest)
        run = recorder.run_left(option.place, job.now)
        if allowed and run is not None:
            leaving.append({"run": run, **recorder.features(job.now, option, spot, history)})
        return allowed

    def ranked_recorded(
        job: DeadlineState,
        spot: Sequence[PlaceOption],
        history: Mapping[str, SpotHistory],
        config: policy_module.PolicyConfig,
    ) -> list[PlaceOption]:
        ranked = ranked_spot(job, spot, history, config)
        troubled = policy_module._troubled_regions(job, spot, history, config)
        up = []
        for option in ranked:
            run = recorder.run_left(option.place, job.now)
            if run is not None:
                estimate = policy_module._expected_run(option, history, config, troubled) / HOUR
                up.append(
                    {
                        "run": run,
                        "policy's estimate (h)": estimate,
                        **recorder.features(job.now, option, spot, history),
                    }
                )
        if len(up) >= 2:
            ranking.append(up)
        return ranked

    with (
        mock.patch.object(policy_module, "_pays_back", pays_back_recorded),
        mock.patch.object(policy_module, "_ranked_spot", ranked_recorded),
    ):
        yield leaving, ranking


@contextmanager
def told_in(uses: Sequence[str], recorder: Recorder, clock: list[float]) -> Iterator[None]:
    """While open, the policy's functions named in `uses` see each place with capacity's true run length
    (the trace's) in place of `_expected_run`'s estimate; every other use keeps the estimate."""
    estimate = policy_module._expected_run

    def truth(
        option: PlaceOption, history: Mapping[str, SpotHistory], config: Any, troubled: Any = frozenset()
    ) -> float:
        run = recorder.run_left(option.place, clock[0])
        return estimate(option, history, config, troubled) if run is None else run * HOUR

    def telling(name: str) -> Callable[..., Any]:
        original = getattr(policy_module, name)

        def told(*args: Any) -> Any:
            with mock.patch.object(policy_module, "_expected_run", truth):
                return original(*args)

        return told

    with ExitStack() as stack:
        for name in uses:
            stack.enter_context(mock.patch.object(policy_module, name, telling(name)))
        yield


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trace", type=Path, nargs="+", default=None)
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--starts", type=int, default=10, help="start points spread over the traces")
    parser.add_argument("--start-hours", default=None, help="comma separated offsets (overrides --starts)")
    parser.add_argument("--work-hours", type=float, default=48.0)
    parser.add_argument("--deadline-hours", type=float, default=None, help="default: work / 0.8")
    parser.add_argument("--restart-hours", type=float, default=0.2)
    parser.add_argument("--on-demand-price", type=float, default=3.06)
    parser.add_argument("--spot-price", type=float, default=round(3.06 / 3.1, 4))
    parser.add_argument("--json", action="store_true", help="one JSON object instead of the tables")
    args = parser.parse_args(argv)
    files = args.trace or sorted(DEFAULT_TRACES.glob("*.json"))
    if not files:
        raise SystemExit(f"no trace files in {DEFAULT_TRACES}; name them with --trace")
    zones = [load_zone_trace(Path(f)) for f in files]
    traces = [availability(z, args.nodes) for z in zones]
    gap = traces[0].gap
    if any(t.gap != gap for t in traces):
        raise SystemExit("the traces' sample gaps differ; the replay needs one clock")
    n, work, overhead = args.nodes, args.work_hours * HOUR, args.restart_hours * HOUR
    deadline = args.deadline_hours * HOUR if args.deadline_hours else work / 0.8
    # Leaving on-demand for a spot run pays back (see `_pays_back`, the job behind its reserve) if it runs
    # longer than this; a run below it is "short".
    od, sp = args.on_demand_price, args.spot_price
    short = 2 * od * overhead / (od - sp) / HOUR
    span = min(len(t.available) for t in traces) * gap / HOUR - deadline / HOUR - 1
    starts = (
        [float(x) for x in args.start_hours.split(",") if x.strip()]
        if args.start_hours
        else [round(i * max(span, 0) / max(args.starts - 1, 1), 1) for i in range(args.starts)]
    )
    places = [PlaceOption(z.zone, sp * n, od * n, z.region) for z in zones]
    common = {"total_work": work, "deadline_after": deadline, "restart_overhead": overhead}
    recorder = Recorder(traces)
    with decision_moments(recorder) as (leaving, ranking):
        for i, start in enumerate(starts):
            recorder.begin(i)
            replay(recorder, traces, places, start_tick=int(start * HOUR // gap), **common)
    rows = list(recorder.rows.values())
    names = [k for k in rows[0] if k != "run"] if rows else []
    report: dict[str, Any] = {
        "traces": trace_view(traces, 0.6 * HOUR) | {"partial": after_partial(zones, n)},
        "short_run_h": short,
        "every_decision": {
            "pairs": len(rows),
            "features": {
                k: {
                    "rho": spearman([r[k] for r in rows], [r["run"] for r in rows]),
                    "quartiles": quartiles(rows, k, short),
                }
                for k in names
            },
        },
        "leaving_on_demand": {
            "launches": len(leaving),
            "short": sum(r["run"] < short for r in leaving) / len(leaving) if leaving else math.nan,
            "features": {k: quartiles(leaving, k, short) for k in names} if len(leaving) >= 4 else {},
        },
        "ranking": {
            "moments": len(ranking),
            "concordance": {k: concordance(ranking, k) for k in ["policy's estimate (h)", *names]},
        },
    }
    all_od = od * n * (args.work_hours + args.restart_hours)
    best = [optimal_cost(traces, places, start_tick=int(s * HOUR // gap), **common) / all_od for s in starts]
    clock = [0.0]

    def timed(
        job: DeadlineState, options: Sequence[PlaceOption], history: Mapping[str, SpotHistory]
    ) -> Decision:
        clock[0] = job.now
        return decide(job, options, history)

    told = {}
    for label, uses in [
        ("none", []),
        *[(k, [v]) for k, v in USES.items()],
        ("all three", list(USES.values())),
    ]:
        with told_in(uses, recorder, clock):
            costs = [
                replay(timed, traces, places, start_tick=int(s * HOUR // gap), **common).cost / all_od
                for s in starts
            ]
        told[label] = {
            "cost": statistics.mean(costs),
            "x_best": statistics.mean(costs) / statistics.mean(best),
        }
    report["told"] = told
    report["best"] = statistics.mean(best)
    if args.json:
        print(json.dumps(report))
    else:
        print_report(report, starts)
    return 0


def print_report(report: dict[str, Any], starts: Sequence[float]) -> None:
    view = report["traces"]
    print("== the traces ==")
    for zone, z in view["zones"].items():
        print(
            f"{zone}: {z['runs']} spot runs, median {z['median_h']:.2f} h, mean {z['mean_h']:.2f} h, "
            f"p90 {z['p90_h']:.2f} h; spot {z['spot_share']:.0%} of the time"
        )
    print(
        "residual life by age (Kaplan-Meier, all zones):  age h | mean left h | P(ends within 0.5 h) | runs"
    )
    for r in view["residual_life"]:
        print(f"  {r['age_h']:5.2f} | {r['mean_left_h']:6.2f} | {r['p_ends_within_0.5h']:5.2f} | {r['runs']}")
    for kind, a in view["after_outage"].items():
        print(
            f"after a {kind} outage (0.6 h): mean {a['mean_h']:.2f} h, median {a['median_h']:.2f} h, "
            f"{a['share_below_0.5h']:.0%} below 0.5 h ({a['runs']} runs)"
        )
    for kind, a in view["partial"].items():
        print(
            f"runs {kind} (partial capacity): mean {a['mean_h']:.2f} h, median {a['median_h']:.2f} h, "
            f"{a['share_below_0.6h']:.0%} below 0.6 h ({a['runs']} runs)"
        )
    short = report["short_run_h"]
    every = report["every_decision"]
    print(
        f"\n== every decision of decide, {len(starts)} starts: "
        f"{every['pairs']} (moment, place with capacity) =="
    )
    print(f"quartiles of each feature: its value: mean / median true run (h) / share below {short:.2f} h")
    for name, f in every["features"].items():
        cells = "  ".join(
            f"{q['value']:5.2f}: {q['mean_run_h']:4.1f}/{q['median_run_h']:4.2f}/{q['short']:3.0%}"
            for q in f["quartiles"]
        )
        print(f"{name:<42} rho {f['rho']:+.2f} | {cells}")
    leaving = report["leaving_on_demand"]
    print(
        f"\n== leaving on-demand: {leaving['launches']} launches into capacity allowed, "
        f"{leaving['short']:.0%} of them ran below {short:.2f} h =="
    )
    for name, qs in leaving["features"].items():
        cells = "  ".join(f"{q['value']:5.2f}: {q['short']:3.0%}" for q in qs)
        print(f"{name:<42} share short by quartile | {cells}")
    ranking = report["ranking"]
    print(f"\n== ranking: {ranking['moments']} moments with two or more places with capacity ==")
    for name, (share, pairs) in ranking["concordance"].items():
        print(f"{name:<42} orders {share:.0%} of {pairs} pairs as their true runs")
    print(f"\n== told each run's true length (best possible {report['best']:.3f}) ==")
    for label, t in report["told"].items():
        print(f"in {label:<18} {t['cost']:.3f} = {t['x_best']:.3f}x the best")


if __name__ == "__main__":
    raise SystemExit(main())
