"""The `ScheduleStore` contract (shared/store/schedules.py), one set of assertions for every implementation:
here the in-memory store; tests/integration/test_schedule_store_contract_dynamo.py runs these same tests
against DynamoDB (moto's server) too."""

from __future__ import annotations

from typing import Any

import pytest

from shared.store.memory_records import MemoryScheduleStore
from shared.store.schedules import ScheduleModel, ScheduleStore


@pytest.fixture(params=["memory"])
def schedules(request: pytest.FixtureRequest) -> ScheduleStore:
    return MemoryScheduleStore()


def new_row(
    store: ScheduleStore, owner: str = "alice", name: str = "nightly", **fields: Any
) -> ScheduleModel:
    values: dict[str, Any] = {
        "schedule_id": "sch-000000000001", "cron": "0 3 * * *", "task_text": "run: echo hi\n",
        "created_at": 1000.0, "fired_through": 1000.0,
    }  # fmt: skip
    return store.new_schedule(owner, name, **{**values, **fields})


def created(
    store: ScheduleStore, owner: str = "alice", name: str = "nightly", **fields: Any
) -> ScheduleModel:
    row = new_row(store, owner, name, **fields)
    assert store.create(row)
    return row


def test_a_created_schedule_reads_back_with_its_defaults(schedules: ScheduleStore) -> None:
    created(schedules, env='{"A": "1"}')
    row = schedules.get("alice", "nightly")
    assert row is not None
    assert (row.schedule_id, row.cron, row.env, row.paused, row.runs, row.skipped, row.last_job_id) == (
        "sch-000000000001", "0 3 * * *", '{"A": "1"}', False, 0, 0, None,
    )  # fmt: skip
    assert (row.timezone, row.overlap, row.filename, row.minimize) == ("UTC", "skip", "task.yaml", "cost")
    assert schedules.get("alice", "other") is None and schedules.get("bob", "nightly") is None


def test_a_second_create_of_a_name_writes_nothing(schedules: ScheduleStore) -> None:
    created(schedules)
    assert not schedules.create(new_row(schedules, schedule_id="sch-000000000002", cron="* * * * *"))
    row = schedules.get("alice", "nightly")
    assert row is not None and (row.schedule_id, row.cron) == ("sch-000000000001", "0 3 * * *")
    assert schedules.create(new_row(schedules, owner="bob"))  # names are per owner


def test_an_owner_lists_only_their_rows_and_every_lists_all(schedules: ScheduleStore) -> None:
    created(schedules, name="b")
    created(schedules, name="a")
    created(schedules, owner="bob", name="c")
    assert [r.name for r in schedules.of_owner("alice")] == ["a", "b"]
    assert sorted((r.owner, r.name) for r in schedules.every()) == [
        ("alice", "a"),
        ("alice", "b"),
        ("bob", "c"),
    ]
    assert schedules.of_owner("carol") == []


def test_a_read_is_a_copy(schedules: ScheduleStore) -> None:
    created(schedules)
    row = schedules.get("alice", "nightly")
    assert row is not None
    row.paused = True
    again = schedules.get("alice", "nightly")
    assert again is not None and again.paused is False


def test_pause_and_resume_set_the_row_and_the_callers_record(schedules: ScheduleStore) -> None:
    row = created(schedules)
    assert schedules.set_paused(row, True)
    assert row.paused is True and row.fired_through == 1000.0
    assert schedules.set_paused(row, False, fired_through=2000.0)
    stored = schedules.get("alice", "nightly")
    assert stored is not None and (stored.paused, stored.fired_through) == (False, 2000.0)
    assert (row.paused, row.fired_through) == (False, 2000.0)


def test_writes_to_a_deleted_or_recreated_row_change_nothing(schedules: ScheduleStore) -> None:
    old = created(schedules)
    schedules.delete(old)
    schedules.delete(old)  # again: nothing
    assert not schedules.set_paused(old, True)
    assert not schedules.mark_fired(old, 5000.0)
    assert not schedules.count_skipped(old)
    assert not schedules.record_run(old, "job-000000000001", "2026-11-22T03:00:00+00:00")
    assert schedules.get("alice", "nightly") is None  # no half row brought back
    created(schedules, schedule_id="sch-000000000002")
    assert not schedules.mark_fired(old, 5000.0)
    assert not schedules.set_paused(old, True)
    assert not schedules.record_run(old, "job-000000000001", "2026-11-22T03:00:00+00:00")
    new = schedules.get("alice", "nightly")
    assert new is not None and (new.fired_through, new.paused, new.runs) == (1000.0, False, 0)


def test_marking_fired_and_counting_skips(schedules: ScheduleStore) -> None:
    row = created(schedules)
    assert schedules.mark_fired(row, 3000.0)
    assert schedules.count_skipped(row) and schedules.count_skipped(row)
    stored = schedules.get("alice", "nightly")
    assert stored is not None and (stored.fired_through, stored.skipped) == (3000.0, 2)
    assert row.skipped == 2


def test_a_run_is_counted_once_per_job(schedules: ScheduleStore) -> None:
    row = created(schedules)
    stale = schedules.get("alice", "nightly")
    assert stale is not None
    assert schedules.record_run(row, "job-000000000001", "2026-11-22T03:00:00+00:00")
    assert (row.last_job_id, row.runs) == ("job-000000000001", 1)
    assert not schedules.record_run(stale, "job-000000000001", "2026-11-22T03:00:00+00:00")  # a duplicate
    assert schedules.record_run(stale, "job-000000000002", "2026-11-22T03:01:00+00:00")
    stored = schedules.get("alice", "nightly")
    assert stored is not None
    assert (stored.last_job_id, stored.last_fired_at, stored.runs) == (
        "job-000000000002", "2026-11-22T03:01:00+00:00", 2,
    )  # fmt: skip
