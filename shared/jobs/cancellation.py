"""Cancel: any live job -> CANCELLED, and its nodes torn down by tag. Cancelling twice is fine;
cancelling a finished job is a ConflictError. A launch that completes after the cancel terminates what
it launched (shared.jobs.provisioning)."""

from __future__ import annotations

from shared.errors import ConflictError, NotFoundError
from shared.jobs.costs import cost_with
from shared.jobs.job_groups import step_group, tell_group
from shared.jobs.messages import cluster_id_for, send_teardown
from shared.states import JobState, is_terminal
from shared.store.models import JobModel
from shared.wiring import Wiring

ATTEMPTS_ON_RACE = 5


def cancel_job(wiring: Wiring, job_id: str, *, owner: str | None) -> JobModel:
    """`owner=None` skips the ownership check (the operator, tests). Returns the job as it now stands."""
    for _ in range(ATTEMPTS_ON_RACE):
        job = wiring.store.get(job_id)
        if job is None or (owner is not None and job.owner != owner):
            raise NotFoundError(f"no job {job_id}", field="job_id")
        if job.state == JobState.CANCELLED:
            return job
        if is_terminal(job.state):
            raise ConflictError(f"job {job_id} already {job.state}", field="job_id")
        cluster_id = job.cluster_id or cluster_id_for(job.job_id, int(job.attempt))
        cost = cost_with(job, wiring.store.cluster(job.cluster_id))
        changes = {"reason": "cancelled by the user", "cost": cost}
        if wiring.store.move(job, JobState.CANCELLED, "cancelled", changes=changes):
            if job.group_tasks:  # a job group: its members stop (a lost step is the reconcile sweep's)
                step_group(wiring, job.job_id)
            else:
                send_teardown(wiring, job.job_id, int(job.attempt), cluster_id)
                tell_group(wiring, job)
            return job
    raise ConflictError(f"job {job_id} kept changing; try again", field="job_id")
