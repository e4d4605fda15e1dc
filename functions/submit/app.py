"""The HTTPS API (Chalice): users submit and watch jobs; node agents fetch their config and report.

Each view decodes the request (route_table does bodies, auth and errors), calls one operation in
`shared`, and encodes the answer. Deployed as one Lambda behind API Gateway; served over HTTP by the
local runtime; driven in tests through `chalice.test.Client`.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from chalice import Chalice, Response

from functions.submit import admin_views, cluster_routes, contract_views, gateway_events, team_views
from functions.submit.dashboard import register_dashboard
from functions.submit.gateway_events import is_routed, to_rest_event
from functions.submit.lazy_modules import module_on_first_use
from functions.submit.route_table import (
    LOG_QUERY,
    ROUTES,
    Auth,
    QueryParam,
    RouteSpec,
    int_param,
    query_params,
    register_route,
)
from shared.api.auth import authenticate_agent, authenticate_boot, authenticate_user
from shared.api.models import (
    AgentConfigResponse,
    AgentStatusRequest,
    AgentStatusResponse,
    JobDetail,
    JobList,
    LogsResponse,
    PlanRequest,
    StorageCredentialsRequest,
    StorageCredentialsResponse,
    SubmitJobRequest,
    SubmitJobResponse,
    UploadRequest,
    UploadResponse,
)
from shared.config import Settings

if TYPE_CHECKING:
    from shared.api import (
        budget_models,
        cost_models,
        notification_models,
        report_models,
        schedule_models,
        storage_models,
    )
    from shared.api.budget_models import BudgetRequest, BudgetResponse
    from shared.api.cost_models import CostReportResponse
    from shared.api.notification_models import (
        NotificationSettingsRequest,
        NotificationSettingsResponse,
        NotificationTestResponse,
    )
    from shared.api.report_models import ProviderScorecardResponse
    from shared.api.schedule_models import CreateScheduleRequest, ScheduleList, ScheduleView
    from shared.api.storage_models import BucketList, BucketView
else:  # the API's model modules: imported by the first request of a route that reads one
    budget_models = module_on_first_use("shared.api.budget_models")
    cost_models = module_on_first_use("shared.api.cost_models")
    notification_models = module_on_first_use("shared.api.notification_models")
    report_models = module_on_first_use("shared.api.report_models")
    schedule_models = module_on_first_use("shared.api.schedule_models")
    storage_models = module_on_first_use("shared.api.storage_models")

if TYPE_CHECKING:
    from functions.submit import (
        budget_views,
        cost_views,
        job_views,
        notification_views,
        report_views,
        schedule_views,
    )
    from shared.api.auth import BootCaller
    from shared.store.users import User
else:  # each imported by the first request of one of its routes
    budget_views = module_on_first_use("functions.submit.budget_views")
    cost_views = module_on_first_use("functions.submit.cost_views")
    job_views = module_on_first_use("functions.submit.job_views")
    notification_views = module_on_first_use("functions.submit.notification_views")
    report_views = module_on_first_use("functions.submit.report_views")
    schedule_views = module_on_first_use("functions.submit.schedule_views")

# Chalice would set the "skyless" logger to ERROR, silencing every skyless.* module; logging is ours to set.
app = Chalice(app_name="skyless", configure_logs=False)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The Lambda entry point behind API Gateway's catch-all route (HTTP API payload 2.0 or REST proxy)."""
    if is_routed(event, app.routes):
        return app(event, context)
    rest_event = to_rest_event(event, app.routes)
    if rest_event is None:
        return gateway_events.not_found(event.get("rawPath") or event.get("path") or "/")
    return gateway_events.for_payload(event, app(rest_event, context))


