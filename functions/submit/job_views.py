"""Between the API's bodies and the job operations in `shared.jobs`: call one operation, shape its answer."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import yaml

from functions.submit.lazy_modules import module_on_first_use
from functions.submit.route_table import NotReadyError, every_user_asked
from shared.api.auth import BootCaller, StaleAttemptError
from shared.api.models import (
    AgentConfigResponse,
    AgentStatusRequest,
    AgentStatusResponse,
    JobDetail,
    JobList,
    JobSummary,
    LogsResponse,
    PlanRequest,
    SubmitJobRequest,
    SubmitJobResponse,
    UploadRequest,
    UploadResponse,
)
from shared.config import Settings
from shared.errors import NoOfferingError, NotFoundError, StoredTaskRefused, TaskFileError, UserError
from shared.jobs.job_filters import job_filter
from shared.jobs.job_listing import list_job_page
from shared.jobs.views import ReadLogs, get_job, read_logs
from shared.store.job_numbers import parse_job_number
from shared.store.users import User
from shared.wiring import wiring_for

if TYPE_CHECKING:
    from shared import optimizer
    from shared.aws import object_store
    from shared.jobs import agent_reports, cancellation, node_claims, submission
    from shared.notifications import settings as notification_settings
    from shared.optimizer import Plan
    from shared.task import Pipeline
else:  # imported by the first request of a route that uses them (a cold GET /jobs plans nothing)
    agent_reports = module_on_first_use("shared.jobs.agent_reports")
    cancellation = module_on_first_use("shared.jobs.cancellation")
    node_claims = module_on_first_use("shared.jobs.node_claims")
    notification_settings = module_on_first_use("shared.notifications.settings")
    object_store = module_on_first_use("shared.aws.object_store")
    optimizer = module_on_first_use("shared.optimizer")
    submission = module_on_first_use("shared.jobs.submission")

MAX_UPLOAD_BYTES = 2 * 1024**3
UPLOAD_PREFIX = "uploads"
MAX_ID_CHARS = 128


def read_task(body: PlanRequest) -> Pipeline:
    """The validated pipeline, or a TaskFileError naming file/line/field. A dry run plans without the
    values of null secrets (as SkyPilot's does); a submission must carry them."""
    from shared.task import load_pipeline  # the task file models: the routes that read a task, on use

    secrets = getattr(body, "secrets", None)
    try:
        return load_pipeline(
            body.task_text(),
            filename=body.filename,
            env_overrides=body.env,
            secret_overrides=secrets or {},
            defer_secrets=secrets is None,
        )
    except yaml.YAMLError as exc:  # what the parser lets through (e.g. control characters in the text)
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise TaskFileError(f"not readable as YAML: {exc}", file=body.filename, line=line) from None


def plan_task_file(
    settings: Settings,
    body: PlanRequest,
    pipeline: Pipeline | None = None,
    caller: User | None = None,
    max_candidates: int | None = None,
) -> Plan:
    """The plan for the task the body carries (`pipeline`, when the caller has read it already), on the
    catalog the optimize function uses (refreshed prices included); errors name the body's filename.
    With the `caller`, as their launch would be planned: at their contracts, and with the buckets they may
    read placed and their egress counted (shared.storage.gravity). `max_candidates`: each task's failover
    list cut there (None: the optimizer's default)."""
    pipeline = pipeline if pipeline is not None else read_task(body)
    clouds = {c.lower() for c in body.clouds} if body.clouds else None
    wiring = wiring_for(settings)
    prices = None
    if caller is not None:
        from shared.jobs.contract_use import prices_for  # reads the contracts file only where one is set

        prices = prices_for(wiring, caller.user_id)
    try:
        data = None
        if caller is not None:
            from shared.jobs.submission import locate_data

            data = locate_data(settings, pipeline, owner=caller.user_id, declared=body.data_gb)
        sources = data.sources if data else []
        cut: dict[str, Any] = {} if max_candidates is None else {"max_candidates": max_candidates}
        plan = optimizer.plan_pipeline(
            pipeline,
            wiring.catalog,
            enabled_clouds=clouds,
            minimize=body.minimize,
            prices=prices,
            data=sources,
            **cut,
        )
        plan.notes.extend(data.notes if data else [])
        return plan
    except UserError as exc:
        if isinstance(exc, NoOfferingError):
            optimizer.locate_plan_error(exc, body.task_text(), body.filename)
        exc.file = exc.file or body.filename
        raise


def dry_run(settings: Settings, body: PlanRequest, caller: User | None = None) -> dict[str, Any]:
    return plan_task_file(settings, body, caller=caller).as_dict()


def submit(settings: Settings, caller: User, body: SubmitJobRequest) -> SubmitJobResponse:
    check_workdir_key(caller, body.workdir_key)
    pipeline = read_task(body)  # the one parse of the file (null secrets must have values: `body.secrets`)
    # A task nothing can run is refused before anything is recorded, with the dry run's error: whether a
    # task has a place is known at its first candidate (the job's own plan ranks them, in submit_job).
    plan_task_file(settings, body, pipeline, max_candidates=1)
    job_id = submission.new_job_id()
    if body.notify:
        # This job's own channels (the webhook kept as a Secrets Manager secret), stored before the job
        # exists so that its first timeline event already sees them.
        if body.notify.slack_webhook:
            notification_settings.check_webhook(
                body.notify.slack_webhook,
                field="notify.slack_webhook",
                allow_loopback=settings.allow_loopback_webhooks,
            )
        if body.notify.email:
            notification_settings.check_email(body.notify.email, field="notify.email")
        notification_settings.store_job_override(
            settings, job_id, slack_webhook=body.notify.slack_webhook, email=body.notify.email
        )
    command = submission.SubmitJob(
        owner=caller.user_id,
        pipeline=pipeline,
        task_text=body.task_text(),
        filename=body.filename,
        minimize=body.minimize,
        clouds=tuple(body.clouds) if body.clouds else None,
        workdir_key=body.workdir_key,
        file_mount_keys=body.file_mount_keys or {},
        job_id=job_id,
        deadline=body.deadline,
        hours=body.hours,
        max_cost=body.max_cost,
        max_cost_action=body.max_cost_action,
        data_gb=body.data_gb,
    )
    job = submission.submit_job(wiring_for(settings), command)
    return SubmitJobResponse(job_id=job.job_id, state=job.state, job_number=job.job_number)


def list_for(settings: Settings, caller: User, params: Mapping[str, str] | None = None) -> JobList:
    params = params or {}
    where = job_filter(state=params.get("state"), since=params.get("since"), name=params.get("name"),
                       limit=params.get("limit"), cursor=params.get("cursor"))  # fmt: skip
    if every_user_asked(caller.admin, params, "every user's jobs"):
        from shared.jobs.every_users_jobs import list_every_users_page

        page = list_every_users_page(wiring_for(settings), where)
    else:
        page = list_job_page(wiring_for(settings), owner=caller.user_id, where=where)
    return JobList(jobs=[JobSummary.model_validate(job.as_dict()) for job in page.jobs], cursor=page.cursor)


def detail(settings: Settings, caller: User, job_id: str) -> JobDetail:
    job_id = own_job_id(settings, caller, job_id)
    return JobDetail.model_validate(get_job(wiring_for(settings), job_id, owner=caller.user_id).as_dict())


def cancel(settings: Settings, caller: User, job_id: str) -> JobDetail:
    job_id = own_job_id(settings, caller, job_id)
    cancellation.cancel_job(wiring_for(settings), job_id, owner=caller.user_id)
    return detail(settings, caller, job_id)


def logs(settings: Settings, caller: User, job_id: str, *, rank: int, after: str | None) -> LogsResponse:
    job_id = own_job_id(settings, caller, job_id)
    page = read_logs(wiring_for(settings), ReadLogs(job_id, caller.user_id, rank=rank, after=after))
    return LogsResponse(job_id=page.job_id, rank=page.rank, text=page.text, cursor=page.cursor,
                        finished=page.finished)  # fmt: skip


def agent_config(settings: Settings, job_id: str, instance_id: str, caller: BootCaller) -> dict[str, Any]:
    if not instance_id or len(instance_id) > 256:
        raise UserError("the asking node's instance id is required", field="instance_id")
    try:
        answer = node_claims.first_config(settings, job_id, instance_id, caller.attempt, caller.node_key)
    except StoredTaskRefused as refused:  # the job is failed: its nodes stop
        raise StaleAttemptError(f"job {job_id} failed: {refused.message}", field=refused.field) from None
    if answer is None:
        raise NotReadyError("not every node of the cluster is known yet", hint="retry in a second")
    AgentConfigResponse.model_validate(answer)  # the contract holds, extra fields allowed
    return answer


def agent_status(settings: Settings, job_id: str, body: AgentStatusRequest) -> AgentStatusResponse:
    report = agent_reports.AgentReport(
        job_id, body.instance_id, body.phase, exit_code=body.exit_code, message=body.message
    )
    status = agent_reports.report_agent_status(wiring_for(settings), report)
    return AgentStatusResponse(
        job_id=status.job_id,
        state=status.state,
        cancel=status.cancel,
        stop=status.stop,
        preempt=status.preempt,
    )


def upload(settings: Settings, caller: User, body: UploadRequest) -> UploadResponse:
    if body.size_bytes is not None and body.size_bytes > MAX_UPLOAD_BYTES:
        raise UserError(f"a workdir tarball may be at most {MAX_UPLOAD_BYTES} bytes", field="size_bytes")
    name = re.sub(r"[^A-Za-z0-9._-]", "_", body.filename).lstrip(".") or "workdir.tar.gz"
    key = f"{upload_prefix(caller)}{uuid.uuid4().hex}/{name}"
    return UploadResponse(key=key, url=object_store.S3ObjectStore(settings).presigned_put(key))


def upload_prefix(caller: User) -> str:
    return f"{UPLOAD_PREFIX}/{caller.user_id}/"


def check_workdir_key(caller: User, workdir_key: str | None) -> None:
    """A job may only use a tarball its owner uploaded."""
    if workdir_key is not None and (
        not workdir_key.startswith(upload_prefix(caller)) or ".." in workdir_key.split("/")
    ):
        raise UserError("not a key that POST /uploads gave you", field="workdir_key")


def own_job_id(settings: Settings, caller: User, job_id: str) -> str:
    """`job_id`, or for a number (`3`, SkyPilot's managed job id) the id of the caller's job of that number:
    another user's number is not found, as a job that does not exist is not."""
    if len(job_id) > MAX_ID_CHARS:
        raise NotFoundError(f"no job {job_id[:40]}…", field="job_id")
    number = parse_job_number(job_id)
    if number is None:
        return job_id
    found = wiring_for(settings).store.job_id_numbered(caller.user_id, number)
    if found is None:
        raise NotFoundError(f"no job {number}", field="job_id")
    return found
