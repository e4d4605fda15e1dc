"""`skyless admin users | teams | buckets | audit`: a deployment's users, teams and bucket grants, through the
HTTPS API's /admin routes (an admin key). Every change lands in the audit log `skyless admin audit` shows.

Exit codes: 0 success, 2 an error (the request, the API, a key that is not an admin's).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any
from urllib.parse import quote

import typer
from rich.markup import escape
from rich.table import Table

from cli.api_client import SkylessClient
from cli.client_config import ApiKey, ApiUrl, resolve_api
from cli.console import stderr_console, stdout_console
from shared.api.admin_models import AuditLog, BucketList, GrantView, NewUserResponse, TeamList, UserList
from shared.errors import UserError

admin_app = typer.Typer(
    help="Administer users, teams and bucket grants (an admin key).", no_args_is_help=True
)
users_app = typer.Typer(help="Create, list and revoke users.", no_args_is_help=True)
teams_app = typer.Typer(help="Teams: their members see the team's jobs and clusters.", no_args_is_help=True)
buckets_app = typer.Typer(help="Which buckets (or prefixes) users and teams may mount.", no_args_is_help=True)
admin_app.add_typer(users_app, name="users")
admin_app.add_typer(teams_app, name="teams")
admin_app.add_typer(buckets_app, name="buckets")

UserId = Annotated[str, typer.Argument(help="The user's id (u-...), as `skyless admin users list` shows.")]
Team = Annotated[str, typer.Argument(help="The team's name.")]
Bucket = Annotated[str, typer.Argument(help="The bucket's name (no s3://).")]
ToUser = Annotated[str | None, typer.Option("--user", help="The user id granted.")]
ToTeam = Annotated[str | None, typer.Option("--team", help="The team granted.")]
Prefix = Annotated[str, typer.Option("--prefix", help="Only this part of the bucket (default: all of it).")]


def register(app: typer.Typer) -> None:
    """Add `skyless admin ...` to the `skyless` command."""
    from cli.contract_commands import contracts_app  # `admin contracts`: its own module

    if all(group.name != "contracts" for group in admin_app.registered_groups):  # registered once
        admin_app.add_typer(contracts_app, name="contracts")
    app.add_typer(admin_app, name="admin")


@contextmanager
def _client(api_url: str | None, api_key: str | None) -> Iterator[SkylessClient]:
    try:
        target = resolve_api(api_url, api_key)
        with SkylessClient(target.url, target.api_key) as client:
            yield client
    except UserError as exc:
        stderr_console().print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None


def _call(api_url: str | None, api_key: str | None, method: str, path: str, **kwargs: Any) -> Any:
    with _client(api_url, api_key) as client:
        return client._call(method, path, **kwargs)


# -- users ------------------------------------------------------------------------------------------------


@users_app.command("create")
def users_create(
    name: Annotated[str, typer.Argument(help="Who the user is.")],
    admin: Annotated[bool, typer.Option("--admin", help="The key may administer this deployment.")] = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Create a user and print their API key (shown once: hand it over now)."""
    made = NewUserResponse.model_validate(
        _call(api_url, api_key, "POST", "/admin/users", json={"name": name, "admin": admin})
    )
    out = stdout_console()
    out.print(
        f"User [bold]{escape(made.name)}[/bold] created: {made.user_id}" + (" (admin)" if made.admin else "")
    )
    out.print(f"API key (shown once): {made.api_key}", soft_wrap=True)