def _authenticate(auth: Auth, headers: dict[str, str], path_args: dict[str, str]) -> Any:
    if auth == "user":
        return authenticate_user(headers, Settings.from_env())
    if auth == "boot":
        return authenticate_boot(headers, path_args["job_id"], Settings.from_env())
    if auth == "agent":
        authenticate_agent(headers, path_args["job_id"], Settings.from_env())
    if auth in ("cluster_boot", "cluster_agent"):
        from shared.clusters.agents import authenticate_cluster_agent, authenticate_cluster_boot
    if auth == "cluster_boot":
        return authenticate_cluster_boot(headers, path_args["key"], Settings.from_env())
    if auth == "cluster_agent":  # the caller is the cluster, as read to check the token
        return authenticate_cluster_agent(headers, path_args["key"], Settings.from_env())
    return None


def _route(path: str, method: str, summary: str, auth: Auth = "user", **spec: Any) -> Any:
    return register_route(app, RouteSpec(path, method, summary, auth, **spec), _authenticate)


@_route("/jobs", "POST", "Submit a task file as a job", status=201, body=SubmitJobRequest,
        response=SubmitJobResponse)  # fmt: skip
def submit_job(caller: User, body: SubmitJobRequest) -> SubmitJobResponse:
    return job_views.submit(Settings.from_env(), caller, body)


JOB_QUERY = (
    QueryParam("state", "string", "Only jobs in these states, comma-separated (running,failed)"),
    QueryParam("since", "string", "Only jobs submitted since: a duration (2d, 12h) or an ISO 8601 time"),
    QueryParam("name", "string", "Only jobs whose name contains this (case-insensitive)"),
    QueryParam("limit", "integer", "At most this many jobs (1-1000, default 200)"),
    QueryParam("cursor", "string", "The `cursor` a page answered: the page after it"),
    QueryParam("all_users", "string", "true: every user's jobs, each with its owner (an admin key only)"),
)


@_route(
    "/jobs", "GET", "The caller's jobs, newest first", response=JobList, query=JOB_QUERY, errors=(400, 403)
)
def list_jobs(caller: User) -> JobList:
    return job_views.list_for(Settings.from_env(), caller, query_params(app))


@_route("/jobs/{job_id}", "GET", "One job: its plan, cluster and timeline", response=JobDetail, errors=(404,))
def get_job(job_id: str, caller: User) -> JobDetail:
    return job_views.detail(Settings.from_env(), caller, job_id)


@_route("/jobs/{job_id}/cancel", "POST", "Cancel a job", response=JobDetail, errors=(404, 409))
def cancel_job(job_id: str, caller: User) -> JobDetail:
    return job_views.cancel(Settings.from_env(), caller, job_id)


@_route("/jobs/{job_id}/logs", "GET", "A job's log text from a cursor", response=LogsResponse,
        query=LOG_QUERY, errors=(400, 404))  # fmt: skip
def read_logs(job_id: str, caller: User) -> LogsResponse:
    params = query_params(app)
    rank = int_param(params, "rank", 0)
    return job_views.logs(Settings.from_env(), caller, job_id, rank=rank, after=params.get("after"))


@_route("/plan", "POST", "Dry run: the failover plan for a task, nothing recorded", body=PlanRequest)
def plan(caller: User, body: PlanRequest) -> dict[str, Any]:
    return job_views.dry_run(Settings.from_env(), body, caller)


@_route("/uploads", "POST", "A presigned PUT for a workdir tarball", status=201, body=UploadRequest,
        response=UploadResponse)  # fmt: skip
def create_upload(caller: User, body: UploadRequest) -> UploadResponse:
    return job_views.upload(Settings.from_env(), caller, body)


AGENT_QUERY = (QueryParam("instance_id", "string", "The asking node's instance id"),)


@_route("/agent/{job_id}/config", "GET",
        "A node's config and agent token, once per node, for its boot token (425 until every node is known)",
        auth="boot", response=AgentConfigResponse, query=AGENT_QUERY,
        errors=(400, 404, 410, 425))  # fmt: skip
def agent_config(job_id: str, caller: BootCaller) -> dict[str, Any]:
    instance_id = query_params(app).get("instance_id", "")
    return job_views.agent_config(Settings.from_env(), job_id, instance_id, caller)


