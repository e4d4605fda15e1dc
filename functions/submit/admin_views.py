"""The /admin routes (an admin key only): users, teams, bucket grants and the audit log. Each view checks the
caller is an admin, calls one operation of shared.tenants.admin and shapes the answer."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from functions.submit.lazy_modules import module_on_first_use
from functions.submit.route_table import QueryParam
from shared.config import Settings
from shared.errors import ForbiddenError
from shared.store.users import User

if TYPE_CHECKING:
    from shared.api import admin_models
    from shared.api.admin_models import (
        AuditLog,
        BucketList,
        CreateTeamRequest,
        CreateUserRequest,
        GrantRequest,
        GrantView,
        MemberRequest,
        NewUserResponse,
        RevokeGrantRequest,
        RevokeUserResponse,
        TeamList,
        TeamView,
        UserList,
    )
else:  # the API's model modules: imported by the first request of a route that reads one
    admin_models = module_on_first_use("shared.api.admin_models")

Route = Callable[..., Callable[[Callable[..., Any]], Callable[..., Any]]]
ADMIN_ERRORS = (400, 403, 404, 409)


def _admin(caller: User) -> str:
    if not caller.admin:
        raise ForbiddenError("an admin key is needed", field="Authorization",
                             hint="an admin runs `skyless admin users create NAME --admin`")  # fmt: skip
    return caller.user_id


def _admin_ops() -> Any:
    from shared.tenants import admin

    return admin


def _teams_view(teams: dict[str, set[str]]) -> TeamList:
    return admin_models.TeamList(
        teams=[admin_models.TeamView(team=t, members=sorted(m)) for t, m in sorted(teams.items())]
    )


def register(route: Route, params: Callable[[], Any]) -> None:
    """Add the /admin routes with `route` (app.py's `_route`); `params` answers the query parameters."""

    @route(
        "/admin/users",
        "POST",
        "Create a user and answer their API key, once (admin)",
        status=201,
        body=lambda: admin_models.CreateUserRequest,
        response=lambda: admin_models.NewUserResponse,
        errors=ADMIN_ERRORS,
    )
    def create_user(caller: User, body: CreateUserRequest) -> NewUserResponse:
        made = _admin_ops().add_user(
            Settings.from_env(), actor=_admin(caller), name=body.name, admin=body.admin
        )
        return admin_models.NewUserResponse(
            user_id=made.user_id, name=made.name, admin=made.admin, api_key=made.api_key
        )

    @route(
        "/admin/users",
        "GET",
        "Every user with a live key and their teams (admin)",
        response=lambda: admin_models.UserList,
        errors=ADMIN_ERRORS,
    )
    def list_users(caller: User) -> UserList:
        _admin(caller)
        settings = Settings.from_env()
        teams_of: dict[str, list[str]] = {}
        for team, members in sorted(_admin_ops().teams(settings).items()):
            for member in members:
                teams_of.setdefault(member, []).append(team)
        views = [
            admin_models.UserView(
                user_id=u.user_id, name=u.name, admin=u.admin, keys=u.keys, teams=teams_of.get(u.user_id, [])
            )
            for u in _admin_ops().users(settings)
        ]
        return admin_models.UserList(users=views)

    @route(
        "/admin/users/{user_id}/revoke",
        "POST",
        "Revoke every API key of a user (admin)",
        response=lambda: admin_models.RevokeUserResponse,
        errors=ADMIN_ERRORS,
    )
    def revoke_user(user_id: str, caller: User) -> RevokeUserResponse:
        count = _admin_ops().remove_user(Settings.from_env(), actor=_admin(caller), user_id=user_id)
        return admin_models.RevokeUserResponse(user_id=user_id, revoked_keys=count)

    @route(
        "/admin/teams",
        "POST",
        "Create a team (admin)",
        status=201,
        body=lambda: admin_models.CreateTeamRequest,
        response=lambda: admin_models.TeamView,
        errors=ADMIN_ERRORS,
    )
    def create_team(caller: User, body: CreateTeamRequest) -> TeamView:
        _admin_ops().add_team(Settings.from_env(), actor=_admin(caller), team=body.team)
        return admin_models.TeamView(team=body.team, members=[])

    @route(
        "/admin/teams",
        "GET",
        "Every team and its members (admin)",
        response=lambda: admin_models.TeamList,
        errors=ADMIN_ERRORS,
    )
    def list_teams(caller: User) -> TeamList:
        _admin(caller)
        return _teams_view(_admin_ops().teams(Settings.from_env()))

    @route(
        "/admin/teams/{team}/members",
        "POST",
        "Add a user to a team (admin)",
        body=lambda: admin_models.MemberRequest,
        response=lambda: admin_models.TeamView,
        errors=ADMIN_ERRORS,
    )
    def add_member(team: str, caller: User, body: MemberRequest) -> TeamView:
        settings = Settings.from_env()
        _admin_ops().add_member(
            settings, actor=_admin(caller), team=team, user_id=body.user_id, team_admin=body.team_admin
        )
        return admin_models.TeamView(team=team, members=sorted(_admin_ops().teams(settings).get(team, set())))

    @route(
        "/admin/teams/{team}/members/{user_id}",
        "DELETE",
        "Remove a user from a team (admin)",
        response=lambda: admin_models.TeamView,
        errors=ADMIN_ERRORS,
    )
    def remove_member(team: str, user_id: str, caller: User) -> TeamView:
        settings = Settings.from_env()
        _admin_ops().remove_member(settings, actor=_admin(caller), team=team, user_id=user_id)
        return admin_models.TeamView(team=team, members=sorted(_admin_ops().teams(settings).get(team, set())))

    @route(
        "/admin/buckets/grants",
        "POST",
        "Grant a bucket (or a prefix) to a user or a team (admin)",
        body=lambda: admin_models.GrantRequest,
        response=lambda: admin_models.GrantView,
        errors=ADMIN_ERRORS,
    )
    def grant_bucket(caller: User, body: GrantRequest) -> GrantView:
        grant = _admin_ops().grant_bucket(
            Settings.from_env(), actor=_admin(caller), bucket=body.bucket, user=body.user, team=body.team,
            prefix=body.prefix, write=body.write,
        )  # fmt: skip
        return admin_models.GrantView(**grant.__dict__)

    @route(
        "/admin/buckets/revoke",
        "POST",
        "Revoke a bucket grant (admin)",
        body=lambda: admin_models.RevokeGrantRequest,
        errors=ADMIN_ERRORS,
    )
    def revoke_bucket(caller: User, body: RevokeGrantRequest) -> dict[str, str]:
        _admin_ops().revoke_bucket(
            Settings.from_env(),
            actor=_admin(caller),
            bucket=body.bucket,
            user=body.user,
            team=body.team,
            prefix=body.prefix,
        )
        return {"revoked": body.bucket}

    @route(
        "/admin/buckets",
        "GET",
        "Bucket grants, and the buckets skyless made for users (admin)",
        response=lambda: admin_models.BucketList,
        errors=ADMIN_ERRORS,
    )
    def list_buckets(caller: User) -> BucketList:
        _admin(caller)
        settings = Settings.from_env()
        return admin_models.BucketList(
            grants=[admin_models.GrantView(**g.__dict__) for g in _admin_ops().bucket_grants(settings)],
            owned=[
                admin_models.OwnedBucketView(
                    bucket=r.bucket, store=r.store, owner=r.owner, created_by_job=r.created_by
                )
                for r in _admin_ops().owned_buckets(settings)
            ],
        )

    @route(
        "/admin/audit",
        "GET",
        "The audit log, newest first (admin)",
        response=lambda: admin_models.AuditLog,
        query=(QueryParam("limit", "integer", "At most this many entries (1-1000, default 100)"),),
        errors=ADMIN_ERRORS,
    )
    def audit_log(caller: User) -> AuditLog:
        _admin(caller)
        from functions.submit.route_table import int_param

        entries = _admin_ops().audit(Settings.from_env(), limit=int_param(params(), "limit", 100))
        return admin_models.AuditLog(
            entries=[
                admin_models.AuditEntryView(
                    at=datetime.fromtimestamp(e.at, UTC).isoformat(),
                    actor=e.actor,
                    action=e.action,
                    target=e.target,
                    detail=e.detail,
                )
                for e in entries
            ]
        )
