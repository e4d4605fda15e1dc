"""`skyless budget set|show`: a monthly budget per user or per team (an admin key sets anyone's and a team's),
this month's spend."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from cli.client_config import ApiKey, ApiUrl
from cli.console import stdout_console
from cli.job_commands import _client
from shared.api.budget_models import BudgetResponse

console = stdout_console()
budget_app = typer.Typer(
    help="Monthly budgets: notices at 50/80/100 %, then stop (or warn).", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    """Add this area's verbs to the `skyless` command."""
    app.add_typer(budget_app, name="budget")


@budget_app.command("set")
def set_budget(
    monthly: Annotated[
        float, typer.Option("--monthly", min=0, help="USD per calendar month (UTC); 0 removes it.")
    ],
    action: Annotated[str, typer.Option("--action", help="At 100 %: stop running jobs, or warn.")] = "stop",
    user: Annotated[str | None, typer.Option("--user", help="Another user's id (an admin key).")] = None,
    team: Annotated[str | None, typer.Option("--team", help="A team's budget (an admin key).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="The API's answer, as JSON.")] = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Set a monthly budget (yours, a user's, or with --team a team's: its members' jobs together). New
    launches past it are refused with the arithmetic; running jobs stop at a checkpoint (as on a preemption
    notice) or, with --action warn, are only warned."""
    if action not in ("stop", "warn"):
        console.print(f"[red]error:[/red] --action: must be stop or warn, not {action[:40]!r}")
        raise typer.Exit(2)
    if user and team:
        console.print("[red]error:[/red] --user, --team: a budget is a user's or a team's, not both")
        raise typer.Exit(2)
    body: dict[str, object] = {"monthly": monthly, "action": action}
    if user:
        body["user_id"] = user
    if team:
        body["team"] = team
    with _client(api_url, api_key) as client:
        answer = client.set_budget(body)
    _print(answer, as_json)


@budget_app.command("show")
def show_budget(
    user: Annotated[str | None, typer.Option("--user", help="Another user's id (an admin key).")] = None,
    team: Annotated[str | None, typer.Option("--team", help="A team's you are a member of.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="The API's answer, as JSON.")] = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Your monthly budget (and your teams') and what this month has cost so far."""
    with _client(api_url, api_key) as client:
        answer = client.budget(user, team)
    _print(answer, as_json)


def _print(answer: BudgetResponse, as_json: bool) -> None:
    if as_json:
        console.out(json.dumps(answer.model_dump(mode="json"), indent=2), highlight=False)
        return
    for one in (answer, *answer.teams):
        whose = f"team {one.team}" if one.team else one.user_id
        spent = f"${one.spent:.4f} (ended attempts ${one.spent_ended:.4f} + running ${one.spent_running:.4f})"
        if one.monthly is None:
            console.print(f"{whose}, {one.month}: no monthly budget; spent {spent}", soft_wrap=True)
            continue
        console.print(
            f"{whose}, {one.month}: monthly budget ${one.monthly:.2f} "
            f"(at 100 %: {one.action}); spent {spent}, {one.percent:.1f} %",
            soft_wrap=True,
        )
