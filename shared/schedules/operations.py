"""Cron schedules: create, list, pause, resume, delete; fire them; run a firing once.

A schedule is a row of the schedules table (with its task text) and, beside it, an EventBridge
Scheduler schedule `<prefix>-<schedule id>` that sends the submit queue a firing at each cron time:

    {"schedule_firing": {"owner", "name", "schedule_id", "scheduled_time": "<ISO 8601>"}}

In AWS the scheduler sends it (`<aws.scheduler.scheduled-time>` filled in); in the local runtime the
dispatcher calls `fire_due_schedules(settings, now)` on its clock (moto stores schedules, never fires
them). Running a firing is idempotent by (schedule id, scheduled time): the job id derives from them.
Overlap `skip` runs nothing while the schedule's previous job is live; `allow` always runs.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from shared.aws.sessions import aws_client
from shared.config import Settings
from shared.errors import ConflictError, NotFoundError, UserError
from shared.events.sqs_batch import MalformedMessage
from shared.schedules.cron import check_cron, check_timezone, due_times, scheduler_expression
from shared.schedules.schedule_secrets import (
    delete_schedule_secrets,
    read_schedule_secrets,
    split_secrets,
    store_schedule_secrets,
)
from shared.store.schedules import ScheduleModel, ScheduleStore

log = logging.getLogger("skyless.schedules")

OVERLAP_POLICIES = ("skip", "allow")
NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
MAX_NAME_CHARS = 64


@dataclass(frozen=True)
class Firing:
    owner: str
    name: str
    schedule_id: str
    scheduled_time: str  # ISO 8601 with offset

    def as_message(self) -> dict[str, Any]:
        return {"schedule_firing": self.__dict__.copy()}

    @property
    def job_id(self) -> str:
        digest = hashlib.sha256(f"{self.schedule_id}/{self.scheduled_time}".encode()).hexdigest()
        return f"job-{digest[:12]}"


@dataclass(frozen=True)
class FiringOutcome:
    result: str  # submitted | already_ran | skipped_overlap | unknown_schedule | paused | secrets_missing
    job_id: str | None = None


def check_name(name: str) -> str:
    if not name or len(name) > MAX_NAME_CHARS or not set(name) <= NAME_CHARS:
        raise UserError(
            f"not a schedule name: {name[:40]!r}",
            field="name",
            hint=f"1-{MAX_NAME_CHARS} letters, digits, '-', '_' or '.'",
        )
    return name


def create_schedule(
    settings: Settings,
    *,
    owner: str,
    name: str,
    cron: str,
    task_text: str,
    filename: str = "task.yaml",
    timezone: str = "UTC",
    overlap: str = "skip",
    env: dict[str, str] | None = None,
    secrets: dict[str, str] | None = None,
    minimize: str = "cost",
    clouds: list[str] | None = None,
    now: float | None = None,
) -> ScheduleModel:
    """Record the schedule and its EventBridge Scheduler schedule. The caller has validated the task.
    ConflictError when the owner already has a schedule of that name.

    Secret values (`secrets`, and any the file writes) go to the schedule's Secrets Manager secret
    (shared/schedules/schedule_secrets.py); the row keeps their names and the task text without them."""
    check_name(name)
    cron = check_cron(cron)
    check_timezone(timezone)
    if overlap not in OVERLAP_POLICIES:
        raise UserError(f"unknown overlap policy {overlap!r}", field="overlap", hint="use 'skip' or 'allow'")
    expression = scheduler_expression(cron)
    kept_text, secret_values = split_secrets(
        task_text, filename=filename, env=env or {}, secrets=secrets or {}
    )
    created = time.time() if now is None else now
    store = _schedules(settings)
    row = store.new_schedule(
        owner,
        name,
        schedule_id=f"sch-{uuid.uuid4().hex[:12]}",
        cron=cron,
        timezone=timezone,
        overlap=overlap,
        task_text=kept_text,
        filename=filename,
        env=json.dumps(env or {}),
        secret_names=json.dumps(sorted(secret_values)) if secret_values else None,
        minimize=minimize,
        clouds=json.dumps(clouds) if clouds else None,
        created_at=created,
        fired_through=created,
    )
    if secret_values:
        store_schedule_secrets(settings, row.schedule_id, secret_values)
    try:
        created_row = store.create(row)
    except Exception:
        if secret_values:
            delete_schedule_secrets(settings, row.schedule_id)
        raise
    if not created_row:
        if secret_values:
            delete_schedule_secrets(settings, row.schedule_id)
        raise ConflictError(f"you already have a schedule named {name!r}", field="name")
    _put_aws_schedule(settings, row, expression)
    return row


def secret_names_of(row: ScheduleModel) -> list[str]:
    """The names of the secrets a schedule gives its jobs (never their values)."""
    return list(json.loads(row.secret_names)) if row.secret_names else []


def list_schedules(settings: Settings, *, owner: str) -> list[ScheduleModel]:
    return _schedules(settings).of_owner(owner)


def get_schedule(settings: Settings, *, owner: str, name: str) -> ScheduleModel:
    row = _schedules(settings).get(owner, name[: MAX_NAME_CHARS + 1])
    if row is None:
        raise NotFoundError(f"no schedule named {name[:40]!r}", field="name")
    return row


def set_paused(
    settings: Settings, *, owner: str, name: str, paused: bool, now: float | None = None
) -> ScheduleModel:
    """Pause or resume (again: harmless). A resumed schedule does not fire for the time it was paused."""
    row = get_schedule(settings, owner=owner, name=name)
    resumed_at = (time.time() if now is None else now) if not paused and row.paused else None
    if not _schedules(settings).set_paused(row, paused, fired_through=resumed_at):
        raise NotFoundError(f"no schedule named {name[:40]!r}", field="name")
    _put_aws_schedule(settings, row, scheduler_expression(row.cron))
    return row


def delete_schedule(settings: Settings, *, owner: str, name: str) -> None:
    row = get_schedule(settings, owner=owner, name=name)
    try:
        _scheduler(settings).delete_schedule(Name=aws_schedule_name(settings, row))
    except ClientError as error:
        if error.response["Error"]["Code"] != "ResourceNotFoundException":
            raise
    if row.secret_names:
        delete_schedule_secrets(settings, row.schedule_id)
    _schedules(settings).delete(row)


def aws_schedule_name(settings: Settings, row: ScheduleModel) -> str:
    return f"{settings.prefix}-{row.schedule_id}"[:64]


def next_run(row: ScheduleModel, now: datetime | None = None) -> datetime | None:
    from shared.schedules.cron import next_time

    if row.paused:
        return None
    return next_time(row.cron, row.timezone, now or datetime.now(UTC))


def fire_due_schedules(settings: Settings, now: datetime) -> list[Firing]:
    """The local runtime's EventBridge Scheduler: send the submit queue each schedule's due firing.

    A firing is sent before the schedule's `fired_through` mark moves, so a crash in between sends it
    again, which `run_firing` treats as the duplicate it is.
    """
    from shared.aws.queues import SqsQueue

    queue = SqsQueue(settings, "submit")
    store = _schedules(settings)
    fired: list[Firing] = []
    for row in store.every():
        if row.paused:
            continue
        after = datetime.fromtimestamp(row.fired_through, UTC)
        moments = due_times(row.cron, row.timezone, after=after, until=now)
        if not moments:
            continue
        for moment in moments:
            firing = Firing(row.owner, row.name, row.schedule_id, moment.isoformat())
            queue.send(firing.as_message())
            fired.append(firing)
        if not store.mark_fired(row, now.timestamp()):  # deleted meanwhile: its firings find nothing to run
            log.info("schedule %s/%s changed while firing", row.owner, row.name)
    return fired


def firing_in(body: dict[str, Any]) -> Firing | None:
    raw = body.get("schedule_firing")
    if raw is None:
        return None
    try:
        firing = Firing(
            owner=str(raw["owner"]),
            name=str(raw["name"]),
            schedule_id=str(raw["schedule_id"]),
            scheduled_time=_iso(str(raw["scheduled_time"])),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedMessage(f"schedule_firing is not a firing ({exc!r:.80})") from None
    if not (firing.owner and firing.name and firing.schedule_id):
        raise MalformedMessage("schedule_firing names no owner, name or schedule id")
    return firing


def run_firing(settings: Settings, firing: Firing) -> FiringOutcome:
    """Submit the schedule's task for this scheduled time, once."""
    from shared.jobs.run_status import write_run_status
    from shared.jobs.submission import SubmitJob, submit_job
    from shared.states import LIVE, JobState
    from shared.wiring import wiring_for

    store = wiring_for(settings).store
    try:
        row = get_schedule(settings, owner=firing.owner, name=firing.name)
    except NotFoundError:
        return FiringOutcome("unknown_schedule")
    if row.schedule_id != firing.schedule_id:
        return FiringOutcome("unknown_schedule")  # a deleted schedule's late firing
    if store.get(firing.job_id) is not None:
        return FiringOutcome("already_ran", firing.job_id)
    if row.paused:
        return FiringOutcome("paused")
    if row.overlap == "skip" and row.last_job_id:
        previous = store.get(row.last_job_id)
        if previous is not None and JobState(previous.state) in LIVE:
            _schedules(settings).count_skipped(row)
            store.note(
                f"schedule#{row.schedule_id}", "schedule_skipped",
                f"{firing.scheduled_time}: {row.last_job_id} is still {previous.state}",
            )  # fmt: skip
            return FiringOutcome("skipped_overlap", row.last_job_id)
    secrets: dict[str, str] | None = None
    if row.secret_names:
        secrets = read_schedule_secrets(settings, row.schedule_id)
        if secrets is None:  # deleted meanwhile (a delete removes the secret before the row), or lost
            names = ", ".join(secret_names_of(row))
            message = f"{firing.scheduled_time}: its secrets ({names}) are gone; nothing ran"
            store.note(f"schedule#{row.schedule_id}", "schedule_failed", message)
            return FiringOutcome("secrets_missing")
    command = SubmitJob.from_text(
        owner=row.owner,
        task_text=row.task_text,
        filename=row.filename,
        env=json.loads(row.env or "{}"),
        secrets=secrets,
        minimize=row.minimize,
        clouds=json.loads(row.clouds) if row.clouds else None,
        job_id=firing.job_id,
        source="schedule",
        source_ref=row.name,
    )
    job = submit_job(wiring_for(settings), command)
    # counted once even when two deliveries of this firing get here together
    _schedules(settings).record_run(row, job.job_id, firing.scheduled_time)
    write_run_status(
        settings,
        job.job_id,
        job.state,
        source={"schedule": row.name, "scheduled_time": firing.scheduled_time},
    )
    return FiringOutcome("submitted", job.job_id)


