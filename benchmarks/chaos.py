"""Chaos benchmark: many jobs through the real core operations under faults; prints the invariant counts.

Every message is delivered at least twice (shuffled, late); crashes are injected before and after store,
queue and cloud calls (the operation unwinds, its message comes back); launches meet capacity outages and
transient errors; preemption storms take whole zones, and single nodes of two-node clusters are taken
away. Invariants, checked continuously against the cloud's ground truth: jobs lost, stuck, with two running
tasks at once, with an attempt launched while an earlier one was live (unfenced), with an extra cluster
(made before break) live longer than booting may take or a third cluster, VMs left after reconcile (and
after the reaper), illegal moves, handler errors. The run is tests/chaos/ (see its README-like docstring);
tests/test_chaos.py is the same at CI size.

    .venv/bin/python benchmarks/chaos.py                      # 1,000 jobs in waves of 100
    .venv/bin/python benchmarks/chaos.py --jobs 200 --seed 3
    .venv/bin/python benchmarks/chaos.py --jobs 100 --without-fence   # shows the checker catching it

DynamoDB is moto in this process. moto's TransactWriteItems copies whole tables, so a run is split into
waves of `--wave` jobs, each on fresh tables (jobs of one wave share zones, storms and cool-downs); the
counts are summed over waves.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

COUNTS = (
    "lost",
    "stuck",
    "unfenced_launches",
    "extra_cluster_too_long",
    "three_live_clusters",
    "two_running_tasks",
    "vms_left_after_reconcile",
    "vms_left_after_reaper",
    "illegal_moves",
    "handler_errors",
)


def run_wave(jobs: int, seed: int, args: argparse.Namespace, home: Path) -> Any:
    from chaos.run import ChaosConfig, run_chaos
    from moto import mock_aws

    from shared.config import Settings
    from shared.store.models import models_for

    with mock_aws():
        settings = Settings(prefix=f"chaos{uuid.uuid4().hex[:8]}", home=home, providers="*=sim")
        for model in models_for(settings).all():
            model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
        config = ChaosConfig(
            jobs=jobs,
            seed=seed,
            crash_rate=args.crash_rate,
            preemptions_per_hour=args.preemptions_per_hour,
            storms_per_hour=args.storms_per_hour,
            copies=args.copies,
            late_seconds=args.late_seconds,
        )
        return run_chaos(settings, config)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--wave", type=int, default=100, help="jobs per wave (fresh tables each)")
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
    args = parser.parse_args()
    fake = {"AWS_ACCESS_KEY_ID": "chaos", "AWS_SECRET_ACCESS_KEY": "chaos", "AWS_DEFAULT_REGION": "us-east-1"}
    for name, value in {**fake, "SKYLESS_AGENT_SECRET": "chaos"}.items():
        os.environ[name] = value
    os.environ.pop("AWS_ENDPOINT_URL", None)
    if args.without_fence:
        import shared.jobs.provisioning as provisioning
        from shared.jobs.fencing import FenceReport

        provisioning.fence_earlier_attempts = lambda wiring, job: FenceReport()  # type: ignore[assignment]

    started = time.perf_counter()
    totals: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    findings: dict[str, list[str]] = {name: [] for name in COUNTS}
    hours = 0.0
    extra_max = 0.0
    crashed_at: set[str] = set()
    called: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="skyless-chaos-") as home:
        done = 0
        wave = 0
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
            called |= report.called
            for name in COUNTS:
                found = getattr(report, name)
                findings[name].extend(list(found.items()) if isinstance(found, dict) else found)
            done += size
            wave += 1
            print(f"wave {wave}: {size} jobs, {dict(report.outcomes)}, "
                  f"{sum(totals[n] for n in COUNTS)} findings so far", file=sys.stderr)  # fmt: skip
    seconds = time.perf_counter() - started
    result = {"jobs": totals["jobs"], "outcomes": dict(outcomes), "failed_reasons": dict(reasons),
              **{name: totals[name] for name in COUNTS},
              **{k: totals[k] for k in ("crashes", "calls", "messages_sent", "deliveries", "launch_requests",
                                         "preemptions", "storms", "stale_agents_stopped",
                                         "extra_clusters_booted")},
              "extra_cluster_max_seconds": extra_max,
              "crash_points": f"{len(crashed_at)} of {2 * len(called)}", "simulated_hours": round(hours, 1),
              "wall_seconds": round(seconds, 1), "fenced": not args.without_fence}  # fmt: skip
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"chaos: {result['jobs']} jobs ({'fenced' if result['fenced'] else 'FENCE TAKEN OUT'}), "
          f"{result['simulated_hours']} simulated hours in {result['wall_seconds']} s")  # fmt: skip
    print(f"  outcomes: {result['outcomes']}  (failed because: {result['failed_reasons']})")
    faults = ("crashes", "calls", "messages_sent", "deliveries", "launch_requests", "preemptions", "storms")
    print("  faults: " + ", ".join(f"{k} {result[k]}" for k in (*faults, "stale_agents_stopped")))
    missed = sorted(f"{label}:{when}" for label in called for when in ("before", "after"))
    missed = [point for point in missed if point not in crashed_at]
    print(f"  crash points (store/queue/cloud method x before/after) hit: {result['crash_points']}"
          + (f"; not hit: {', '.join(missed)}" if missed else ""))  # fmt: skip
    print(f"  made before break: {result['extra_clusters_booted']} extra cluster(s) booted, the longest live "
          f"{result['extra_cluster_max_seconds']:.0f} s beside the running one")  # fmt: skip
    print("  invariants (all must be 0):")
    for name in COUNTS:
        print(f"    {name:26s} {result[name]}")
        for item in findings[name][:3]:
            print(f"        e.g. {str(item)[:300]}")


if __name__ == "__main__":
    main()
