"""Scale: what each periodic function and listing reads as a stack's history grows (issue 20).

For each N of `--finished`, a fresh in-memory job store (shared/store/memory.py, held to DynamoDB's contract
by tests/integration/test_job_store_contract_dynamo.py) is seeded with N finished jobs written as batches of
the very items the store writes for one (job, three timeline events, cluster record, node ref:
tests/history.py; one a minute, ending `--history-days-ago` days ago: before the report's week) and `--live`
live jobs, one of them an old RUNNING job created before the whole history.
Then each operation runs through the real code (the reconcile sweep, the job listing the API serves, the
all-users cost report) and the store counts what DynamoDB would read: items (a query reads the items of its
key, page by page; a scan reads the table) and requests. The "before" rows are what the sweep's scans read.

    .venv/bin/python benchmarks/scale.py                                  # N = 1k, 10k, 100k; 20 live jobs
    .venv/bin/python benchmarks/scale.py --finished 1000,10000 --live 50 --json

`seconds` is this process's time over the memory store (min over `--runs`), not DynamoDB's latency. The
projected idle cost prices one reconcile a minute (the template's rate) with no live job, at DynamoDB
on-demand $0.25 per million read units: a request at least half a unit (eventually consistent), its items
half a unit per 4 KB read (the seeded items' mean size).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

READ_UNIT_DOLLARS = 0.25 / 1e6
RECONCILES_A_MONTH = 60 * 24 * 30


def build(finished: int, live: int, home: Path, history_days_ago: float) -> Any:
    from chaos.memory_objects import MemoryObjects
    from history import seed_memory
    from memory_stack import MemoryQueues

    from shared.budgets.records import MemoryBudgets
    from shared.clouds.registry import ProviderRegistry
    from shared.config import Settings
    from shared.states import JobState
    from shared.store.memory import MemoryJobStore
    from shared.wiring import Wiring, install_wiring

    settings = Settings(prefix=f"scale{finished}", endpoint_url="http://127.0.0.1:9", home=home)
    store = MemoryJobStore()
    queues: Any = MemoryQueues()
    wiring = Wiring(
        settings, store, queues, MemoryObjects(), ProviderRegistry(settings), store.cooldowns,
        budget_records=MemoryBudgets(),  # another table, which does not grow with history
    )  # fmt: skip
    install_wiring(wiring)
    old = store.new_job(job_id="live-old", owner="alice", state="PENDING", version=0, token_hash="h")
    assert store.create(old, "submitted")
    for to in (JobState.PLANNED, JobState.SETTING_UP, JobState.RUNNING):
        assert store.move(old, to, str(to))
    seed_memory(store, finished, ended_before=time.time() - history_days_ago * 86400)
    for n in range(live - 1):
        job = store.new_job(job_id=f"live-{n}", owner="alice", state="PENDING", version=0, token_hash="h")
        assert store.create(job, "submitted")
        assert store.move(job, JobState.PLANNED, "planned")
    return wiring


def operations(wiring: Any) -> dict[str, Callable[[], Any]]:
    from shared.jobs.cost_report import cost_report
    from shared.jobs.every_users_jobs import list_every_users_page
    from shared.jobs.job_listing import JobFilter, list_job_page
    from shared.jobs.reconcile import reconcile

    store = wiring.store

    def scans_before() -> None:  # what reconcile read before the live index: both tables, whole
        store.scan_jobs()
        store._read(len(store._clusters))

    def running_jobs() -> None:
        page = list_job_page(wiring, owner="alice", where=JobFilter(states=frozenset({"RUNNING"}), limit=200))
        assert "live-old" in [j.job_id for j in page.jobs], "the old RUNNING job is missing"

    def every_users_running() -> None:
        page = list_every_users_page(wiring, JobFilter(states=frozenset({"RUNNING"}), limit=200))
        assert "live-old" in [j.job_id for j in page.jobs], "the old RUNNING job is missing"

    return {
        "reconcile (scan, before)": scans_before,
        "reconcile": lambda: reconcile(wiring=wiring),
        "GET /jobs (limit 200)": lambda: list_job_page(wiring, owner="alice", where=JobFilter(limit=200)),
        "GET /jobs?state=RUNNING": running_jobs,
        "GET /jobs?all_users=true (limit 200)": lambda: list_every_users_page(wiring, JobFilter(limit=200)),
        "GET /jobs?all_users=true&state=RUNNING": every_users_running,
        "cost-report --all-users --days 7": lambda: cost_report(wiring.settings, owner=None, days=7),
        "cost-report --all-users --days 90": lambda: long_report(wiring, owner=None),
        "cost-report --days 90": lambda: long_report(wiring, owner="alice"),
    }


def long_report(wiring: Any, owner: str | None) -> None:
    """The report over 90 days, which hold the whole history: it must count every finished job."""
    from shared.jobs.cost_report import cost_report

    report = cost_report(wiring.settings, owner=owner, days=90)
    finished = sum(1 for key in wiring.store._jobs if key.startswith("hist-"))
    assert report.total.jobs == finished, (report.total.jobs, finished)


def measure(finished: int, live: int, runs: int, history_days_ago: float) -> list[dict[str, Any]]:
    import shared.store.users

    shared.store.users.user_names = lambda settings: {}  # another table, which does not grow with history
    with tempfile.TemporaryDirectory() as home:
        wiring = build(finished, live, Path(home), history_days_ago)
        store = wiring.store
        rows = []
        for name, operation in operations(wiring).items():
            seconds, reads = [], set()
            for _ in range(runs):
                items, requests = store.items_read, store.requests
                start = time.perf_counter()
                operation()
                seconds.append(time.perf_counter() - start)
                reads.add((store.items_read - items, store.requests - requests))
            [(items, requests)] = reads  # the same every run
            rows.append(
                {
                    "operation": name,
                    "finished": finished,
                    "live": live,
                    "items_read": items,
                    "requests": requests,
                    "seconds": round(min(seconds), 4),
                    "seconds_median": round(statistics.median(seconds), 4),
                    "seconds_max": round(max(seconds), 4),
                }
            )
        return rows


def dollars_a_month(requests: int, items: int, item_bytes: float) -> float:
    """One run a minute: each request at least half a read unit, its items half a unit per 4 KB."""
    units = max(0.5 * requests, 0.5 * items * item_bytes / 4096)
    return units * RECONCILES_A_MONTH * READ_UNIT_DOLLARS


def mean_item_bytes(finished: int) -> float:
    """The mean size of the seeded items (jobs, events, clusters), as DynamoDB sizes them (roughly: JSON)."""
    from history import finished_items

    items = [item for _, item in finished_items(min(finished, 200))]
    return statistics.mean(len(json.dumps(item, default=lambda raw: "x" * len(raw))) for item in items)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--finished", default="1000,10000,100000", help="comma-separated N")
    parser.add_argument("--live", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--history-days-ago",
        type=float,
        default=8.0,
        help="the history ends this long ago (one job a minute)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON line per operation and N")
    args = parser.parse_args()
    sizes = [int(n) for n in args.finished.split(",") if n.strip()]
    rows = [row for n in sizes for row in measure(n, args.live, args.runs, args.history_days_ago)]
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return
    header = ("operation", "finished", "live", "items read", "requests", "seconds (min/med/max)")
    print(f"{header[0]:40} {header[1]:>9} {header[2]:>5} {header[3]:>11} {header[4]:>9} {header[5]:>24}")
    for row in rows:
        timing = f"{row['seconds']:.4f}/{row['seconds_median']:.4f}/{row['seconds_max']:.4f}"
        print(
            f"{row['operation']:40} {row['finished']:>9,} {row['live']:>5} {row['items_read']:>11,}"
            f" {row['requests']:>9,} {timing:>24}"
        )
    by_op: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_op.setdefault(row["operation"], []).append(row)
    print()
    for name in (
        "reconcile",
        "GET /jobs (limit 200)",
        "GET /jobs?state=RUNNING",
        "GET /jobs?all_users=true (limit 200)",
        "GET /jobs?all_users=true&state=RUNNING",
        "cost-report --all-users --days 7",
        "cost-report --all-users --days 90",
        "cost-report --days 90",
    ):
        reads = [r["items_read"] for r in by_op[name]]
        spread = (max(reads) - min(reads)) / max(min(reads), 1)
        print(f"{name}: items read from the smallest to the largest N grow by {100 * spread:.1f} %")
    size = mean_item_bytes(sizes[-1])
    from shared.store.live_index import LIVE_SHARDS

    # no live job: the idle stack; + the named-cluster sweep's queries of its live index's shards
    idle = dollars_a_month(by_op["reconcile"][-1]["requests"] + LIVE_SHARDS, 0, size)
    print(f"projected idle cost of reconcile with no live job: ${idle:.3f} a month (any N)")
    for row in by_op["reconcile (scan, before)"]:
        before = dollars_a_month(row["requests"], row["items_read"], size)
        print(f"  before (scans), at {row['finished']:,} finished: ${before:,.2f} a month")


if __name__ == "__main__":
    main()
