"""The scorecard's reads, through the JobStore port (so they follow it when the store is re-pointed).

What one report reads: the jobs created in the window (the owner's through the owner index; an admin's
report through `iter_all_jobs`, one created-day index Query per day, as the cost report), at most
`MAX_SCORECARD_JOBS`; their attempts' cluster records (one BatchGetItem per 100); each of those jobs'
timeline (a Query: its first event and launches, kept in the job's and clusters' records, are taken from
those already read); and the refused launches (a Query of shared/jobs/failover.py's `refusals_partition`) of
the jobs that have some, by their record's `refusals_noted` (not False: a job created before the flag was
kept is read as ever). Nothing else: no scan of the events or clusters tables.
"""

from __future__ import annotations

import time
from typing import Any

from shared.jobs.cost_report import cluster_record, job_record
from shared.jobs.failover import refusals_partition
from shared.reports.provider_scorecard import JobHistory, Scorecard, TimelineEvent, build_scorecard
from shared.store.models import ClusterModel, EventModel, JobModel
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


def provider_scorecard(
    wiring: Wiring, *, owner: str | None, days: int = 30, now: float | None = None
) -> Scorecard:
    """The scorecard over jobs created in the last `days` days: `owner`'s, or everyone's (owner None: the
    caller has checked that an admin asks)."""
    now = now or time.time()
    since = now - days * 86400
    store = wiring.store
    rows = store.iter_all_jobs(since=since) if owner is None else store.iter_jobs_of(owner, since=since)
    jobs: list[JobModel] = []
    for row in rows:
        jobs.append(row)
        if len(jobs) >= MAX_SCORECARD_JOBS:
            break
    clusters_by_job: dict[str, list[ClusterModel]] = {}
    ids = [f"{job.job_id}-{n}" for job in jobs for n in range(int(job.attempt) + 1)]
    for cluster in store.clusters_by_id(ids).values():
        clusters_by_job.setdefault(cluster.job_id, []).append(cluster)
    histories = []
    for job in jobs:
        clusters = clusters_by_job.get(job.job_id, [])
        events = store.job_timeline(job, clusters)
        if job.refusals_noted is not False:
            events += store.timeline(refusals_partition(job.job_id))
        histories.append(
            JobHistory(
                job=job_record(job),
                clusters=tuple(cluster_record(c) for c in clusters),
                events=tuple(timeline_event(e) for e in events),
            )
        )
    return build_scorecard(
        histories, wiring.catalog, since=since, now=now, days=days, all_users=owner is None
    )
