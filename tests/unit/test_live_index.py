"""Live records indexed apart (issue 20), on the in-memory store that counts what DynamoDB would read: the
reconcile sweep reads only live jobs and clusters whatever the history, a state filter finds an old RUNNING
job behind thousands of finished ones reading one page, and the cursor walks every job exactly once."""

from __future__ import annotations

import time
from typing import Any

import pytest

from shared.errors import UserError
from shared.jobs.job_filters import job_filter
from shared.jobs.job_listing import JobFilter, list_job_page
from shared.jobs.reconcile import reconcile
from shared.states import JobState
from shared.store.live_index import LIVE_SHARDS, live_key, live_keys
from shared.store.memory import MemoryJobStore
from shared.store.models import JobModel
from shared.wiring import Wiring, wiring_for

FINISHED = 3000


def created(store: MemoryJobStore, job_id: str, owner: str = "alice", **fields: Any) -> JobModel:
    job = store.new_job(job_id=job_id, owner=owner, state="PENDING", version=0, token_hash="h", **fields)
    assert store.create(job, "submitted")
    return job


def running(store: MemoryJobStore, job_id: str, owner: str = "alice") -> JobModel:
    job = created(store, job_id, owner)
    for to in (JobState.PLANNED, JobState.SETTING_UP, JobState.RUNNING):
        assert store.move(job, to, f"to {to}")
    return job


def seed_finished(store: MemoryJobStore, count: int, owner: str = "alice") -> None:
    for n in range(count):
        job = created(store, f"old-{n:06d}", owner)
        to = (JobState.FAILED, JobState.CANCELLED)[n % 2]
        assert store.move(job, to, "ended")


@pytest.fixture
def wiring(stack: Any) -> Wiring:
    return wiring_for(stack)


def test_live_attribute_is_set_by_the_write_that_makes_a_job_live_and_removed_by_the_one_that_ends_it() -> (
    None
):
    store = MemoryJobStore(retention_seconds=86400)
    job = created(store, "j1")
    assert (job.live, job.owner_state, job.expires_at) == (live_key("job", "j1"), "alice#PENDING", None)
    assert store.move(job, JobState.CANCELLED, "cancelled")
    stored = store.get("j1")
    assert stored is not None and stored.live is None and stored.owner_state == "alice#CANCELLED"
    assert stored.expires_at == pytest.approx(time.time() + 86400, abs=5)
    assert store.live_jobs() == []


def test_reconcile_reads_only_live_jobs_whatever_the_history(wiring: Wiring) -> None:
    store = wiring.store
    assert isinstance(store, MemoryJobStore)
    live = [running(store, f"live-{n}") for n in range(3)]
    seed_finished(store, FINISHED)
    before = store.items_read
    reconcile(wiring=wiring)
    read = store.items_read - before
    assert read == len(live)  # the live index: no finished job read, no cluster (none is UP)
    before = store.items_read
    store.scan_jobs()
    assert store.items_read - before == FINISHED + len(live)  # what a scan would have read


def test_a_state_filter_returns_an_old_running_job_behind_thousands_of_finished_ones_reading_one_page(
    wiring: Wiring,
) -> None:
    store = wiring.store
    assert isinstance(store, MemoryJobStore)
    old = running(store, "live-old")
    seed_finished(store, FINISHED)
    before = store.items_read
    page = list_job_page(wiring, owner="alice", where=JobFilter(states=frozenset({"RUNNING"}), limit=50))
    assert [j.job_id for j in page.jobs] == [old.job_id]
    assert page.cursor is None
    assert store.items_read - before <= 50 + 1


def test_the_cursor_walks_every_job_once_newest_first_reading_a_page_plus_one_each_time(
    wiring: Wiring,
) -> None:
    store = wiring.store
    assert isinstance(store, MemoryJobStore)
    seed_finished(store, 45)
    seen: list[str] = []
    cursor = None
    while True:
        before = store.items_read
        page = list_job_page(wiring, owner="alice", where=JobFilter(limit=10, cursor=cursor))
        assert store.items_read - before <= 10 + 1
        seen += [j.job_id for j in page.jobs]
        cursor = page.cursor
        if cursor is None:
            break
    assert seen == [f"old-{n:06d}" for n in reversed(range(45))]


def test_several_states_are_merged_newest_first_and_other_owners_are_never_read(wiring: Wiring) -> None:
    store = wiring.store
    assert isinstance(store, MemoryJobStore)
    mine = running(store, "mine-running")
    seed_finished(store, 6)
    for n in range(500):
        created(store, f"bob-{n}", owner="bob")
    where = JobFilter(states=frozenset({"RUNNING", "FAILED"}), limit=2)
    first = list_job_page(wiring, owner="alice", where=where)
    assert [j.job_id for j in first.jobs] == ["old-000004", "old-000002"]
    rest = list_job_page(
        wiring, owner="alice", where=JobFilter(states=where.states, limit=10, cursor=first.cursor)
    )
    assert [j.job_id for j in rest.jobs] == ["old-000000", mine.job_id]
    assert rest.cursor is None
    assert all(j.owner == "alice" for j in store.iter_jobs_of("alice", state="PENDING"))


def test_a_malformed_cursor_is_an_error_naming_the_field() -> None:
    with pytest.raises(UserError) as caught:
        list_job_page(None, owner="alice", where=job_filter(cursor="not-a-cursor"))  # type: ignore[arg-type]
    assert caught.value.field == "cursor"


def test_the_all_users_report_reads_the_days_asked_for_not_the_history() -> None:
    store = MemoryJobStore()
    seed_finished(store, 200)
    for item in list(store._jobs.values()):  # made long ago
        item["created_day"] = {"S": "2020-01-01"}
        item["created_at"] = {"N": "1577880000"}
    created(store, "today")
    before = store.items_read
    found = [j.job_id for j in store.iter_all_jobs(since=time.time() - 7 * 86400)]
    assert found == ["today"]
    assert store.items_read - before == 1


def test_live_records_spread_over_the_index_shards_and_those_written_before_sharding_stay_in_the_sweep() -> (
    None
):
    store = MemoryJobStore()
    jobs = [running(store, f"job-{n:012d}") for n in range(800)]
    legacy = running(store, "job-before-shards")
    store._jobs[legacy.job_id]["live"] = {"S": "job"}  # the constant every live job held before
    per_shard = {key: sum(1 for j in jobs if j.live == key) for key in live_keys("job")}
    assert len(per_shard) == LIVE_SHARDS and min(per_shard.values()) >= 800 / LIVE_SHARDS / 2

    before = store.requests
    found = {j.job_id for j in store.live_jobs()}
    assert found == {j.job_id for j in jobs} | {legacy.job_id} and store.requests - before == LIVE_SHARDS
