"""Every user's jobs, a page at a time, for an admin key (`GET /jobs?all_users=true`, `skyless queue -u`):
the pages of a user's own listing (shared/jobs/job_listing.py), read from the indexes that hold every
owner's jobs, never by a scan of the table:

- only live states asked for (`--state running`, `-s`): the sparse live index (shared/store/live_index.py),
  which holds the live jobs alone, whatever the history behind them;
- otherwise the created-day index, newest day first, from the cursor's day (or today) back to `since` (or
  the retention horizon, before which nothing is kept). A page reads what it returns plus one job, and
  examines at most MAX_DAYS_EXAMINED days and MAX_JOBS_EXAMINED jobs, answering the cursor to go on from
  when it stops there (never a silent cut-off).

As in the owner's listing, the cursor is a creation time: jobs of different users created within the same
microsecond on a page's edge would be taken as one.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from shared.jobs.job_listing import (
    MAX_JOBS_EXAMINED,
    JobFilter,
    JobPage,
    job_cursor,
    job_page,
    parse_cursor,
)
from shared.store.live_index import LIVE_STATES, day_of
from shared.store.models import JobModel
from shared.wiring import Wiring

MAX_DAYS_EXAMINED = 31  # a page over a quiet stretch answers a cursor here rather than query every day


def list_every_users_page(wiring: Wiring, where: JobFilter, *, now: float | None = None) -> JobPage:
    """Every user's jobs matching `where`, newest first, each with its owner."""
    now = time.time() if now is None else now
    before = parse_cursor(where.cursor)
    if where.states and where.states <= LIVE_STATES:
        return _live_page(wiring, where, before)
    since = where.since if where.since is not None else now - wiring.settings.retention_seconds
    jobs: list[JobModel] = []
    examined = 0
    for n, day in enumerate(_days(since, now if before is None else min(before, now))):
        if n == MAX_DAYS_EXAMINED:
            return job_page(wiring, jobs, repr(_start_of(day) + 86400))
        wanted = where.limit + 1 - len(jobs)
        for job in wiring.store.iter_jobs_of_day(day, since=since, before=before, page_size=wanted):
            examined += 1
            if len(jobs) >= where.limit:  # the one job read past the page: there is more
                return job_page(wiring, jobs, job_cursor(jobs[-1]))
            if where.admits(job):
                jobs.append(job)
            if examined >= MAX_JOBS_EXAMINED and len(jobs) < where.limit:
                return job_page(wiring, jobs, job_cursor(job))
    return job_page(wiring, jobs, None)


def _live_page(wiring: Wiring, where: JobFilter, before: float | None) -> JobPage:
    found = [
        job
        for job in wiring.store.live_jobs()
        if where.admits(job)
        and (where.since is None or float(job.created_at) >= where.since)
        and (before is None or float(job.created_at) < before)
    ]
    found.sort(key=lambda job: float(job.created_at), reverse=True)
    page = found[: where.limit]
    return job_page(wiring, page, job_cursor(page[-1]) if len(found) > where.limit else None)


def _days(since: float, newest: float) -> list[str]:
    """The UTC days from `newest`'s back to `since`'s, newest first."""
    days, moment = [], newest
    while day_of(moment) >= day_of(since):
        days.append(day_of(moment))
        moment -= 86400
    return days


def _start_of(day: str) -> float:
    return datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC).timestamp()
