"""Submit: one command (`SubmitJob`, its task file parsed at the edge): check the options, plan it, record the
job PLANNED and ask for its launch (a task the catalog cannot place is recorded PENDING for the optimize
function to fail with the reason)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shared.errors import NoOfferingError, UserError
from shared.jobs.budget_checks import check_launch_allowed
from shared.jobs.containers import check_containers, keep_registry_password_secret
from shared.jobs.deadlines import deadline_fields
from shared.jobs.file_mounts import check_file_mounts, encode_keys
from shared.jobs.job_groups import submit_group
from shared.jobs.messages import send_launch, send_optimize
from shared.jobs.planning import candidate_text, make_plan, plan_fields, plan_of, sources_field
from shared.jobs.task_records import store_pipeline
from shared.jobs.tokens import agent_token, token_hash
from shared.states import JobState
from shared.storage.access import StorageWalls
from shared.storage.lifecycle import check_job_storage
from shared.store.models import JobModel
from shared.task.spec import Pipeline
from shared.task.unsupported_fields import pipeline_notes
from shared.wiring import Wiring

if TYPE_CHECKING:
    from shared.storage.gravity import JobData

OBJECTIVES = ("cost", "time")


@dataclass(frozen=True)
class SubmittedJob:
    job_id: str
    state: str
    name: str | None
    job_number: int | None = None  # the owner's number for it (SkyPilot's managed job id)


def plan_at_submit(wiring: Wiring, job: JobModel, filename: str) -> str:
    """Plan now, so that the job is recorded PLANNED and its launch asked for at once: one queue hop and
    one write fewer than a PENDING job the optimize function plans. A task the catalog cannot place stays
    PENDING, and the optimize function fails it with the reason, as it did before. Answers the timeline
    message of the job's first event."""
    try:
        plan = make_plan(wiring, job)
    except NoOfferingError:
        return f"submitted {filename}"
    job.state = JobState.PLANNED.value
    for name, value in {**plan_fields(plan), "candidate_index": 0}.items():
        setattr(job, name, value)
    return f"submitted {filename}; planned {candidate_text(plan.tasks[0].chosen)}"


def locate_data(settings: Any, pipeline: Any, *, owner: str, declared: Mapping[str, float] | None) -> JobData:
    """Where the buckets the job reads live and how much it reads (only asked when it mounts buckets)."""
    from shared.storage.gravity import JobData, locate_job_data, mounts_buckets

    if not declared and not mounts_buckets(pipeline):
        return JobData()
    return locate_job_data(settings, pipeline, owner=owner, declared=declared)


def plan_notes_of(job: JobModel) -> list[str]:
    """The plan's data-gravity words, for the timeline (only for a job reading buckets)."""
    plan = plan_of(job) if job.state == JobState.PLANNED and job.data_sources else None
    return list(plan.notes) if plan is not None else []


def new_job_id() -> str:
    return f"job-{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class SubmitJob:
    """A job to submit, its task file already parsed at the edge (`pipeline`). `task_text` and `filename` are
    what it was parsed from (errors about storage name their lines).

    `job_id` lets a caller with its own idempotency key (an S3 upload's bucket/key/ETag) submit
    twice safely: the second submit finds the job and sends nothing.
    `source` says how it came: "cli" (the API, which the CLI and the SDK call), "upload" or "schedule";
    `source_ref` names the upload's key or the schedule.
    `deadline` (ISO 8601 time or a duration from now) and `hours` (the compute the job needs) make it a
    deadline job (shared/jobs/deadlines.py); one that cannot be met even on on-demand is a UserError.
    """

    owner: str
    pipeline: Pipeline
    task_text: str
    filename: str = "task.yaml"
    minimize: str = "cost"
    clouds: tuple[str, ...] | None = None
    workdir_key: str | None = None
    file_mount_keys: Mapping[str, str] = field(default_factory=dict)
    job_id: str | None = None
    source: str = "cli"
    source_ref: str | None = None
    deadline: str | None = None
    hours: float | None = None
    max_cost: float | None = None  # USD (shared/jobs/budget_checks.py)
    max_cost_action: str = "stop"
    data_gb: Mapping[str, float] | None = None  # declared sizes of what it reads (shared.storage.gravity)

    def __post_init__(self) -> None:
        check_objective(self.minimize)

    @classmethod
    def from_text(
        cls,
        *,
        owner: str,
        task_text: str,
        filename: str = "task.yaml",
        env: dict[str, str] | None = None,
        secrets: dict[str, str] | None = None,
        minimize: str = "cost",
        clouds: Sequence[str] | None = None,
        **options: Any,
    ) -> SubmitJob:
        """The command for a task file's text, parsed here (the edge); TaskFileError names file/line/field."""
        from shared.task.loader import load_pipeline

        check_objective(minimize)
        pipeline = load_pipeline(
            task_text, filename=filename, env_overrides=env or {}, secret_overrides=secrets or {}
        )
        return cls(
            owner=owner, pipeline=pipeline, task_text=task_text, filename=filename, minimize=minimize,
            clouds=tuple(clouds) if clouds else None, **options,
        )  # fmt: skip