@_route("/agent/{job_id}/status", "POST", "A node reports its phase or a heartbeat", auth="agent",
        body=AgentStatusRequest, response=AgentStatusResponse, errors=(404, 409, 410))  # fmt: skip
def agent_status(job_id: str, caller: None, body: AgentStatusRequest) -> AgentStatusResponse:
    return job_views.agent_status(Settings.from_env(), job_id, body)


COST_QUERY = (
    QueryParam("days", "integer", "The last N UTC days, today included (default 7)"),
    QueryParam("by", "string", "Group by cloud (default), user, job or day"),
    QueryParam("all_users", "string", "true: every user's jobs (an admin key only)"),
)


@_route(
    "/costs",
    "GET",
    "What jobs cost per attempt, against on-demand, and the savings",
    response=lambda: cost_models.CostReportResponse,
    query=COST_QUERY,
    errors=(400, 403),
)
def cost_report(caller: User) -> CostReportResponse:
    return cost_views.report(Settings.from_env(), caller, query_params(app))


PROVIDER_QUERY = (
    QueryParam("days", "integer", "Jobs submitted in the last N days (default 30)"),
    QueryParam("all_users", "string", "true: every user's jobs (an admin key only)"),
)


@_route(
    "/reports/providers",
    "GET",
    "What each cloud, region and instance family delivered",
    response=lambda: report_models.ProviderScorecardResponse,
    query=PROVIDER_QUERY,
    errors=(400, 403),
)
def provider_report(caller: User) -> ProviderScorecardResponse:
    return report_views.providers(Settings.from_env(), caller, query_params(app))


BUDGET_QUERY = (
    QueryParam("user_id", "string", "Another user's (an admin key only)"),
    QueryParam("team", "string", "A team's (its members and admin keys)"),
)


@_route(
    "/budget",
    "GET",
    "A user's or a team's monthly budget and this month's spend",
    response=lambda: budget_models.BudgetResponse,
    query=BUDGET_QUERY,
    errors=(403, 404),
)
def budget_show(caller: User) -> BudgetResponse:
    return budget_views.show(Settings.from_env(), caller, query_params(app))


@_route(
    "/budget",
    "PUT",
    "Set a monthly budget (an admin key for another user's or a team's)",
    body=lambda: budget_models.BudgetRequest,
    response=lambda: budget_models.BudgetResponse,
    errors=(400, 403, 404),
)
def budget_put(caller: User, body: BudgetRequest) -> BudgetResponse:
    return budget_views.put(Settings.from_env(), caller, body)


@_route("/agent/{job_id}/storage", "POST", "Fresh credentials for the node's buckets", auth="agent",
        body=StorageCredentialsRequest, response=StorageCredentialsResponse, errors=(400, 404))  # fmt: skip
def agent_storage(job_id: str, caller: None, body: StorageCredentialsRequest) -> StorageCredentialsResponse:
    from shared.jobs.job_storage import fresh_node_storage

    storage = fresh_node_storage(Settings.from_env(), job_id, body.instance_id)
    return StorageCredentialsResponse(storage=storage)


@functools.cache
def _openapi_document() -> dict[str, Any]:
    from functions.submit.openapi import build_openapi

    return build_openapi(ROUTES)


@_route("/openapi.json", "GET", "This description", auth="none")
def openapi() -> Response:
    return Response(body=_openapi_document(), status_code=200)


# ---------------------------------------------------------------- schedules (views: schedule_views.py)


@_route(
    "/schedules",
    "POST",
    "Create a cron schedule that runs a task file",
    status=201,
    body=lambda: schedule_models.CreateScheduleRequest,
    response=lambda: schedule_models.ScheduleView,
    errors=(400, 409),
)
def create_schedule(caller: User, body: CreateScheduleRequest) -> ScheduleView:
    return schedule_views.create(Settings.from_env(), caller, body)


