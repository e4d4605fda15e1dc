"""`skyless report providers`: what each cloud, region and instance family delivered to your jobs."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from cli.client_config import ApiKey, ApiUrl
from cli.console import stdout_console
from cli.job_commands import _client
from cli.money_format import dollars
from shared.api.report_models import ProviderScorecardResponse

console = stdout_console()
report_app = typer.Typer(help="Reports over what skyless recorded.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add this area's verbs to the `skyless` command."""
    app.add_typer(report_app, name="report")


@report_app.command("providers")
def providers(
    days: Annotated[
        int, typer.Option("--days", min=1, max=366, help="Jobs submitted in the last N days.")
    ] = 30,
    all_users: Annotated[
        bool, typer.Option("--all-users", help="Every user's jobs (needs an admin key).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="The API's answer, as JSON.")] = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Per cloud, region and instance family: launches asked and refused, time to RUNNING, preemptions per
    spot-hour (and how many came with a notice), node failures, and what was paid against list price."""
    with _client(api_url, api_key) as client:
        card = client.provider_scorecard(days=days, all_users=all_users)
    if as_json:
        console.out(json.dumps(card.model_dump(mode="json"), indent=2), highlight=False)
        return
    print_scorecard(card)


def _or_dash(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def print_scorecard(card: ProviderScorecardResponse) -> None:
    whose = "every user's jobs" if card.all_users else "your jobs"
    title = f"What each provider delivered to {whose} of the last {card.days} day(s) ({card.jobs_read} jobs)"
    if not card.lines:
        console.print(f"{title}: no launch in this window.")
        return
    table = Table(title=title, title_justify="left")
    columns = (
        "CLOUD",
        "REGION",
        "FAMILY",
        "LAUNCHES ASKED",
        "NO CAPACITY",
        "OTHER REFUSED",
        "TO RUNNING (MEDIAN/MAX S)",
        "SPOT HOURS",
        "PREEMPTIONS (WARNED)",
        "PER SPOT-HOUR",
        "NODE FAILURES",
        "PAID",
        "LIST",
        "% OF LIST",
    )
    for column in columns:
        table.add_column(column, justify="left" if column in ("CLOUD", "REGION", "FAMILY") else "right")
    for line in card.lines:
        table.add_row(
            escape(line.cloud),
            escape(line.region),
            escape(line.family),
            str(line.launch_requests),
            str(line.capacity_refusals),
            str(line.other_refusals),
            _or_dash(line.median_seconds_to_running, ".0f")
            + "/"
            + _or_dash(line.max_seconds_to_running, ".0f"),
            f"{line.spot_hours:.2f}",
            f"{line.preemptions} ({line.warned_preemptions})",
            _or_dash(line.preemptions_per_spot_hour, ".3f"),
            str(line.node_failures),
            dollars(line.cost),
            dollars(line.list_cost),
            _or_dash(line.percent_of_list, ".1f"),
        )
    console.print(table)
