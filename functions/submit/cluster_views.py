"""Between the API's cluster bodies (shared/api/cluster_models.py) and the operations of shared.clusters."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import node_agent
from functions.submit.route_table import NotReadyError, every_user_asked
from node_agent.user_data import bundled_agent_source
from shared.api.cluster_models import (
    AutostopRequest,
    ClusterCancelResponse,
    ClusterClaimRequest,
    ClusterClaimResponse,
    ClusterDetail,
    ClusterExecRequest,
    ClusterJob,
    ClusterJobStatusRequest,
    ClusterJobStatusResponse,
    ClusterLaunchRequest,
    ClusterLaunchResponse,
    ClusterList,
    ClusterLogsResponse,
    ClusterPollRequest,
    ClusterPollResponse,
    ClusterQueue,
    ClusterView,
    SshAccess,
    SshRequest,
)
from shared.clusters import agents, operations, shells, views
from shared.config import Settings
from shared.errors import NotFoundError, UserError
from shared.jobs.file_mounts import upload_prefix
from shared.store.cluster_records import NamedClusterModel
from shared.store.users import User

MAX_JOB_NUMBER = 10**8


def _check_workdir_key(caller: User, key: str | None) -> None:
    if key is not None and (not key.startswith(upload_prefix(caller.user_id)) or ".." in key.split("/")):
        raise UserError("not a key that POST /uploads gave you", field="workdir_key")


def job_number(raw: str) -> int:
    if not raw.isdigit() or int(raw) > MAX_JOB_NUMBER:
        raise UserError(f"a job number is a positive integer, not {raw[:20]!r}", field="job")
    return int(raw)


def launch(settings: Settings, caller: User, name: str, body: ClusterLaunchRequest) -> ClusterLaunchResponse:
    _check_workdir_key(caller, body.workdir_key)
    outcome = operations.launch_on_cluster(
        settings,
        owner=caller.user_id,
        name=name,
        task_text=body.task_text(),
        filename=body.filename,
        env=body.env,
        secrets=body.secrets,
        minimize=body.minimize,
        clouds=body.clouds,
        workdir_key=body.workdir_key,
        file_mount_keys=body.file_mount_keys,
        fast=body.fast,
        idle_minutes=body.idle_minutes,
        down=body.down,
    )
    return ClusterLaunchResponse(
        cluster=ClusterView.model_validate(views.cluster_view(outcome.cluster)),
        job=ClusterJob.model_validate(views.job_view(outcome.cluster, outcome.job)),
        action=outcome.action,
        notes=list(outcome.notes),
    )


def exec_job(settings: Settings, caller: User, name: str, body: ClusterExecRequest) -> ClusterJob:
    _check_workdir_key(caller, body.workdir_key)
    job = operations.exec_on_cluster(
        settings,
        owner=caller.user_id,
        name=name,
        task_text=body.task_text(),
        command=body.command,
        filename=body.filename,
        env=body.env,
        secrets=body.secrets,
        workdir_key=body.workdir_key,
        file_mount_keys=body.file_mount_keys,
    )
    return ClusterJob.model_validate(views.get_cluster_job(settings, owner=caller.user_id, name=name,
                                                           number=int(job.number)))  # fmt: skip


def list_for(settings: Settings, caller: User, params: Mapping[str, str] | None = None) -> ClusterList:
    every_user = every_user_asked(caller.admin, params or {}, "every user's clusters")
    clusters = views.list_clusters(settings, owner=None if every_user else caller.user_id)
    return ClusterList(clusters=[ClusterView.model_validate(c) for c in clusters])


def detail(settings: Settings, caller: User, name: str) -> ClusterDetail:
    return ClusterDetail.model_validate(views.get_cluster(settings, owner=caller.user_id, name=name))


def queue(settings: Settings, caller: User, name: str) -> ClusterQueue:
    jobs = views.cluster_queue(settings, owner=caller.user_id, name=name)
    return ClusterQueue(cluster=name, jobs=[ClusterJob.model_validate(j) for j in jobs])


def logs(settings: Settings, caller: User, name: str, job: str, *, rank: int, after: str | None
         ) -> ClusterLogsResponse:  # fmt: skip
    number = (
        views.latest_job_number(settings, owner=caller.user_id, name=name)
        if job == "latest"
        else job_number(job)
    )
    page = views.read_cluster_logs(
        settings, owner=caller.user_id, name=name, number=number, rank=rank, after=after
    )
    return ClusterLogsResponse.model_validate(page)


def cancel(settings: Settings, caller: User, name: str, job: str) -> ClusterCancelResponse:
    numbers = None if job == "all" else [job_number(job)]
    done = operations.cancel_cluster_jobs(settings, owner=caller.user_id, name=name, numbers=numbers)
    return ClusterCancelResponse(cluster=name, cancelled=done)


def stop(settings: Settings, caller: User, name: str) -> ClusterView:
    cluster = operations.stop_cluster(settings, owner=caller.user_id, name=name)
    return ClusterView.model_validate(views.cluster_view(cluster))


def start(settings: Settings, caller: User, name: str) -> ClusterView:
    cluster = operations.start_cluster(settings, owner=caller.user_id, name=name)
    return ClusterView.model_validate(views.cluster_view(cluster))


def down(settings: Settings, caller: User, name: str) -> ClusterView:
    cluster = operations.down_cluster(settings, owner=caller.user_id, name=name)
    return ClusterView.model_validate(views.cluster_view(cluster))


def autostop(settings: Settings, caller: User, name: str, body: AutostopRequest) -> ClusterView:
    cluster = operations.set_autostop(
        settings, owner=caller.user_id, name=name, idle_minutes=body.idle_minutes, down=body.down
    )
    return ClusterView.model_validate(views.cluster_view(cluster))


def ssh(settings: Settings, caller: User, name: str, body: SshRequest, source_ip: str | None) -> SshAccess:
    cidr = body.caller_cidr or (f"{source_ip}/32" if source_ip and ":" not in source_ip else source_ip)
    access = shells.ssh_access(
        settings, owner=caller.user_id, name=name, public_key=body.public_key, caller_cidr=cidr
    )
    return SshAccess.model_validate(access)


AGENT_FILES = {"agent.py", "cluster_agent.py"}


def agent_source(name: str) -> str:
    """The node agent package as one file (agent.py), or cluster_agent.py as it is: code, no secret."""
    if name not in AGENT_FILES:
        raise NotFoundError(f"no agent file {name[:40]}", field="name")
    if name == "agent.py":
        return bundled_agent_source()
    return (Path(node_agent.__file__).parent / name).read_text()


def agent_claim(settings: Settings, caller: agents.ClusterBootCaller, body: ClusterClaimRequest
                ) -> ClusterClaimResponse:  # fmt: skip
    token = agents.claim_cluster_node(settings, caller, body.instance_id)
    if token is None:
        raise NotReadyError("the cluster's nodes are not recorded yet", hint="retry in a second")
    return ClusterClaimResponse(agent_token=token)


def agent_poll(
    settings: Settings, key: str, body: ClusterPollRequest, cluster: NamedClusterModel
) -> ClusterPollResponse:
    answer = agents.poll_cluster(
        settings,
        key,
        instance_id=body.instance_id,
        have=body.have,
        running=body.running,
        sessions=body.sessions,
        cluster=cluster,
    )
    return ClusterPollResponse.model_validate(answer.as_dict())


def agent_job_status(settings: Settings, key: str, job: str, body: ClusterJobStatusRequest
                     ) -> ClusterJobStatusResponse:  # fmt: skip
    answer = agents.report_cluster_job(
        settings,
        key,
        job_number(job),
        instance_id=body.instance_id,
        phase=body.phase,
        exit_code=body.exit_code,
        message=body.message,
    )
    return ClusterJobStatusResponse(job=answer.job, state=answer.state, cancel=answer.cancel)
