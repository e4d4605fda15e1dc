"""What the SDK's calls answer: plain typed records (no dicts), built from the API's bodies."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from shared.api.cluster_models import ClusterJob, ClusterLaunchResponse, ClusterView
    from shared.api.cost_models import JobCostView
    from shared.api.models import JobSummary

# The exit codes of sky.tail_logs (sky.exceptions.JobExitCode), kept for scripts that test them.
EXIT_SUCCEEDED = 0
EXIT_FAILED = 100
EXIT_NOT_FINISHED = 101
EXIT_NOT_FOUND = 102
EXIT_CANCELLED = 103


@dataclass(frozen=True)
class ClusterStatus:
    """A named cluster, as `sky.status()` lists it."""

    name: str
    status: str  # INIT, UP, STOPPING, STOPPED, TERMINATING, TERMINATED
    cloud: str | None
    region: str | None
    zone: str | None
    instance_type: str | None
    num_nodes: int
    use_spot: bool
    accelerators: dict[str, float] | None
    hourly_price: float | None  # USD per hour, one node
    cost: float  # USD so far
    autostop: int  # idle minutes; -1: off
    to_down: bool  # autostop tears it down rather than stopping it
    active_jobs: int
    launched_at: str | None
    reason: str | None = None

    @classmethod
    def of(cls, view: ClusterView) -> ClusterStatus:
        accelerators = {view.accelerator: view.accelerator_count} if view.accelerator else None
        return cls(view.name, view.state, view.cloud, view.region, view.zone, view.instance_type,
                   view.num_nodes, view.use_spot, accelerators, view.hourly_price, view.cost,
                   view.autostop_minutes, view.autostop_down, view.active_jobs, view.created_at,
                   view.reason)  # fmt: skip


@dataclass(frozen=True)
class ClusterHandle:
    """The cluster a launch or exec used (sky's `handle`), and what the launch said about the task."""

    cluster_name: str
    status: ClusterStatus
    action: str  # created, reused, starting, provisioning (launch); queued (exec)
    notes: list[str] = field(default_factory=list)  # fields of the task or the config not acted on


class LaunchResult(NamedTuple):
    """`job_id, handle = skyless.launch(task, cluster_name="dev")`, as with sky.launch."""

    job_id: int
    handle: ClusterHandle

    @property
    def cluster_name(self) -> str:
        return self.handle.cluster_name


@dataclass(frozen=True)
class JobRecord:
    """A job of a cluster's queue, as `sky.queue()` lists it."""

    job_id: int
    job_name: str | None
    status: str  # PENDING, SETTING_UP, RUNNING, SUCCEEDED, FAILED, FAILED_SETUP, CANCELLED
    submitted_at: str | None
    start_at: str | None
    end_at: str | None
    num_nodes: int
    gpus: float
    command: str | None
    reason: str | None

    @classmethod
    def of(cls, job: ClusterJob) -> JobRecord:
        return cls(job.job, job.name, job.state, job.submitted_at, job.started_at, job.ended_at,
                   job.num_nodes, job.gpus, job.command, job.reason)  # fmt: skip


@dataclass(frozen=True)
class ManagedJob:
    """A managed job (`skyless.jobs`): one task, recovered from preemptions, its nodes torn down after."""

    job_id: str
    name: str | None
    status: str  # PENDING, PLANNED, PROVISIONING, SETTING_UP, RUNNING, RECOVERING, SUCCEEDED, FAILED, ...
    cloud: str | None
    region: str | None
    instance_type: str | None
    use_spot: bool | None
    recoveries: int
    cost: float
    submitted_at: str | None
    job_number: int | None = None  # SkyPilot's integer job id: `cancel(job_ids=[n])` takes it

    @classmethod
    def of(cls, job: JobSummary) -> ManagedJob:
        return cls(job.job_id, job.name, job.state, job.cloud, job.region, job.instance_type,
                   job.use_spot, job.recoveries, job.cost, job.created_at, job.job_number)  # fmt: skip


class ManagedJobLaunch(NamedTuple):
    """`job_id, handle = skyless.jobs.launch(task)`: a managed job has no cluster of its own to name."""

    job_id: str
    handle: None


@dataclass(frozen=True)
class CostEntry:
    """One line of `cost_report()`: a named cluster (live) or a managed job, with what it cost so far."""

    name: str
    kind: str  # "cluster" or "managed job"
    status: str
    cost: float  # USD
    launched_at: str | None
    num_nodes: int | None = None
    hourly_price: float | None = None
    savings: float | None = None  # managed jobs: against on-demand in the same places

    @classmethod
    def of_cluster(cls, view: ClusterView) -> CostEntry:
        return cls(view.name, "cluster", view.state, view.cost, view.created_at, view.num_nodes,
                   view.hourly_price)  # fmt: skip

    @classmethod
    def of_job(cls, job: JobCostView) -> CostEntry:
        return cls(job.name or job.job_id, "managed job", job.state, job.cost, job.created_at,
                   savings=job.savings)  # fmt: skip


def launch_result(answer: ClusterLaunchResponse, notes: list[str]) -> LaunchResult:
    handle = ClusterHandle(answer.cluster.name, ClusterStatus.of(answer.cluster), answer.action,
                           [*notes, *answer.notes])  # fmt: skip
    return LaunchResult(answer.job.job, handle)
