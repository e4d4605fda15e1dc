"""A team budget's notices at scale and under concurrency, on the in-memory stack (which counts what
DynamoDB would read): a team of 50 members, one of them with a live job, crossing all three thresholds with
100 or 1,000 finished jobs a member. The sweep reads the same items but the rollups' days whatever the
history, writes one team event per threshold, and the notify function reads one settings item per member
(plus the team's) to tell all 50, never a member's jobs. Two sweeps racing write each threshold once."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from history import seed_memory
from memory_stack import MemoryQueues, memory_stack
from test_budget_spend import HOUR, _rollup_items, _running

from shared.budgets.records import Budget, MemoryBudgets, team_scope
from shared.jobs.budget_checks import BudgetSweep
from shared.jobs.reconcile import reconcile_event
from shared.notifications import team_notices
from shared.notifications.deliveries import Delivery
from shared.notifications.dispatch import notify_event
from shared.notifications.events import TimelineRecord
from shared.store.memory import MemoryJobStore
from shared.store.memory_records import MemoryNotificationStore
from shared.wiring import Wiring, wiring_for

MEMBERS = [f"u-member{n:02d}" for n in range(50)]
SCHEDULED = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}


def _team(wiring: Wiring, finished: int) -> MemoryJobStore:
    store, budgets = wiring.store, wiring.budgets
    assert isinstance(store, MemoryJobStore) and isinstance(budgets, MemoryBudgets)
    budgets.teams = {"ml": set(MEMBERS), "nlp": {"u-outsider"}}
    budgets.put(Budget(team_scope("ml"), 0.5, "warn", "admin"))  # every threshold crossed: $1 running alone
    for member in MEMBERS:
        seed_memory(store, finished, owner=member, ended_before=time.time())
        wiring.notifications.save(
            wiring.notifications.new_item(f"user#{member}", email=f"{member}@example.com")
        )
    wiring.notifications.save(wiring.notifications.new_item("user#u-outsider", email="out@example.com"))
    _running(wiring, "live-member00", MEMBERS[0], launched_at=time.time() - 2 * HOUR)
    return store


def _sweep_and_tell(home: Path, monkeypatch: pytest.MonkeyPatch, finished: int) -> dict[str, Any]:
    sent: list[str] = []

    def deliver(settings: Any, channel: str, target: str, notification: Any) -> Delivery:
        sent.append(target)
        return Delivery(channel, True, 1, target)

    monkeypatch.setattr(team_notices, "deliver", deliver)  # where a send would go; the sends are real in
    # tests/integration/test_team_notices.py
    with memory_stack(home, monkeypatch, MemoryQueues()) as settings:
        wiring = wiring_for(settings)
        store = _team(wiring, finished)
        notifications = wiring.notifications
        assert isinstance(notifications, MemoryNotificationStore)
        before = store.items_read
        reconcile_event(SCHEDULED)  # what the scheduled handler runs for jobs
        swept = store.items_read - before
        events = [e for e in store.timeline("team#ml") if e.kind == "budget"]
        settings_read: list[str] = []
        read = notifications.read
        monkeypatch.setattr(notifications, "read", lambda pk: settings_read.append(pk) or read(pk))
        before = store.items_read
        for event in events * 2:  # each stream record delivered twice
            record = TimelineRecord(
                "team#ml", event.at, "budget", None, event.message, event.detail.as_dict()
            )
            notify_event(settings, record)
        return {
            "swept": swept,
            "rollups": sum(_rollup_items(store, m, time.time()) for m in MEMBERS),
            "percents": [int(e.detail["percent"]) for e in events],
            "sent": sent,
            "settings_read": settings_read,
            "told_reads": store.items_read - before,
        }


def test_fifty_members_are_told_each_threshold_once_reading_no_members_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = _sweep_and_tell(tmp_path / "small", monkeypatch, 100)
    large = _sweep_and_tell(tmp_path / "large", monkeypatch, 1000)

    for run in (small, large):
        assert run["percents"] == [50, 80, 100]
        assert sorted(run["sent"]) == sorted(f"{m}@example.com" for m in MEMBERS for _ in range(3))
        assert "out@example.com" not in run["sent"]  # the other team's member
        assert len(run["settings_read"]) == 2 * 3 * (
            len(MEMBERS) + 1
        )  # per delivery: each member's + the team's
        assert run["told_reads"] == 0  # no job, timeline or rollup read to tell the team
    # the sweep: one rollup Query a member (its days), the same at 100 and 1,000 finished jobs a member
    assert large["swept"] - large["rollups"] == small["swept"] - small["rollups"], (small, large)
    assert large["swept"] - large["rollups"] <= 10, large  # 55 items at 100 a member, 105 at 1,000 (2 days)


def test_two_sweeps_racing_write_each_threshold_of_the_team_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with memory_stack(tmp_path, monkeypatch, MemoryQueues()) as settings:
        wiring = wiring_for(settings)
        store = _team(wiring, 1)
        _running(wiring, "live-member01", MEMBERS[1], launched_at=time.time() - 2 * HOUR)
        start = threading.Barrier(4)

        def sweep(job_id: str) -> None:
            start.wait()
            BudgetSweep(wiring, time.time()).check(store.get(job_id))  # type: ignore[arg-type]

        threads = [threading.Thread(target=sweep, args=(j,)) for j in ("live-member00", "live-member01") * 2]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        events = [e for e in store.timeline("team#ml") if e.kind == "budget"]
        assert sorted(int(e.detail["percent"]) for e in events) == [50, 80, 100]  # type: ignore[index]
        for job_id in ("live-member00", "live-member01"):  # each job records them, told through the team's
            notes = [e for e in store.timeline(job_id) if e.kind == "budget"]
            assert sorted(int(e.detail["percent"]) for e in notes) == [50, 80, 100]  # type: ignore[index]
            assert all(e.detail["team"] == "ml" for e in notes)  # type: ignore[index]
