"""The /teams routes: a member's read-only view of the team's jobs and clusters (shared.tenants.members), and
the team's Slack channel for its budget notices (set by an admin key or the team's admin). Nothing here
changes a job or a cluster; a caller who is not a member gets the 404 a missing team gets."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from functions.submit.lazy_modules import module_on_first_use
from functions.submit.route_table import QueryParam
from shared.api.models import JobDetail
from shared.config import Settings
from shared.store.users import User

Route = Callable[..., Callable[[Callable[..., Any]], Callable[..., Any]]]
TEAM_JOB_QUERY = (
    QueryParam("state", "string", "Only jobs in these states, comma-separated (running,failed)"),
    QueryParam("since", "string", "Only jobs submitted since: a duration (2d, 12h) or an ISO 8601 time"),
    QueryParam("limit", "integer", "At most this many jobs per member (1-1000, default 200)"),
)


if TYPE_CHECKING:
    from shared.api import admin_models, notification_models
    from shared.api.admin_models import MyTeams, TeamClusterList, TeamJobList
    from shared.api.notification_models import TeamNotifyRequest, TeamNotifyResponse
else:  # the API's model modules: imported by the first request of a route that reads one
    admin_models = module_on_first_use("shared.api.admin_models")
    notification_models = module_on_first_use("shared.api.notification_models")


def _members() -> Any:
    from shared.tenants import members

    return members


def register(route: Route, params: Callable[[], Any]) -> None:
    """Add the /teams routes with `route` (app.py's `_route`); `params` answers the query parameters."""

    @route("/teams", "GET", "The caller's teams and their members", response=lambda: admin_models.MyTeams)
    def my_teams(caller: User) -> MyTeams:
        teams = _members().my_teams(Settings.from_env(), caller.user_id)
        return admin_models.MyTeams(
            teams=[admin_models.TeamView(team=team, members=members) for team, members in teams.items()]
        )

    @route(
        "/teams/{team}/jobs",
        "GET",
        "Every member's jobs, newest first (read-only; members only)",
        response=lambda: admin_models.TeamJobList,
        query=TEAM_JOB_QUERY,
        errors=(400, 404),
    )
    def team_jobs(team: str, caller: User) -> TeamJobList:
        from shared.jobs.job_filters import job_filter

        query = params()
        where = job_filter(state=query.get("state"), since=query.get("since"), name=None,
                           limit=query.get("limit"))  # fmt: skip
        found = _members().team_jobs(Settings.from_env(), team, caller.user_id, where)
        jobs = [
            admin_models.TeamJob.model_validate({**job.as_dict(), "owner": owner}) for owner, job in found
        ]
        return admin_models.TeamJobList(team=team, jobs=jobs)

    @route(
        "/teams/{team}/jobs/{job_id}",
        "GET",
        "One member's job in full (read-only; members only)",
        response=JobDetail,
        errors=(404,),
    )
    def team_job(team: str, job_id: str, caller: User) -> JobDetail:
        view = _members().team_job(Settings.from_env(), team, caller.user_id, job_id)
        return JobDetail.model_validate(view.as_dict())

    @route(
        "/teams/{team}/clusters",
        "GET",
        "Every member's clusters (read-only; members only)",
        response=lambda: admin_models.TeamClusterList,
        errors=(404,),
    )
    def team_clusters(team: str, caller: User) -> TeamClusterList:
        found = _members().team_clusters(Settings.from_env(), team, caller.user_id)
        clusters = [
            admin_models.TeamCluster.model_validate({**cluster, "owner": owner}) for owner, cluster in found
        ]
        return admin_models.TeamClusterList(team=team, clusters=clusters)

    @route(
        "/teams/{team}/notify",
        "GET",
        "The team's Slack channel for its budget notices, masked (members only)",
        response=lambda: notification_models.TeamNotifyResponse,
        errors=(404,),
    )
    def get_team_notify(team: str, caller: User) -> TeamNotifyResponse:
        from shared.notifications.team_notices import team_channel

        masked = team_channel(Settings.from_env(), team, caller.user_id, admin_key=caller.admin)
        return _team_notify_answer(team, masked)

    @route(
        "/teams/{team}/notify",
        "PUT",
        "Set or clear the team's Slack channel for its budget notices (an admin key or the team's admin)",
        body=lambda: notification_models.TeamNotifyRequest,
        response=lambda: notification_models.TeamNotifyResponse,
        errors=(400, 403, 404),
    )
    def put_team_notify(team: str, caller: User, body: TeamNotifyRequest) -> TeamNotifyResponse:
        from shared.notifications.team_notices import set_team_channel

        settings = Settings.from_env()
        masked = set_team_channel(settings, team, caller.user_id, body.slack_webhook, admin_key=caller.admin)
        return _team_notify_answer(team, masked)


def _team_notify_answer(team: str, masked: str | None) -> TeamNotifyResponse:
    message = (
        f"team {team}'s budget notices go to Slack {masked} and to each member's own channels"
        if masked
        else f"team {team} has no Slack channel: its budget notices go to each member's own channels"
    )
    return notification_models.TeamNotifyResponse(team=team, slack_webhook=masked, message=message)