def _iso(value: str) -> str:
    """One spelling per instant (the scheduler writes `...Z`; we write `+00:00`)."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC).isoformat()


def _schedules(settings: Settings) -> ScheduleStore:
    from shared.wiring import wiring_for

    return wiring_for(settings).schedules


def _scheduler(settings: Settings) -> Any:
    return aws_client("scheduler", settings)


def _put_aws_schedule(settings: Settings, row: ScheduleModel, expression: str) -> None:
    """Create or update the EventBridge Scheduler schedule that sends this schedule's firings."""
    from shared.aws.queues import SqsQueue

    sqs = aws_client("sqs", settings)
    queue_url = SqsQueue(settings, "submit").url
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    firing = {
        "schedule_firing": {
            "owner": row.owner,
            "name": row.name,
            "schedule_id": row.schedule_id,
            "scheduled_time": "<aws.scheduler.scheduled-time>",
        }
    }
    request = {
        "Name": aws_schedule_name(settings, row),
        "ScheduleExpression": expression,
        "ScheduleExpressionTimezone": row.timezone,
        "FlexibleTimeWindow": {"Mode": "OFF"},
        "State": "DISABLED" if row.paused else "ENABLED",
        "Target": {"Arn": queue_arn, "RoleArn": settings.scheduler_role_arn, "Input": json.dumps(firing)},
        "Description": f"skyless schedule {row.owner}/{row.name}"[:512],
    }
    scheduler = _scheduler(settings)
    try:
        scheduler.create_schedule(**request)
    except ClientError as error:
        if error.response["Error"]["Code"] != "ConflictException":
            raise
        scheduler.update_schedule(**request)
