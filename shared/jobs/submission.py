"""Submit: validate the task file, record the job PENDING, and ask for a plan."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from shared.config import Settings
from shared.errors import UserError
from shared.jobs.file_mounts import check_file_mounts, encode_keys
from shared.jobs.messages import send_optimize
from shared.jobs.task_records import store_pipeline
from shared.notifications.settings import check_email, check_webhook, store_job_override
from shared.states import JobState
from shared.unsupported_fields import pipeline_notes
from shared.wiring import wiring_for

OBJECTIVES = ("cost", "time")


@dataclass(frozen=True)
class SubmittedJob:
    job_id: str
    state: str
    name: str | None


def new_job_id() -> str:
    return f"job-{uuid.uuid4().hex[:12]}"


def submit_job(
    settings: Settings,
    *,
    owner: str,
    task_text: str,
    filename: str = "task.yaml",
    env: dict[str, str] | None = None,
    secrets: dict[str, str] | None = None,
    minimize: str = "cost",
    clouds: list[str] | None = None,
    workdir_key: str | None = None,
    file_mount_keys: dict[str, str] | None = None,
    job_id: str | None = None,
    notify_slack: str | None = None,
    notify_email: str | None = None,
) -> SubmittedJob:
    """Raises TaskFileError (file/line/field) for a bad task, UserError for a bad option.

    `job_id` lets a caller with its own idempotency key (an S3 upload's bucket/key/ETag) submit
    twice safely: the second submit finds the job and sends nothing.
    `notify_slack`/`notify_email` override the owner's notification channels for this job (the webhook
    is kept as a Secrets Manager secret; the notifications table holds its name).
    """
    from shared.task_loader import load_pipeline

    if minimize not in OBJECTIVES:
        raise UserError(f"unknown objective {minimize!r}", field="minimize", hint="use 'cost' or 'time'")
    pipeline = load_pipeline(
        task_text, filename=filename, env_overrides=env or {}, secret_overrides=secrets or {}
    )
    if notify_slack:
        check_webhook(notify_slack, field="notify.slack_webhook")
    if notify_email:
        check_email(notify_email, field="notify.email")
    keys = file_mount_keys or {}
    check_file_mounts(pipeline, keys, owner=owner, bucket=settings.bucket, filename=filename)
    wiring = wiring_for(settings)
    job = wiring.store.jobs(
        job_id=job_id or new_job_id(),
        owner=owner,
        name=pipeline.name or pipeline.tasks[0].name,
        state=JobState.PENDING.value,
        version=0,
        attempt=0,
        minimize=minimize,
        clouds=json.dumps(sorted(c.lower() for c in clouds)) if clouds else None,
        workdir_key=workdir_key,
        file_mounts=encode_keys(keys),
        token_hash="-",  # set per attempt when provisioning starts
    )
    store_pipeline(wiring, job, pipeline)
    store_job_override(settings, job.job_id, slack_webhook=notify_slack, email=notify_email)
    notes = pipeline_notes(pipeline)  # fields read but not acted on: in the timeline, so `status` says them
    if wiring.store.create(job, f"submitted {filename}", {"notes": notes} if notes else None):
        send_optimize(wiring, job.job_id, 0)
        return SubmittedJob(job.job_id, job.state, job.name)
    existing = wiring.store.get(job.job_id)
    state = existing.state if existing else job.state
    return SubmittedJob(job.job_id, state, job.name)