@_route("/schedules", "GET", "The caller's schedules", response=lambda: schedule_models.ScheduleList)
def list_schedules(caller: User) -> ScheduleList:
    return schedule_views.list_for(Settings.from_env(), caller)


@_route(
    "/schedules/{name}", "GET", "One schedule", response=lambda: schedule_models.ScheduleView, errors=(404,)
)
def get_schedule(name: str, caller: User) -> ScheduleView:
    return schedule_views.show(Settings.from_env(), caller, name)


@_route(
    "/schedules/{name}/pause",
    "POST",
    "Pause a schedule",
    response=lambda: schedule_models.ScheduleView,
    errors=(404,),
)
def pause_schedule(name: str, caller: User) -> ScheduleView:
    return schedule_views.pause(Settings.from_env(), caller, name, paused=True)


@_route(
    "/schedules/{name}/resume",
    "POST",
    "Resume a paused schedule",
    response=lambda: schedule_models.ScheduleView,
    errors=(404,),
)
def resume_schedule(name: str, caller: User) -> ScheduleView:
    return schedule_views.pause(Settings.from_env(), caller, name, paused=False)


@_route("/schedules/{name}", "DELETE", "Delete a schedule", errors=(404,))
def delete_schedule(name: str, caller: User) -> dict[str, str]:
    return schedule_views.delete(Settings.from_env(), caller, name)


admin_views.register(_route, lambda: query_params(app))  # /admin/*: users, teams, bucket grants, audit
team_views.register(_route, lambda: query_params(app))  # /teams/*: members see the team's work, read-only
contract_views.register(_route)  # /admin/contracts: the deployment's contracts

# ------------------------------------------------------------ notifications (views: notification_views.py)


@_route(
    "/notifications",
    "GET",
    "The caller's notification settings (webhook masked)",
    response=lambda: notification_models.NotificationSettingsResponse,
)
def get_notifications(caller: User) -> NotificationSettingsResponse:
    return notification_views.show(Settings.from_env(), caller)


@_route(
    "/notifications",
    "PUT",
    "Change the caller's notification settings (omitted fields unchanged)",
    body=lambda: notification_models.NotificationSettingsRequest,
    response=lambda: notification_models.NotificationSettingsResponse,
    errors=(400,),
)
def put_notifications(caller: User, body: NotificationSettingsRequest) -> NotificationSettingsResponse:
    return notification_views.update(Settings.from_env(), caller, body)


@_route(
    "/notifications/test",
    "POST",
    "Send a test notification to the caller's channels now",
    response=lambda: notification_models.NotificationTestResponse,
)
def test_notifications(caller: User) -> NotificationTestResponse:
    return notification_views.test(Settings.from_env(), caller)


cluster_routes.register(_route, app)  # /clusters/*, /cluster-agent/*, /node-agent/*

# ------------------------------------------------------- buckets skyless made (`skyless storage ls|delete`)


@_route(
    "/storage",
    "GET",
    "The caller's buckets (from task files' file_mounts)",
    response=lambda: storage_models.BucketList,
)
def list_storage(caller: User) -> BucketList:
    from shared.storage.listing import buckets_of

    found = buckets_of(Settings.from_env(), caller.user_id)
    return storage_models.BucketList(
        buckets=[storage_models.BucketView.model_validate(b, from_attributes=True) for b in found]
    )


@_route(
    "/storage/{name}",
    "DELETE",
    "Delete a bucket skyless made for one of the caller's jobs",
    response=lambda: storage_models.BucketView,
    errors=(404, 409),
)
def delete_storage(name: str, caller: User) -> BucketView:
    from shared.storage.listing import delete_bucket

    deleted = delete_bucket(Settings.from_env(), caller.user_id, name)
    return storage_models.BucketView.model_validate(deleted, from_attributes=True)


# --------------------------------------------------------------- the dashboard (functions/submit/dashboard/)

register_dashboard(app)
