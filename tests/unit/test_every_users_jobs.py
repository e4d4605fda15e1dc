"""An admin's listing of every user's jobs (`GET /jobs?all_users=true`, `skyless queue -u`) over a store
seeded with thousands of finished jobs of many users, on the in-memory store that counts what DynamoDB
would read: a page reads what it shows plus one job (the created-day index), a live-state filter reads only
the live jobs (the live index), and the cursor walks every user's jobs exactly once, newest first."""

from __future__ import annotations

import time
from typing import Any

import pytest
from history import seed_memory

from shared.errors import UserError
from shared.jobs.every_users_jobs import MAX_DAYS_EXAMINED, list_every_users_page
from shared.jobs.job_listing import JobFilter
from shared.states import JobState
from shared.store.memory import MemoryJobStore
from shared.store.models import JobModel
from shared.wiring import Wiring, wiring_for

USERS = [f"user-{n:02d}" for n in range(12)]
PER_USER = 300  # 3,600 finished jobs, one a minute per user, ending a day ago
DAY = 86400.0


def running(store: MemoryJobStore, job_id: str, owner: str, created_at: float | None = None) -> JobModel:
    job = store.new_job(job_id=job_id, owner=owner, state="PENDING", version=0, token_hash="h")
    assert store.create(job, "submitted")
    for to in (JobState.PLANNED, JobState.SETTING_UP, JobState.RUNNING):
        assert store.move(job, to, f"to {to}")
    if created_at is not None:  # as if submitted then (the created-day index follows the time)
        item = store._jobs[job_id]
        item["created_at"] = {"N": repr(created_at)}
        item["created_day"] = {"S": time.strftime("%Y-%m-%d", time.gmtime(created_at))}
    return job


@pytest.fixture
def wiring(stack: Any) -> Wiring:
    wiring = wiring_for(stack)
    assert isinstance(wiring.store, MemoryJobStore)
    for n, user in enumerate(USERS):
        seed_memory(wiring.store, PER_USER, owner=user, ended_before=time.time() - DAY - n * 7)
    return wiring


def reads(store: Any) -> tuple[int, int]:
    return store.items_read, store.requests


def test_a_page_of_every_users_jobs_reads_the_page_plus_one_whatever_the_history(wiring: Wiring) -> None:
    store: Any = wiring.store
    live = [running(store, f"live-{user}", user) for user in USERS[:3]]
    items, requests = reads(store)
    page = list_every_users_page(wiring, JobFilter(limit=200))
    read, asked = store.items_read - items, store.requests - requests
    assert len(page.jobs) == 200 and page.cursor is not None
    assert read == 200 + 1  # the page and the one past it (the live jobs have no cluster yet)
    assert asked <= 3  # today's partition of the created-day index and the day(s) the history spans
    owners = {job.owner for job in page.jobs}
    assert owners == set(USERS)  # every user's, each job with its owner
    assert [j.job_id for j in page.jobs[:3]] == [j.job_id for j in reversed(live)]  # newest first
    created = [j.created_at or "" for j in page.jobs]
    assert created == sorted(created, reverse=True)
    store_total = len(store._jobs)
    assert store_total == len(USERS) * PER_USER + len(live) and read < store_total / 15


def test_the_cursor_walks_every_users_jobs_once_newest_first_to_the_retention_horizon(wiring: Wiring) -> None:
    store: Any = wiring.store
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        items, requests = reads(store)
        page = list_every_users_page(wiring, JobFilter(limit=1000, cursor=cursor))
        assert store.items_read - items <= 1000 + 1
        assert store.requests - requests <= MAX_DAYS_EXAMINED + 2  # a query a day (+ a page, a BatchGet)
        seen += [job.job_id for job in page.jobs]
        pages += 1
        cursor = page.cursor
        if cursor is None:
            break
    days = wiring.settings.retention_days
    assert pages <= 4 + days // MAX_DAYS_EXAMINED + 1  # 3,600 jobs, then the empty days, a month a page
    expected = sorted(store._jobs.values(), key=lambda i: float(i["created_at"]["N"]), reverse=True)
    assert seen == [item["job_id"]["S"] for item in expected]


def test_a_live_state_filter_reads_only_live_jobs_and_finds_one_older_than_the_history(
    wiring: Wiring,
) -> None:
    store: Any = wiring.store
    old = running(store, "live-old", "user-05", created_at=time.time() - 20 * DAY)
    newer = running(store, "live-new", "user-07")
    items = store.items_read
    page = list_every_users_page(wiring, JobFilter(states=frozenset({"RUNNING"}), limit=50))
    assert [(j.job_id, j.owner) for j in page.jobs] == [(newer.job_id, "user-07"), (old.job_id, "user-05")]
    assert page.cursor is None
    assert store.items_read - items == 2  # the two live jobs (no cluster record: none is UP)


def test_a_finished_state_filter_and_a_name_filter_page_through_the_created_day_index(wiring: Wiring) -> None:
    store: Any = wiring.store
    running(store, "live-x", "user-01")
    page = list_every_users_page(wiring, JobFilter(states=frozenset({"SUCCEEDED"}), limit=20))
    assert len(page.jobs) == 20 and {j.state for j in page.jobs} == {"SUCCEEDED"}
    assert page.cursor is not None
    none = list_every_users_page(wiring, JobFilter(name="no-such-name", limit=20))
    assert none.jobs == [] and none.cursor is not None  # stopped at the examined cap: a cursor, not a cut


def test_a_quiet_history_answers_a_cursor_after_a_month_of_days_rather_than_query_every_day(
    stack: Any,
) -> None:
    wiring = wiring_for(stack)
    store: Any = wiring.store
    old = running(store, "live-ancient", "user-03", created_at=time.time() - 100 * DAY)
    store.move(old, JobState.CANCELLED, "cancelled")
    requests = store.requests
    first = list_every_users_page(wiring, JobFilter(limit=10))
    assert store.requests - requests == MAX_DAYS_EXAMINED  # one query of each day examined, all empty
    assert first.jobs == [] and first.cursor is not None
    cursor, found = first.cursor, []
    while cursor is not None and not found:
        page = list_every_users_page(wiring, JobFilter(limit=10, cursor=cursor))
        found, cursor = page.jobs, page.cursor
    assert [j.job_id for j in found] == ["live-ancient"]


def test_a_cursor_that_no_page_answered_is_refused_naming_it(wiring: Wiring) -> None:
    with pytest.raises(UserError) as refused:
        list_every_users_page(wiring, JobFilter(cursor="yesterday"))
    assert refused.value.field == "cursor"
