"""A user's jobs, a page at a time: each page reads what it returns plus one job (to know whether there is
more), whatever the history behind it, and ends with a cursor for the next page when there is more.

A state filter reads the owner-state index (shared/store/live_index.py): only jobs in the states asked for,
so an old RUNNING job behind thousands of finished ones is on the first page. A name filter cannot be an
index: it examines at most MAX_JOBS_EXAMINED jobs a page and, when it stops there, answers the cursor to go
on from (never a silent cut-off).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass

from shared.errors import UserError
from shared.jobs.views import JobView, job_view
from shared.states import is_terminal
from shared.store.models import JobModel
from shared.wiring import Wiring

MAX_JOBS_EXAMINED = 5000  # a name filter that matches little answers a cursor here rather than read on


@dataclass(frozen=True)
class JobFilter:
    """Which of a user's jobs to list: any of `states`, created at or after `since` (epoch seconds),
    whose name contains `name` (case-insensitive); at most `limit`, newest first, after `cursor` (a page's
    answer). A job group's tasks are not listed: the group's row stands for them (its cost is theirs,
    summed) and `get_job` shows them."""

    states: frozenset[str] = frozenset()
    since: float | None = None
    name: str | None = None
    limit: int = 200
    cursor: str | None = None

    def admits(self, job: JobModel) -> bool:
        if job.group_id is not None:
            return False
        if self.states and job.state not in self.states:
            return False
        return not self.name or self.name.lower() in (job.name or "").lower()


@dataclass(frozen=True)
class JobPage:
    jobs: list[JobView]
    cursor: str | None  # None: this was the last page


def job_cursor(job: JobModel) -> str:
    """The creation time of the last job a page examined: the next page holds the jobs created before it
    (jobs of one owner created within the same microsecond would be taken as one)."""
    return repr(float(job.created_at))


def parse_cursor(cursor: str | None) -> float | None:
    """A UserError naming `cursor` if it is not one a page answered."""
    if not cursor:
        return None
    try:
        value = float(cursor)
    except ValueError:
        value = float("nan")
    if not 0 < value < 1e11 or len(cursor) > 40:
        raise UserError(
            "not a cursor of a job listing", field="cursor", hint="pass the cursor a page answered"
        )
    return value


def list_jobs(wiring: Wiring, *, owner: str, where: JobFilter | None = None) -> list[JobView]:
    return list_job_page(wiring, owner=owner, where=where).jobs


def list_job_page(wiring: Wiring, *, owner: str, where: JobFilter | None = None) -> JobPage:
    """The owner's jobs, newest first (no timelines); a live job's cost counts its cluster up to now."""
    where = where or JobFilter()
    after = parse_cursor(where.cursor)
    jobs: list[JobModel] = []
    cursor = None
    for examined, job in enumerate(_newest_first(wiring, owner, where, after), start=1):
        if len(jobs) >= where.limit:  # the one job read past the page: there is more
            cursor = job_cursor(jobs[-1])
            break
        if where.admits(job):
            jobs.append(job)
        if examined >= MAX_JOBS_EXAMINED and len(jobs) < where.limit:
            cursor = job_cursor(job)
            break
    return job_page(wiring, jobs, cursor)


def job_page(wiring: Wiring, jobs: list[JobModel], cursor: str | None) -> JobPage:
    """The page of `jobs` (no timelines); a live job's cost counts its cluster up to now."""
    live = [j.cluster_id for j in jobs if j.cluster_id and not is_terminal(j.state)]
    clusters = wiring.store.clusters_by_id(live)
    return JobPage([job_view(job, clusters.get(job.cluster_id or ""), None) for job in jobs], cursor)


def _newest_first(wiring: Wiring, owner: str, where: JobFilter, before: float | None) -> Iterator[JobModel]:
    """Each asked state's index (or the owner's) before the cursor, merged newest first; pages of limit+1."""
    states: list[str | None] = [*sorted(where.states)] if where.states else [None]
    streams = [
        wiring.store.iter_jobs_of(
            owner, since=where.since, state=state, before=before, page_size=where.limit + 1
        )
        for state in states
    ]
    return heapq.merge(*streams, key=lambda j: float(j.created_at), reverse=True)
