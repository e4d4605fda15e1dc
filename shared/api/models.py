"""The bodies the HTTPS API reads and writes. The OpenAPI description is generated from these."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import yaml
from pydantic import ConfigDict, Field

from shared.api.deferred_model import DeferredModel
from shared.api.notification_models import NotifyOverride
from shared.task.limits import MAX_TASK_FILE_BYTES

MAX_TASK_CHARS = MAX_TASK_FILE_BYTES  # what `plan` and `launch` check first (shared.task.limits)
Objective = Literal["cost", "time"]
TaskText = Annotated[str, Field(min_length=1, max_length=MAX_TASK_CHARS)]
CloudName = Annotated[str, Field(min_length=1, max_length=32)]
AgentPhase = Literal[
    "setting_up", "running", "succeeded", "failed", "setup_failed", "preempting", "heartbeat"
]


class RequestBody(DeferredModel):
    """Request bodies refuse unknown fields, so a typo is named instead of ignored."""

    model_config = ConfigDict(extra="forbid")


class PlanRequest(RequestBody):
    task: TaskText | dict[str, Any] | list[dict[str, Any]] = Field(
        description="The task file: YAML text, or the same document as JSON (a list for a pipeline).",
    )
    filename: str = Field("task.yaml", max_length=512, description="Named in errors about the task.")
    env: dict[str, str] = Field(default_factory=dict, description="Overrides of the task's `envs`.")
    minimize: Objective = "cost"
    clouds: list[CloudName] | None = Field(None, max_length=16, description="Only plan on these clouds.")
    data_gb: dict[Annotated[str, Field(max_length=1100)], float] | None = Field(
        None,
        max_length=64,
        description='What the job reads, GB: {"*": GB} for its one bucket, or '
        '{"s3://b[/prefix]": GB} per bucket '
        "(default: the bucket's listed size). The optimizer prices reading it from each place.",
    )

    def task_text(self) -> str:
        """The task as YAML text, whichever form it was sent in (the parser reads YAML)."""
        if isinstance(self.task, str):
            return self.task
        if isinstance(self.task, list):
            return yaml.safe_dump_all(self.task, sort_keys=False)
        return yaml.safe_dump(self.task, sort_keys=False)


class SubmitJobRequest(PlanRequest):
    secrets: dict[str, str] = Field(
        default_factory=dict,
        max_length=64,
        description="Values of the task's `secrets` (null ones must be given): kept out of every table.",
    )
    workdir_key: str | None = Field(
        None, max_length=1024, description="The object key an upload from POST /uploads answered."
    )
    file_mount_keys: dict[str, Annotated[str, Field(max_length=1024)]] = Field(
        default_factory=dict,
        max_length=64,
        description="For each `file_mounts` entry with a local source: remote path -> its upload's key.",
    )
    notify: NotifyOverride | None = Field(
        None,
        description="This job's notification channels instead of the user's (kept out of the task file).",
    )
    deadline: str | None = Field(
        None,
        max_length=64,
        description="Finish by then, for the least money: an ISO 8601 time with a zone "
        "(2026-12-01T09:00Z) or a duration from now (36h). Needs `hours`.",
    )
    hours: float | None = Field(
        None, gt=0, description="The compute the job needs on its planned hardware, hours (with `deadline`)."
    )
    max_cost: float | None = Field(
        None, gt=0, le=1_000_000, description="Cost cap, USD: notices at 50/80/100 %, then stop."
    )
    max_cost_action: Literal["stop", "warn"] = Field(
        "stop", description="At the cap: stop the job at a checkpoint (as on a preemption notice), or warn."
    )


class UploadRequest(RequestBody):
    filename: str = Field("workdir.tar.gz", max_length=256)
    size_bytes: int | None = Field(None, ge=0)


class AgentStatusRequest(RequestBody):
    instance_id: str = Field(min_length=1, max_length=256)
    phase: AgentPhase
    exit_code: int | None = Field(None, ge=-(2**31), le=2**32 - 1)  # any OS's exit status fits
    message: str | None = Field(None, max_length=4096)


class ErrorBody(DeferredModel):
    error: str
    message: str
    field: str | None = None
    line: int | None = None
    file: str | None = None
    hint: str | None = None
    stop: bool | None = Field(None, description="410 to a node agent: stop the task and exit.")


JOB_NUMBER = (
    "The job's number among its owner's jobs (1, 2, ...: SkyPilot's managed job id); the job routes take "
    "it in place of the id. None for a job group's task and for jobs submitted before numbers."
)


class SubmitJobResponse(DeferredModel):
    job_id: str
    state: str
    job_number: int | None = Field(None, description=JOB_NUMBER)


class TimelineEvent(DeferredModel):
    time: str
    kind: str
    state: str | None = None
    message: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)


class JobSummary(DeferredModel):
    job_id: str
    job_number: int | None = Field(None, description=JOB_NUMBER)
    name: str | None = None
    state: str
    cloud: str | None = None
    region: str | None = None
    zone: str | None = None
    instance_type: str | None = None
    use_spot: bool | None = None
    recoveries: int = 0
    attempt: int = 0
    created_at: str | None = None
    updated_at: str | None = None
    cost: float = Field(0.0, description="USD so far: finished attempts, plus the live cluster up to now.")
    source: Literal["cli", "upload", "schedule"] | None = Field(
        None, description="How it was submitted: cli (POST /jobs: the CLI or the SDK), upload, schedule."
    )
    source_ref: str | None = Field(None, description="The upload's object key, or the schedule's name.")
    max_cost: float | None = Field(None, description="The job's cost cap, USD (None: none).")
    budget_stop: str | None = Field(None, description="Why a budget is stopping (or stopped) the job.")
    owner: str | None = Field(None, description="The id of the user whose job it is.")


class DeadlineStatus(DeferredModel):
    deadline: str = Field(description="UTC, ISO 8601.")
    hours: float = Field(description="The compute the job needs.")
    work_done_hours: float = Field(description="Counted when clusters end, plus the live one's progress.")
    slack_hours: float = Field(description="Time to the deadline the remaining work does not need.")
    market: str | None = Field(None, description="spot or on_demand: the policy's current choice.")
    why: str | None = Field(None, description="The policy's reason, in words.")
    past_estimate: bool = Field(
        False, description="The work done reached `hours` while the task still ran: the rest is unknown."
    )


class TriedPlace(DeferredModel):
    place: str = Field(description="cloud, cloud/region or cloud/region/zone")
    instance_family: str | None = Field(None, description="Set when only this family failed (quota).")
    reason: str


class CoolingPlace(DeferredModel):
    place: str
    scope: str = Field(description="zone or region")
    preemptions: int = Field(description="Spot preemptions there recently")
    refusals: int = Field(0, description="Spot launches refused for capacity there recently, by any job")
    until: str = Field(description="When spot plans stop avoiding it (ISO 8601), if nothing else happens")


class GroupTask(DeferredModel):
    """One task of a job group: a job of its own (`skyless status|logs|cancel <job_id>`)."""

    task: str
    job_id: str
    state: str
    primary: bool = Field(True, description="A primary task: the group ends with the primary tasks.")
    reason: str | None = None
    cloud: str | None = None
    region: str | None = None
    instance_type: str | None = None
    cost: float = 0.0


class JobDetail(JobSummary):
    group: list[GroupTask] | None = Field(
        None, description="A job group's tasks, launched together, each a job on its own cluster."
    )
    group_id: str | None = Field(None, description="The job group this job is a task of.")
    plan: dict[str, Any] | None = None
    cluster: dict[str, Any] | None = None
    timeline: list[TimelineEvent] = Field(default_factory=list)
    reason: str | None = None
    deadline: DeadlineStatus | None = None
    tried: list[TriedPlace] = Field(
        default_factory=list, description="Places this attempt tried that failed, and why (its blocklist)."
    )
    cooling: list[CoolingPlace] = Field(
        default_factory=list, description="Places of the plan that spot avoids after recent preemptions."
    )
    spot_probes: list[str] = Field(
        default_factory=list,
        description="A spot job's probing: each zone of its plan with refused spot launches in "
        "the last 10 minutes (by any job) and when spot is tried there next; its hourly limit when reached.",
    )


class JobList(DeferredModel):
    jobs: list[JobSummary]
    cursor: str | None = Field(None, description="More jobs follow: pass as `cursor` for the next page.")


class LogsResponse(DeferredModel):
    job_id: str
    rank: int
    text: str
    cursor: str | None = Field(None, description="Pass as `after` to read what comes next.")
    finished: bool = Field(False, description="The job is terminal and every chunk has been read.")


class UploadResponse(DeferredModel):
    key: str
    url: str
    method: str = "PUT"
    headers: dict[str, str] = Field(default_factory=dict)


class AgentStatusResponse(DeferredModel):
    job_id: str
    state: str
    cancel: bool = Field(False, description="The job was cancelled: the agent stops its task.")
    stop: bool = Field(
        False, description="This node has no part in the job now: kill the task's process group and exit."
    )
    preempt: str | None = Field(
        None, description="A budget stops the job: take this as a preemption notice (checkpoint, write back)."
    )


class FileMount(DeferredModel):
    path: str
    url: str
    archive: bool = Field(False, description="A tarball to unpack at `path` (else the file at `path`).")


class GitSource(DeferredModel):
    url: str
    ref: str | None = Field(
        None, description="A branch, tag or commit to check out; None: the default branch."
    )


class LogUpload(DeferredModel):
    url: str
    fields: dict[str, str]
    key_prefix: str


class AgentConfigResponse(DeferredModel):
    rank: int
    num_nodes: int
    node_ips: list[str]
    gpus_per_node: int
    task_id: str
    setup: str | None
    run: str | None
    envs: dict[str, str]
    # SkyPilot's variables for each stage (shared/jobs/node_env.py), laid over `envs` by the agent
    setup_env: dict[str, str] = {}
    run_env: dict[str, str] = {}
    workdir_url: str | None
    workdir_git: GitSource | None = None
    file_mounts: list[FileMount]
    log_upload: LogUpload
    heartbeat_seconds: int
    attempt: int = 0
    storage: list[dict[str, Any]] = Field(
        default_factory=list, description="Bucket mounts with credentials scoped to each (shared/storage)."
    )
    container: dict[str, Any] | None = Field(
        None, description="image_id docker:<image>: {image, registry, username}; setup and run run in it."
    )
    agent_token: str = Field(description="What the agent reports status with (Authorization: Bearer).")


class StorageCredentialsRequest(RequestBody):
    instance_id: str = Field(min_length=1, max_length=256)


class StorageCredentialsResponse(DeferredModel):
    storage: list[dict[str, Any]]
