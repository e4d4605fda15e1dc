"""What the reconcile sweep's budget checks read as a team's month of finished jobs grows (issue 23 item 3).

For each N of `--finished`, a fresh in-memory job store (shared/store/memory.py, held to DynamoDB's contract)
is seeded with N finished jobs this month for each of `--members` members of team `ml` (tests/history.py: one
a minute, ending now), and one live job per member. Then one reconcile sweep runs through the real code
(shared/jobs/reconcile.py) with no budget, with a monthly budget per user, and with the team's monthly budget;
the store counts the items and requests DynamoDB would read. The monthly spend is read from the owner's cost
rollups of the month's days (one Query per owner per sweep: one item per day and cloud the owner ran on) plus
the current clusters of the live jobs the sweep already read, never from the jobs of the month: the rows say
that its reads grow with the days the history ran on this month, not with its jobs (one job a minute ending
now: 10,000 jobs run over 7 to 8 UTC days, that many rollup items per member; a month holds at most 31).
The budgets' own reads (a GetItem per owner, and for a team one Query of the team budgets, one of each
owner's teams and one of its members) are not counted here: they do not grow with history either.

    .venv/bin/python benchmarks/budget_sweep.py                       # N = 100, 1k, 10k; 3 members
    .venv/bin/python benchmarks/budget_sweep.py --finished 1000 --members 10 --json

`seconds` is this process's time over the memory store (min, median, max over `--runs`), not DynamoDB's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def build(finished: int, members: int, home: Path, budgets: str) -> Any:
    from chaos.memory_objects import MemoryObjects
    from history import seed_memory
    from memory_stack import MemoryQueues

    from shared.budgets.records import Budget, MemoryBudgets, team_scope, user_scope
    from shared.clouds.registry import ProviderRegistry
    from shared.config import Settings
    from shared.states import JobState
    from shared.store.memory import MemoryJobStore
    from shared.wiring import Wiring

    settings = Settings(prefix=f"budget{finished}{budgets}", endpoint_url="http://127.0.0.1:9", home=home)
    store = MemoryJobStore()
    names = [f"member{n}" for n in range(members)]
    records = MemoryBudgets(teams={"ml": set(names)})
    if budgets == "user":
        for name in names:
            records.put(Budget(user_scope(name), 1e9, "stop", "admin"))
    elif budgets == "team":
        records.put(Budget(team_scope("ml"), 1e9, "stop", "admin"))
    providers = ProviderRegistry(settings)
    wiring = Wiring(settings, store, MemoryQueues(), MemoryObjects(), providers, store.cooldowns,
                    budget_records=records)  # fmt: skip
    for name in names:
        seed_memory(store, finished, owner=name, ended_before=time.time())
        job = store.new_job(job_id=f"live-{name}", owner=name, state="PENDING", version=0, token_hash="h")
        assert store.create(job, "submitted")
        assert store.move(job, JobState.PLANNED, "planned")
    return wiring


def measure(finished: int, members: int, runs: int) -> list[dict[str, Any]]:
    from shared.jobs.reconcile import reconcile

    rows = []
    for budgets in ("none", "user", "team"):
        with tempfile.TemporaryDirectory() as home:
            wiring = build(finished, members, Path(home), budgets)
            store = wiring.store
            seconds, reads = [], set()
            for _ in range(runs):
                items, requests = store.items_read, store.requests
                start = time.perf_counter()
                reconcile(wiring=wiring)
                seconds.append(time.perf_counter() - start)
                reads.add((store.items_read - items, store.requests - requests))
            rows.append(
                {
                    "budgets": budgets,
                    "finished_per_member": finished,
                    "members": members,
                    "items_read": max(r[0] for r in reads),
                    "requests": max(r[1] for r in reads),
                    "seconds": round(min(seconds), 4),
                    "seconds_median": round(statistics.median(seconds), 4),
                    "seconds_max": round(max(seconds), 4),
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--finished", default="100,1000,10000", help="comma-separated N per member")
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [row for n in args.finished.split(",") for row in measure(int(n), args.members, args.runs)]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    head = f"{'budgets':8} {'N/member':>9} {'members':>7} {'items read':>10} {'requests':>8}"
    print(f"{head}  seconds min/median/max")
    for row in rows:
        print(
            f"{row['budgets']:8} {row['finished_per_member']:>9} {row['members']:>7} {row['items_read']:>10} "
            f"{row['requests']:>8}  {row['seconds']}/{row['seconds_median']}/{row['seconds_max']}"
        )


if __name__ == "__main__":
    main()
