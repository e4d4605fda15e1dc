"""The HTTPS API's bodies for named clusters (`/clusters/...`) and their agents (`/cluster-agent/...`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from shared.api.deferred_model import DeferredModel
from shared.api.models import PlanRequest, RequestBody, TaskText

ClusterAgentPhase = Literal["setting_up", "running", "succeeded", "failed", "setup_failed"]


class ClusterLaunchRequest(PlanRequest):
    secrets: dict[str, str] = Field(
        default_factory=dict,
        max_length=64,
        description="Values of the task's `secrets` (null ones must be given): kept out of every table.",
    )
    workdir_key: str | None = Field(None, max_length=1024)
    file_mount_keys: dict[str, Annotated[str, Field(max_length=1024)]] = Field(
        default_factory=dict, max_length=64
    )
    fast: bool = Field(
        False, description="On an existing cluster, skip the task's setup (SkyPilot's --fast)."
    )
    idle_minutes: int | None = Field(
        None, ge=-1, description="Autostop after this many idle minutes (-1: off); else resources.autostop."
    )
    down: bool | None = Field(None, description="Autostop tears the cluster down instead of stopping it.")


class ClusterExecRequest(RequestBody):
    task: TaskText | dict[str, object] | None = Field(None, description="A task file (YAML text or JSON).")
    command: Annotated[str, Field(min_length=1, max_length=64 * 1024)] | None = Field(
        None, description="A shell command to run instead of a task file."
    )
    filename: str = Field("task.yaml", max_length=512)
    env: dict[str, str] = Field(default_factory=dict)
    secrets: dict[str, str] = Field(
        default_factory=dict,
        max_length=64,
        description="Values of the task's `secrets` (null ones must be given): kept out of every table.",
    )
    workdir_key: str | None = Field(None, max_length=1024)
    file_mount_keys: dict[str, Annotated[str, Field(max_length=1024)]] = Field(
        default_factory=dict, max_length=64
    )

    def task_text(self) -> str | None:
        if self.task is None or isinstance(self.task, str):
            return self.task
        import yaml

        return yaml.safe_dump(self.task, sort_keys=False)


class AutostopRequest(RequestBody):
    idle_minutes: int = Field(ge=-1, le=60 * 24 * 365, description="-1 turns autostop off.")
    down: bool = False


class SshRequest(RequestBody):
    public_key: str | None = Field(
        None, max_length=16 * 1024, description="An OpenSSH public key the nodes will accept."
    )
    caller_cidr: str | None = Field(None, max_length=64, description="Open port 22 to this address only.")


class ClusterNode(DeferredModel):
    instance_id: str
    rank: int
    ip: str | None = None
    public_ip: str | None = None
    sessions: int = 0
    ready: bool = False
    heartbeat_at: str | None = None


class ClusterEvent(DeferredModel):
    time: str | None
    kind: str
    state: str | None = None
    message: str | None = None


class ClusterView(DeferredModel):
    name: str
    cluster_id: str
    state: str
    reason: str | None = None
    cloud: str | None = None
    region: str | None = None
    zone: str | None = None
    instance_type: str | None = None
    use_spot: bool = False
    num_nodes: int = 1
    accelerator: str | None = None
    accelerator_count: float = 0
    hourly_price: float | None = Field(None, description="$/h of one node.")
    autostop_minutes: int = -1
    autostop_down: bool = False
    autostop: str = "-"
    idle_since: str | None = None
    cost: float = Field(0.0, description="USD so far: every period the nodes were up, this one to now.")
    active_jobs: int = 0
    created_at: str | None = None
    up_since: str | None = None
    provider: str | None = None
    provider_cluster: str | None = None
    owner: str | None = Field(None, description="The id of the user whose cluster it is.")


class ClusterDetail(ClusterView):
    ports: list[str] = Field(
        default_factory=list, description="Ports open on the nodes (the launch task's resources.ports)."
    )
    nodes: list[ClusterNode] = Field(default_factory=list)
    timeline: list[ClusterEvent] = Field(default_factory=list)


class ClusterList(DeferredModel):
    clusters: list[ClusterView]


class ClusterJob(DeferredModel):
    cluster: str
    job: int
    name: str | None = None
    state: str
    command: str | None = None
    with_setup: bool = False
    num_nodes: int = 1
    gpus: float = 0
    submitted_at: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    duration_seconds: float | None = None
    reason: str | None = None


class ClusterQueue(DeferredModel):
    cluster: str
    jobs: list[ClusterJob]


class ClusterLaunchResponse(DeferredModel):
    cluster: ClusterView
    job: ClusterJob
    action: Literal["created", "reused", "starting", "provisioning"]
    notes: list[str] = Field(default_factory=list, description="What of the task skyless does not act on.")


class ClusterCancelResponse(DeferredModel):
    cluster: str
    cancelled: list[int]


class ClusterLogsResponse(DeferredModel):
    cluster: str
    job: int
    rank: int
    state: str
    num_nodes: int = 1
    text: str
    cursor: str | None = None
    finished: bool = False


class SshNode(DeferredModel):
    rank: int
    instance_id: str
    host: str | None = Field(None, description="Where to reach the node (its public address).")
    user: str | None = None
    port: int = 22


class SshAccess(DeferredModel):
    cluster: str
    cloud: str | None
    provider: str | None
    method: Literal["local", "ssh"] = Field(
        description="local: a shell in the node's sandbox on this machine"
    )
    provider_cluster: str | None = None
    nodes: list[SshNode]
    message: str | None = None


class ClusterClaimRequest(RequestBody):
    instance_id: str = Field(min_length=1, max_length=256)


class ClusterClaimResponse(DeferredModel):
    agent_token: str = Field(description="The cluster's agent token: the agent polls and reports with it.")


class ClusterPollRequest(RequestBody):
    instance_id: str = Field(min_length=1, max_length=256)
    have: list[int] = Field(default_factory=list, max_length=500, description="Jobs this node has started.")
    running: list[int] = Field(default_factory=list, max_length=500, description="Jobs running on it now.")
    sessions: int = Field(0, ge=0, le=100000, description="Shells open on the node.")


class ClusterPollResponse(DeferredModel):
    state: str
    start: list[dict[str, object]] = Field(default_factory=list, description="Configs of jobs to start.")
    cancel: list[int] = Field(default_factory=list)
    poll_seconds: float = 2.0
    exit: bool = False
    ssh_keys: list[str] = Field(default_factory=list)


class ClusterJobStatusRequest(RequestBody):
    instance_id: str = Field(min_length=1, max_length=256)
    phase: ClusterAgentPhase
    exit_code: int | None = None
    message: str | None = Field(None, max_length=4096)


class ClusterJobStatusResponse(DeferredModel):
    job: int
    state: str
    cancel: bool = False
