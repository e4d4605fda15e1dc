"""The named clusters' routes: users' /clusters/* (launch, exec, queue, logs, stop, start, down, autostop,
ssh) and the cluster nodes' /cluster-agent/* and /node-agent/* (views: cluster_views.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from chalice import Chalice, Response

from functions.submit.lazy_modules import module_on_first_use
from functions.submit.route_table import LOG_QUERY, QueryParam, current_request, int_param, query_params
from shared.config import Settings
from shared.store.users import User

if TYPE_CHECKING:
    from functions.submit import cluster_views
    from shared.api import cluster_models
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
    from shared.clusters.agents import ClusterBootCaller
    from shared.store.cluster_records import NamedClusterModel
else:  # imported by the first request of one of these routes (the views import the task models)
    cluster_models = module_on_first_use("shared.api.cluster_models")
    cluster_views = module_on_first_use("functions.submit.cluster_views")

Route = Callable[..., Callable[[Callable[..., Any]], Callable[..., Any]]]


def register(route: Route, app: Chalice) -> None:
    """Add the named clusters' routes to `app` with `route` (app.py's `_route`)."""

    @route(
        "/clusters",
        "GET",
        "The caller's clusters (not torn down)",
        response=lambda: cluster_models.ClusterList,
        query=(QueryParam("all_users", "string", "true: every user's, each with its owner (an admin key)"),),
        errors=(400, 403),
    )
    def list_clusters(caller: User) -> ClusterList:
        return cluster_views.list_for(Settings.from_env(), caller, query_params(app))

    @route(
        "/clusters/{name}",
        "GET",
        "One cluster: place, nodes, autostop, cost, timeline",
        response=lambda: cluster_models.ClusterDetail,
        errors=(400, 404),
    )
    def get_cluster(name: str, caller: User) -> ClusterDetail:
        return cluster_views.detail(Settings.from_env(), caller, name)

    @route(
        "/clusters/{name}/launch",
        "POST",
        "Launch a task on a named cluster (provision, reuse or start it)",
        status=201,
        body=lambda: cluster_models.ClusterLaunchRequest,
        response=lambda: cluster_models.ClusterLaunchResponse,
        errors=(400, 409),
    )
    def launch_on_cluster(name: str, caller: User, body: ClusterLaunchRequest) -> ClusterLaunchResponse:
        return cluster_views.launch(Settings.from_env(), caller, name, body)

    @route(
        "/clusters/{name}/exec",
        "POST",
        "Queue a task or command on an UP cluster (no setup)",
        status=201,
        body=lambda: cluster_models.ClusterExecRequest,
        response=lambda: cluster_models.ClusterJob,
        errors=(400, 404, 409),
    )
    def exec_on_cluster(name: str, caller: User, body: ClusterExecRequest) -> ClusterJob:
        return cluster_views.exec_job(Settings.from_env(), caller, name, body)

    @route(
        "/clusters/{name}/queue",
        "GET",
        "The cluster's jobs, newest first",
        response=lambda: cluster_models.ClusterQueue,
        errors=(400, 404),
    )
    def cluster_queue(name: str, caller: User) -> ClusterQueue:
        return cluster_views.queue(Settings.from_env(), caller, name)

    @route(
        "/clusters/{name}/jobs/{job}/logs",
        "GET",
        "A cluster job's log from a cursor ('latest': newest job)",
        response=lambda: cluster_models.ClusterLogsResponse,
        query=LOG_QUERY,
        errors=(400, 404),
    )
    def cluster_job_logs(name: str, job: str, caller: User) -> ClusterLogsResponse:
        params = query_params(app)
        rank = int_param(params, "rank", 0)
        return cluster_views.logs(
            Settings.from_env(), caller, name, job, rank=rank, after=params.get("after")
        )

    @route(
        "/clusters/{name}/jobs/{job}/cancel",
        "POST",
        "Cancel a job of the cluster ('all': every live job)",
        response=lambda: cluster_models.ClusterCancelResponse,
        errors=(400, 404),
    )
    def cancel_cluster_job(name: str, job: str, caller: User) -> ClusterCancelResponse:
        return cluster_views.cancel(Settings.from_env(), caller, name, job)

    @route(
        "/clusters/{name}/stop",
        "POST",
        "Stop the cluster (disks kept)",
        response=lambda: cluster_models.ClusterView,
        errors=(400, 404, 409),
    )
    def stop_cluster(name: str, caller: User) -> ClusterView:
        return cluster_views.stop(Settings.from_env(), caller, name)

    @route(
        "/clusters/{name}/start",
        "POST",
        "Start a stopped cluster",
        response=lambda: cluster_models.ClusterView,
        errors=(400, 404, 409),
    )
    def start_cluster(name: str, caller: User) -> ClusterView:
        return cluster_views.start(Settings.from_env(), caller, name)

    @route(
        "/clusters/{name}/down",
        "POST",
        "Tear the cluster down",
        response=lambda: cluster_models.ClusterView,
        errors=(400, 404, 409),
    )
    def down_cluster(name: str, caller: User) -> ClusterView:
        return cluster_views.down(Settings.from_env(), caller, name)

    @route(
        "/clusters/{name}/autostop",
        "POST",
        "Set (or, with -1, cancel) the cluster's autostop",
        body=lambda: cluster_models.AutostopRequest,
        response=lambda: cluster_models.ClusterView,
        errors=(400, 404, 409),
    )
    def autostop_cluster(name: str, caller: User, body: AutostopRequest) -> ClusterView:
        return cluster_views.autostop(Settings.from_env(), caller, name, body)

    @route(
        "/clusters/{name}/ssh",
        "POST",
        "How to reach the nodes; on a cloud, let the caller's key in",
        body=lambda: cluster_models.SshRequest,
        response=lambda: cluster_models.SshAccess,
        errors=(400, 404, 409),
    )
    def ssh_cluster(name: str, caller: User, body: SshRequest) -> SshAccess:
        identity = (current_request(app).context or {}).get("identity") or {}
        return cluster_views.ssh(Settings.from_env(), caller, name, body, identity.get("sourceIp"))

    @route("/node-agent/{name}", "GET", "The node agent's source (a cluster node's user-data fetches it)",
            auth="none", errors=(404,))  # fmt: skip
    def node_agent_source(name: str) -> Response:
        return Response(body=cluster_views.agent_source(name), status_code=200,
                        headers={"Content-Type": "text/x-python; charset=utf-8"})  # fmt: skip

    @route(
        "/cluster-agent/{key}/claim",
        "POST",
        "A cluster node trades its boot token for the agent token",
        auth="cluster_boot",
        body=lambda: cluster_models.ClusterClaimRequest,
        response=lambda: cluster_models.ClusterClaimResponse,
        errors=(400, 404, 425),
    )
    def cluster_agent_claim(
        key: str, caller: ClusterBootCaller, body: ClusterClaimRequest
    ) -> ClusterClaimResponse:
        return cluster_views.agent_claim(Settings.from_env(), caller, body)

    @route(
        "/cluster-agent/{key}/poll",
        "POST",
        "A cluster node asks for work and reports presence and shells",
        auth="cluster_agent",
        body=lambda: cluster_models.ClusterPollRequest,
        response=lambda: cluster_models.ClusterPollResponse,
        errors=(404,),
    )
    def cluster_agent_poll(
        key: str, caller: NamedClusterModel, body: ClusterPollRequest
    ) -> ClusterPollResponse:
        return cluster_views.agent_poll(Settings.from_env(), key, body, caller)

    @route(
        "/cluster-agent/{key}/jobs/{job}/status",
        "POST",
        "A cluster node reports a job's phase",
        auth="cluster_agent",
        body=lambda: cluster_models.ClusterJobStatusRequest,
        response=lambda: cluster_models.ClusterJobStatusResponse,
        errors=(404,),
    )
    def cluster_agent_job_status(
        key: str, job: str, caller: NamedClusterModel, body: ClusterJobStatusRequest
    ) -> ClusterJobStatusResponse:
        return cluster_views.agent_job_status(Settings.from_env(), key, job, body)
