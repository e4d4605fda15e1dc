"""`skyless team list | jobs | clusters`: what a team's members see of each other's work, read-only (the
/teams routes). Changing a job or a cluster stays its owner's. `skyless team notify`: the team's Slack
channel for its budget notices.

Exit codes: 0 success, 2 an error (the request, the API, a team you are not a member of).
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

import typer
from rich.markup import escape
from rich.table import Table

from cli.admin_commands import _call
from cli.client_config import ApiKey, ApiUrl
from cli.console import stdout_console
from shared.api.admin_models import MyTeams, TeamClusterList, TeamJobList
from shared.api.notification_models import TeamNotifyResponse

team_app = typer.Typer(help="Your teams: every member's jobs and clusters, read-only.", no_args_is_help=True)
Team = Annotated[str, typer.Argument(help="The team's name (`skyless team list`).")]


def register(app: typer.Typer) -> None:
    """Add `skyless team ...` to the `skyless` command."""
    app.add_typer(team_app, name="team")


@team_app.command("list")
def list_(api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """The teams you are a member of."""
    found = MyTeams.model_validate(_call(api_url, api_key, "GET", "/teams")).teams
    table = Table("TEAM", "MEMBERS")
    for team in found:
        table.add_row(escape(team.team), escape(", ".join(team.members)))
    stdout_console().print(table)


@team_app.command("jobs")
def jobs(
    team: Team,
    state: Annotated[str | None, typer.Option("--state", help="Only these states (running,failed).")] = None,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Every member's jobs, newest first."""
    path = f"/teams/{quote(team, safe='')}/jobs" + (f"?state={quote(state)}" if state else "")
    found = TeamJobList.model_validate(_call(api_url, api_key, "GET", path)).jobs
    table = Table("JOB", "OWNER", "NAME", "STATE", "WHERE", "SUBMITTED")
    for job in found:
        where = "/".join(p for p in (job.cloud, job.region) if p) or "-"
        table.add_row(job.job_id, job.owner, escape(job.name or "-"), job.state, where, job.created_at or "-")
    stdout_console().print(table)


@team_app.command("clusters")
def clusters(team: Team, api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """Every member's clusters."""
    found = TeamClusterList.model_validate(
        _call(api_url, api_key, "GET", f"/teams/{quote(team, safe='')}/clusters")
    )
    table = Table("CLUSTER", "OWNER", "STATE", "WHERE")
    for cluster in found.clusters:
        where = "/".join(p for p in (cluster.cloud, cluster.region) if p) or "-"
        table.add_row(escape(cluster.name), cluster.owner, cluster.state, where)
    stdout_console().print(table)


@team_app.command("notify")
def notify(
    team: Team,
    slack: Annotated[
        str | None, typer.Option("--slack", help="The team's Slack incoming webhook URL (kept as a secret).")
    ] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Remove the team's Slack channel.")] = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """The team's Slack channel for its budget notices (each member is told on their own channels too).
    Without a flag: show it (masked). `--slack` / `--clear`: an admin key or the team's admin."""
    if slack is not None and clear:
        raise typer.BadParameter("give --slack URL or --clear, not both", param_hint="--clear")
    path = f"/teams/{quote(team, safe='')}/notify"
    if slack is None and not clear:
        answer = _call(api_url, api_key, "GET", path)
    else:
        answer = _call(api_url, api_key, "PUT", path, json={"slack_webhook": None if clear else slack})
    stdout_console().print(escape(TeamNotifyResponse.model_validate(answer).message))