def check_objective(minimize: str) -> None:
    if minimize not in OBJECTIVES:
        raise UserError(f"unknown objective {minimize!r}", field="minimize", hint="use 'cost' or 'time'")


def check_task_storage(
    settings: Any, pipeline: Any, *, owner: str, keys: dict[str, str], filename: str, text: str | None
) -> None:
    """What the task may read or write in storage (shared.storage.access's rule): its file mounts and its
    buckets. Every route that takes a task asks this before recording anything."""
    walls = StorageWalls.of(settings)
    check_file_mounts(pipeline, keys, owner=owner, walls=walls, filename=filename, text=text)
    check_job_storage(settings, pipeline, owner=owner, filename=filename, text=text)


def submit_job(wiring: Wiring, command: SubmitJob) -> SubmittedJob:
    """Record the job (PLANNED with its launch asked for, or PENDING) and answer it. Raises UserError for a
    bad option (deadline, file mounts, storage); the task file itself was checked when `command` was made."""
    settings = wiring.settings
    pipeline, owner, filename = command.pipeline, command.owner, command.filename
    deadline_record = deadline_fields(settings, command.deadline, command.hours)
    keys = dict(command.file_mount_keys)
    check_task_storage(settings, pipeline, owner=owner, keys=keys, filename=filename, text=command.task_text)
    clouds = list(command.clouds) if command.clouds else None
    check_containers(settings, pipeline, filename=filename, text=command.task_text, clouds=clouds)
    keep_registry_password_secret(pipeline)
    check_launch_allowed(wiring, owner)
    data = locate_data(settings, pipeline, owner=owner, declared=command.data_gb)
    job_id = command.job_id or new_job_id()
    job = wiring.store.new_job(
        job_id=job_id,
        owner=owner,
        name=pipeline.name or pipeline.tasks[0].name,
        state=JobState.PENDING.value,
        version=0,
        attempt=0,
        minimize=command.minimize,
        clouds=json.dumps(sorted(c.lower() for c in command.clouds)) if command.clouds else None,
        workdir_key=command.workdir_key,
        file_mounts=encode_keys(keys),
        token_hash=token_hash(agent_token(settings, job_id, 0)),  # a new one with each attempt
        source=command.source,
        source_ref=command.source_ref,
        max_cost=command.max_cost,
        max_cost_action=None if command.max_cost_action == "stop" else command.max_cost_action,
        data_sources=sources_field(data.sources),
        **deadline_record,
    )
    if pipeline.execution == "parallel":  # a job group: its tasks launched together, each a job of its own
        if deadline_record.get("deadline_at"):
            raise UserError("a job group cannot have a deadline", field="deadline", hint="drop --deadline")
        state = submit_group(wiring, job, pipeline, filename, plan_at_submit)
        return SubmittedJob(job.job_id, state, job.name, _number(job))
    store_pipeline(wiring, job, pipeline)
    message = plan_at_submit(wiring, job, filename)
    notes = pipeline_notes(pipeline) + data.notes + plan_notes_of(job)  # `status` says them
    if wiring.store.create(job, message, {"notes": notes} if notes else None):
        if job.state == JobState.PLANNED:
            send_launch(wiring, job.job_id, 0)
        else:
            send_optimize(wiring, job.job_id, 0)
        return SubmittedJob(job.job_id, job.state, job.name, _number(job))
    existing = wiring.store.get(job.job_id)  # submitted before (a redelivery): its state and number
    state = existing.state if existing else job.state
    return SubmittedJob(job.job_id, state, job.name, _number(existing or job))


def _number(job: JobModel) -> int | None:
    return int(job.job_number) if job.job_number is not None else None
