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
from shared.states import JobState
from shared.storage.lifecycle import check_job_storage
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
    source: str = "cli",
    source_ref: str | None = None,
) -> SubmittedJob:
    """Raises TaskFileError (file/line/field) for a bad task, UserError for a bad option.

    `job_id` lets a caller with its own idempotency key (an S3 upload's bucket/key/ETag) submit
    twice safely: the second submit finds the job and sends nothing.
    `source` says how it came: "cli" (the API, which the CLI and the SDK call), "upload" or "schedule";
    `source_ref` names the upload's key or the schedule.
    """
    from shared.task.loader import load_pipeline

    if minimize not in OBJECTIVES:
        raise UserError(f"unknown objective {minimize!r}", field="minimize", hint="use 'cost' or 'time'")
    pipeline = load_pipeline(
        task_text, filename=filename, env_overrides=env or {}, secret_overrides=secrets or {}
    )
    keys = file_mount_keys or {}
    check_file_mounts(pipeline, keys, owner=owner, bucket=settings.bucket, filename=filename)
    check_job_storage(settings, pipeline, owner=owner, filename=filename, text=task_text)
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
        source=source,
        source_ref=source_ref,
    )
    store_pipeline(wiring, job, pipeline)
    if wiring.store.create(job, f"submitted {filename}"):
        send_optimize(wiring, job.job_id, 0)
        return SubmittedJob(job.job_id, job.state, job.name)
    existing = wiring.store.get(job.job_id)
    state = existing.state if existing else job.state
    return SubmittedJob(job.job_id, state, job.name)
