"""Chaos benchmark: many jobs through the real core operations under faults; prints the invariant counts.

Every message is delivered at least twice (shuffled, late); crashes are injected before and after store,
queue and cloud calls (the operation unwinds, its message comes back); launches meet capacity outages and
transient errors; preemption storms take whole zones, and single nodes of two-node clusters are taken
away; a spot drought comes and goes in one region, where deadline jobs start on on-demand and are moved to
spot, made before break, when it is offered again. Invariants, checked continuously against the cloud's
ground truth: jobs lost, stuck, with two running tasks at once, with an attempt launched while an earlier
one was live (unfenced), with an extra cluster (made before break) live longer than booting may take, a
task started on it while an earlier cluster was live, or a third cluster, VMs left after reconcile (and
after the reaper), illegal moves, handler errors. It also prints what the extra-cluster bounds were tested
on (moves made, extras booted, the longest one), and says so when none booted. The run is tests/chaos/;
tests/integration/test_chaos.py is the same at CI size.

    .venv/bin/python benchmarks/chaos.py --store memory        # 1,000 jobs in waves of 100
    .venv/bin/python benchmarks/chaos.py --jobs 200 --seed 3   # the DynamoDB store (moto)
    .venv/bin/python benchmarks/chaos.py --jobs 100 --without-fence   # shows the checker catching it

`--store dynamodb` (the default) is the real store on moto in this process, with moto's two costs that are
not DynamoDB's taken out (tests/chaos/fast_moto.py: transactions back up the items they touch, as the local
runtime's moto does, not whole tables; item responses are dumped as the wire JSON they already are, which
tests/integration/test_chaos.py checks against moto's own serializer; `--plain-moto` leaves moto as it is).
A run is split into waves of `--wave` jobs, each on fresh tables (jobs of one wave share zones, storms and
cool-downs); the counts are summed over waves. `--store memory` is shared/store/memory.py, held to
DynamoDB's conditions by tests/unit/test_job_store_contract.py, about 13 times faster (a 100-job wave:
about 6 s of CPU, the DynamoDB store's about 77 s); 1,000 jobs in one wave (`--wave 1000`) share every
zone, storm and cool-down (1.5 to 7 min here, with the machine less or more loaded). Waves are independent:
`--first-wave` splits a run over processes (`--jobs 200 --first-wave 4` runs waves 4 and 5 of the same run).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

COUNTS = (
    "lost",
    "stuck",
    "unfenced_launches",
    "extra_cluster_too_long",
    "extra_ran_task",
    "three_live_clusters",
    "two_running_tasks",
    "vms_left_after_reconcile",
    "vms_left_after_reaper",
    "illegal_moves",
    "handler_errors",
)


NOWHERE = "http://127.0.0.1:9"
EXTRA_BOUNDS = ("extra_cluster_too_long", "extra_ran_task", "three_live_clusters")


def run_wave(jobs: int, seed: int, args: argparse.Namespace, home: Path) -> Any:
    from chaos.run import ChaosConfig, run_chaos
    from moto import mock_aws

    from shared.config import Settings
    from shared.store.memory import MemoryJobStore
    from shared.store.models import models_for

    config = ChaosConfig(
        jobs=jobs,
        seed=seed,
        crash_rate=args.crash_rate,
        preemptions_per_hour=args.preemptions_per_hour,
        storms_per_hour=args.storms_per_hour,
        copies=args.copies,
        late_seconds=args.late_seconds,
    )
    prefix = f"chaos{uuid.uuid4().hex[:8]}"
    if args.store == "memory":  # any AWS call that slips past the wiring fails (a handler error)
        settings = Settings(prefix=prefix, home=home, providers="*=sim", endpoint_url=NOWHERE)
        return run_chaos(settings, config, MemoryJobStore())
    if not args.plain_moto:
        from chaos import fast_moto

        fast_moto.install()
    with mock_aws():
        settings = Settings(prefix=prefix, home=home, providers="*=sim")
        for model in models_for(settings).all():
            model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
        return run_chaos(settings, config)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--wave", type=int, default=100, help="jobs per wave (fresh tables each)")
    parser.add_argument(
        "--first-wave", type=int, default=0,
        help="start at this wave (its seed: seed*1000+wave), to split a run over processes",
    )  # fmt: skip
    parser.add_argument(
        "--store", choices=("dynamodb", "memory"), default="dynamodb",
        help="dynamodb: the real store on moto in this process; memory: shared/store/memory.py, held to "
        "DynamoDB's conditions by the contract tests (about 13 times faster)",
    )  # fmt: skip
    parser.add_argument(
        "--plain-moto", action="store_true", help="moto as it is: whole-table copies, its own serializer"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--crash-rate", type=float, default=0.04)
    parser.add_argument("--preemptions-per-hour", type=float, default=240.0)
    parser.add_argument("--storms-per-hour", type=float, default=12.0)
    parser.add_argument("--copies", type=int, default=2, help="deliveries of every message, at least")
    parser.add_argument("--late-seconds", type=float, default=30.0, help="mean lateness of each copy")
    parser.add_argument(
        "--without-fence", action="store_true", help="take the fence out (the checker's check)"
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--stories", action="store_true", help="print what happened to the jobs found")
    args = parser.parse_args()
    fake = {"AWS_ACCESS_KEY_ID": "chaos", "AWS_SECRET_ACCESS_KEY": "chaos", "AWS_DEFAULT_REGION": "us-east-1"}
    for name, value in {**fake, "SKYLESS_AGENT_SECRET": "chaos"}.items():
        os.environ[name] = value
    os.environ.pop("AWS_ENDPOINT_URL", None)
    if args.without_fence:
        import shared.jobs.provisioning as provisioning
        from shared.jobs.fencing import FenceReport

        provisioning.fence_earlier_attempts = lambda wiring, job: FenceReport()  # type: ignore[assignment]

    from chaos.sim_cloud import EXTRA_CLUSTER_SECONDS

    started = time.perf_counter()
    totals: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    findings: dict[str, list[Any]] = {name: [] for name in COUNTS}
    stories: dict[str, list[str]] = {}
    sweeps: dict[str, Counter[str]] = defaultdict(Counter)
    hours = 0.0
    extra_max = 0.0
    crashed_at: set[str] = set()
    called: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="skyless-chaos-") as home:
        done = 0
        wave = args.first_wave
        while done < args.jobs:
            size = min(args.wave, args.jobs - done)
            report = run_wave(size, args.seed * 1000 + wave, args, Path(home))
            summary = report.summary()
            for key, value in summary.items():
                if isinstance(value, int):
                    totals[key] += value
            outcomes.update(report.outcomes)
            reasons.update(report.reasons)
            hours += report.simulated_hours
            extra_max = max(extra_max, report.extra_seconds)
            crashed_at |= report.crashed_at
            stories.update(report.stories)
            for name, (completed, crashed) in report.sweeps.items():
                sweeps[name] += Counter(completed=completed, crashed=crashed)
            called |= report.called
            for name in COUNTS:
                found = getattr(report, name)
                findings[name].extend(list(found.items()) if isinstance(found, dict) else found)
            done += size
            found_here = {name: summary[name] for name in COUNTS if summary[name]}
            elapsed = time.perf_counter() - started
            print(f"wave {wave} (seed {args.seed * 1000 + wave}): {size} jobs, {dict(report.outcomes)}, "
                  f"findings {found_here or 'none'}, {elapsed:.0f} s; {json.dumps(summary)}",
                  file=sys.stderr)  # fmt: skip
            wave += 1
    seconds = time.perf_counter() - started
    result = {"jobs": totals["jobs"], "outcomes": dict(outcomes), "failed_reasons": dict(reasons),
              **{name: totals[name] for name in COUNTS},
              **{k: totals[k] for k in ("crashes", "calls", "messages_sent", "deliveries", "launch_requests",
                                         "preemptions", "storms", "stale_agents_stopped",
                                         "extra_clusters_booted", "moves", "moves_in_timelines",
                                         "extras_let_go", "moves_refused", "spot_refused")},
              "extra_cluster_max_seconds": extra_max,
              "crash_points": f"{len(crashed_at)} of {2 * len(called)}", "simulated_hours": round(hours, 1),
              "wall_seconds": round(seconds, 1), "fenced": not args.without_fence,
              "store": args.store + (" (plain moto)" if args.plain_moto and args.store == "dynamodb" else ""),
              "seed": args.seed, "wave": args.wave, "waves": f"{args.first_wave}-{wave - 1}",
              "cpu_seconds": round(time.process_time(), 1)}  # fmt: skip
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"chaos: {result['jobs']} jobs ({'fenced' if result['fenced'] else 'FENCE TAKEN OUT'}), store "
          f"{result['store']}, seed {result['seed']}, waves {result['waves']} of {result['wave']} jobs: "
          f"{result['simulated_hours']} "
          f"simulated hours in {result['wall_seconds']} s ({result['cpu_seconds']} s CPU)")  # fmt: skip
    print(f"  outcomes: {result['outcomes']}  (failed because: {result['failed_reasons']})")
    faults = ("crashes", "calls", "messages_sent", "deliveries", "launch_requests", "preemptions", "storms")
    print("  faults: " + ", ".join(f"{k} {result[k]}" for k in (*faults, "stale_agents_stopped")))
    print("  sweeps: " + ", ".join(f"{name} {c['completed']} completed, {c['crashed']} ended by a crash"
                                   for name, c in sorted(sweeps.items())))  # fmt: skip
    missed = sorted(f"{label}:{when}" for label in called for when in ("before", "after"))
    missed = [point for point in missed if point not in crashed_at]
    print(f"  crash points (store/queue/cloud method x before/after) hit: {result['crash_points']}"
          + (f"; not hit: {', '.join(missed)}" if missed else ""))  # fmt: skip
    print(f"  made before break: {result['moves_in_timelines']} move(s) in the jobs' timelines; "
          f"{result['extra_clusters_booted']} extra cluster(s) booted beside a live one ({result['moves']} "
          f"became the job's only cluster, {result['extras_let_go']} let go), the longest live "
          f"{result['extra_cluster_max_seconds']:.0f} s of the {EXTRA_CLUSTER_SECONDS:.0f} s allowed; "
          f"{result['moves_refused']} launch(es) refused beside a running cluster (it stayed); "
          f"{result['spot_refused']} spot launch(es) refused by droughts")  # fmt: skip
    unexercised = set() if result["extra_clusters_booted"] else set(EXTRA_BOUNDS)
    if unexercised:
        print("  NOT EXERCISED: no extra cluster booted, so the extra-cluster bounds were not tested")
    print("  invariants (all must be 0):")
    for name in COUNTS:
        shown = "not exercised" if name in unexercised else result[name]
        print(f"    {name:26s} {shown}")
        for item in findings[name][:3]:
            print(f"        e.g. {str(item)[:300]}")
            story = stories.get(item[0]) if isinstance(item, tuple) else None
            for line in (story or [])[:60] if args.stories else ():
                print(f"            {line}")


if __name__ == "__main__":
    main()
