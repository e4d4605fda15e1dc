"""The scorecard's reads, through the JobStore port (so they follow it when the store is re-pointed).

What one report reads: the jobs created in the window (the owner's through the owner index; an admin's
report through `iter_all_jobs`, one created-day index Query per day, as the cost report), at most
`MAX_SCORECARD_JOBS`; their attempts' cluster records (one BatchGetItem per 100); each of those jobs'
timeline (a Query); and the refused launches (a Query of shared/jobs/failover.py's `refusals_partition`) of
the jobs that have some, by their record's `refusals_noted` (not False: a job created before the flag was
kept is read as ever). Nothing else: no scan of the events or clusters tables.
"""

from __future__ import annotations

import time
from typing import Any

from shared.jobs.cost_report import cluster_record, job_record
from shared.jobs.failover import refusals_partition
from shared.reports.provider_scorecard import JobHistory, Scorecard, TimelineEvent, build_scorecard
from shared.store.models import EventModel
from shared.wiring import Wiring

MAX_SCORECARD_JOBS = 2000


def _event_time(at: str) -> float:
    return float(at.split("#", 1)[0])


def timeline_event(event: EventModel) -> TimelineEvent:
    detail: Any = event.detail
    plain = detail.as_dict() if hasattr(detail, "as_dict") else dict(detail or {})
    return TimelineEvent(
        at=_event_time(event.at), kind=event.kind, state=event.state, message=event.message, detail=plain
    )


def _partitions(job_id: str, refused: bool) -> tuple[str, ...]:
    return (job_id, refusals_partition(job_id)) if refused else (job_id,)


def provider_scorecard(
    wiring: Wiring, *, owner: str | None, days: int = 30, now: float | None = None
) -> Scorecard:
    """The scorecard over jobs created in the last `days` days: `owner`'s, or everyone's (owner None: the
    caller has checked that an admin asks)."""
    now = now or time.time()
    since = now - days * 86400
    store = wiring.store
    rows = store.iter_all_jobs(since=since) if owner is None else store.iter_jobs_of(owner, since=since)
    jobs = []
    refused: set[str] = set()
    for row in rows:
        jobs.append(job_record(row))
        if row.refusals_noted is not False:
            refused.add(row.job_id)
        if len(jobs) >= MAX_SCORECARD_JOBS:
            break
    clusters_by_job: dict[str, list[Any]] = {}
    ids = [f"{job.job_id}-{n}" for job in jobs for n in range(job.attempt + 1)]
    for cluster in store.clusters_by_id(ids).values():
        clusters_by_job.setdefault(cluster.job_id, []).append(cluster_record(cluster))
    histories = [
        JobHistory(
            job=job,
            clusters=tuple(clusters_by_job.get(job.job_id, ())),
            events=tuple(
                timeline_event(e)
                for partition in _partitions(job.job_id, job.job_id in refused)
                for e in store.timeline(partition)
            ),
        )
        for job in jobs
    ]
    return build_scorecard(
        histories, wiring.catalog, since=since, now=now, days=days, all_users=owner is None
    )