@users_app.command("list")
def users_list(api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """Every user with a live key."""
    found = UserList.model_validate(_call(api_url, api_key, "GET", "/admin/users")).users
    table = Table("USER", "NAME", "ADMIN", "KEYS", "TEAMS")
    for user in found:
        table.add_row(user.user_id, escape(user.name), "yes" if user.admin else "-", str(user.keys),
                      escape(", ".join(user.teams)) or "-")  # fmt: skip
    stdout_console().print(table)


@users_app.command("revoke")
def users_revoke(user_id: UserId, api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """Revoke every API key of a user (their jobs and buckets stay; nothing can use them)."""
    answer = _call(api_url, api_key, "POST", f"/admin/users/{quote(user_id, safe='')}/revoke")
    stdout_console().print(f"User {escape(user_id)} revoked ({answer['revoked_keys']} key(s)).")


# -- teams ------------------------------------------------------------------------------------------------


@teams_app.command("create")
def teams_create(team: Team, api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """Create a team."""
    _call(api_url, api_key, "POST", "/admin/teams", json={"team": team})
    stdout_console().print(f"Team {escape(team)} created.")


@teams_app.command("add")
def teams_add(
    team: Team,
    user_id: UserId,
    team_admin: Annotated[
        bool | None,
        typer.Option("--team-admin/--no-team-admin", help="The member sets the team's budget (or no more)."),
    ] = None,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Add a user to a team (or, with --team-admin, make a member its admin)."""
    body: dict[str, object] = {"user_id": user_id}
    if team_admin is not None:
        body["team_admin"] = team_admin
    _call(api_url, api_key, "POST", f"/admin/teams/{quote(team, safe='')}/members", json=body)
    role = {True: " (its admin)", False: " (not its admin)", None: ""}[team_admin]
    stdout_console().print(f"{escape(user_id)} is a member of team {escape(team)}{role}.")


@teams_app.command("remove")
def teams_remove(team: Team, user_id: UserId, api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """Remove a user from a team."""
    path = f"/admin/teams/{quote(team, safe='')}/members/{quote(user_id, safe='')}"
    _call(api_url, api_key, "DELETE", path)
    stdout_console().print(f"{escape(user_id)} left team {escape(team)}.")


@teams_app.command("list")
def teams_list(api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """Every team and its members."""
    found = TeamList.model_validate(_call(api_url, api_key, "GET", "/admin/teams")).teams
    table = Table("TEAM", "MEMBERS")
    for team in found:
        table.add_row(escape(team.team), escape(", ".join(team.members)) or "-")
    stdout_console().print(table)


# -- buckets ----------------------------------------------------------------------------------------------


@buckets_app.command("grant")
def buckets_grant(
    bucket: Bucket,
    user: ToUser = None,
    team: ToTeam = None,
    prefix: Prefix = "",
    write: Annotated[bool, typer.Option("--write", help="Tasks may write (MOUNT modes).")] = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Let a user (--user) or a team (--team) mount a bucket, or a prefix of it; read-only unless --write."""
    body = {"bucket": bucket, "user": user, "team": team, "prefix": prefix, "write": write}
    grant = GrantView.model_validate(_call(api_url, api_key, "POST", "/admin/buckets/grants", json=body))
    where = f"{grant.bucket}/{grant.prefix}" if grant.prefix else grant.bucket
    mode = "read-write" if grant.write else "read-only"
    stdout_console().print(f"Granted {escape(where)} to {escape(grant.grantee)} ({mode}).")


@buckets_app.command("revoke")
def buckets_revoke(
    bucket: Bucket,
    user: ToUser = None,
    team: ToTeam = None,
    prefix: Prefix = "",
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Take a grant back (running nodes lose it when their credentials next renew)."""
    body = {"bucket": bucket, "user": user, "team": team, "prefix": prefix}
    _call(api_url, api_key, "POST", "/admin/buckets/revoke", json=body)
    stdout_console().print(f"Revoked {escape(bucket)} from {escape(user or team or '')}.")


@buckets_app.command("list")
def buckets_list(api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """Grants, and the buckets skyless created for users."""
    found = BucketList.model_validate(_call(api_url, api_key, "GET", "/admin/buckets"))
    grants = Table("BUCKET", "PREFIX", "GRANTED TO", "ACCESS", "BY", title="Grants")
    for grant in found.grants:
        grants.add_row(escape(grant.bucket), escape(grant.prefix) or "(all)", escape(grant.grantee),
                       "read-write" if grant.write else "read-only", grant.granted_by or "-")  # fmt: skip
    owned = Table("BUCKET", "STORE", "OWNER", "CREATED BY JOB", title="Created by skyless")
    for record in found.owned:
        owned.add_row(escape(record.bucket), record.store, record.owner, record.created_by_job or "-")
    out = stdout_console()
    out.print(grants)
    out.print(owned)


@admin_app.command("audit")
def audit(
    limit: Annotated[int, typer.Option("--limit", help="At most this many entries.")] = 100,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Every user, team and grant change, newest first."""
    found = AuditLog.model_validate(_call(api_url, api_key, "GET", f"/admin/audit?limit={limit}")).entries
    table = Table("WHEN", "ADMIN", "ACTION", "TARGET", "DETAIL")
    for entry in found:
        detail = ", ".join(f"{k}={v}" for k, v in sorted(entry.detail.items()))
        table.add_row(entry.at, entry.actor, entry.action, escape(entry.target), escape(detail) or "-")
    stdout_console().print(table)
