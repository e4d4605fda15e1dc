"""`skyless cost-report`: what jobs cost, per attempt, spot against on-demand, and the savings."""

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
from shared.api.cost_models import CostReportResponse

console = stdout_console()
GROUPINGS = ("cloud", "user", "job", "day")


def register(app: typer.Typer) -> None:
    """Add this area's verbs to the `skyless` command."""
    app.command("cost-report")(cost_report)


def cost_report(
    days: Annotated[
        int, typer.Option("--days", min=1, max=366, help="The last N UTC days, today included.")
    ] = 7,
    by: Annotated[str, typer.Option("--by", help="Group by cloud, user, job or day.")] = "cloud",
    all_users: Annotated[
        bool, typer.Option("--all-users", help="Every user's jobs (needs an admin key).")
    ] = False,
    jobs: Annotated[bool, typer.Option("--jobs/--no-jobs", help="Also list each job's attempts.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="The API's answer, as JSON.")] = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """What your jobs cost: each attempt on spot or on-demand, what on-demand would have cost, the savings."""
    if by not in GROUPINGS:
        console.print(f"[red]error:[/red] --by: must be one of {', '.join(GROUPINGS)}, not {escape(by)}")
        raise typer.Exit(2)
    with _client(api_url, api_key) as client:
        report = client.cost_report(days=days, by=by, all_users=all_users)
        budget = None if as_json else client.budget()
    if as_json:
        console.out(json.dumps(report.model_dump(mode="json"), indent=2), highlight=False)
        return
    print_report(report, with_jobs=jobs)
    if budget is None:
        return
    for whose, answer in (("", budget), *((f" of team {t.team}", t) for t in budget.teams)):
        if answer.monthly is not None:
            console.print(
                f"Monthly budget{whose} {answer.month}: {dollars(answer.monthly)}, "
                f"spent {dollars(answer.spent)} ({answer.percent:.1f} %), at 100 %: {answer.action}",
                soft_wrap=True,
            )


def print_report(report: CostReportResponse, *, with_jobs: bool) -> None:
    whose = "every user's jobs" if report.all_users else "your jobs"
    title = f"Cost of {whose} in the last {report.days} UTC day(s), by {report.by}"
    table = Table(title=title, title_justify="left")
    for column in (
        "BY " + report.by.upper(),
        "JOBS",
        "ATTEMPTS",
        "HOURS",
        "SPOT",
        "ON-DEMAND",
        "COST",
        "IF ALL ON-DEMAND",
        "SAVED",
    ):
        table.add_column(column, justify="left" if column.startswith("BY ") else "right")
    for line in [*report.lines, report.total]:
        table.add_row(
            escape(line.label),
            str(line.jobs),
            str(line.attempts),
            f"{line.hours:.2f}",
            dollars(line.spot_cost),
            dollars(line.on_demand_market_cost),
            dollars(line.cost),
            dollars(line.on_demand_cost),
            f"{dollars(line.savings)} ({line.savings_percent:.0f}%)",
            end_section=line is report.lines[-1] if report.lines else False,
            style="bold" if line is report.total else None,
        )
    console.print(table)
    print_clusters(report)
    print_reservations(report)
    print_storage(report)
    if not with_jobs or not report.jobs:
        return
    attempts = Table(
        title="Each job's attempts (the newest 200 jobs submitted in these days)", title_justify="left"
    )
    for column in (
        "JOB",
        "NAME",
        "STATE",
        "ATTEMPT",
        "WHERE",
        "INSTANCE",
        "MARKET",
        "HOURS",
        "COST",
        "IF ON-DEMAND",
        "SAVED",
    ):
        attempts.add_column(
            column,
            justify="right" if column in ("ATTEMPT", "HOURS", "COST", "IF ON-DEMAND", "SAVED") else "left",
        )
    for job in report.jobs:
        for n, attempt in enumerate(job.attempts):
            where = "/".join(p for p in (attempt.cloud, attempt.region, attempt.zone) if p)
            on_demand = dollars(attempt.on_demand_cost) if attempt.on_demand_hourly is not None else "unknown"
            attempts.add_row(
                job.job_id if n == 0 else "",
                escape(job.name or "-") if n == 0 else "",
                job.state if n == 0 else "",
                str(attempt.attempt),
                where,
                attempt.instance_type,
                attempt.market,
                f"{attempt.hours:.3f}",
                dollars(attempt.cost),
                on_demand,
                dollars(attempt.savings),
            )
    console.print(attempts)


def print_reservations(report: CostReportResponse) -> None:
    """The deployment's reservations over the window: node-hours paid for, used, and idle (paid, unused)."""
    if not report.reservations:
        return
    whose = "every user's jobs" if report.all_users else "your jobs only (an admin key sees every user's)"
    table = Table(title=f"Reserved capacity in the window, used by {whose}", title_justify="left")
    for column in ("RESERVATION", "WHERE", "INSTANCE", "NODES", "PAID NODE-H", "USED", "IDLE", "IDLE COST"):
        table.add_column(
            column, justify="left" if column in ("RESERVATION", "WHERE", "INSTANCE") else "right"
        )
    for r in report.reservations:
        used = 100 * r.used_hours / r.paid_hours if r.paid_hours else 0.0
        table.add_row(
            escape(r.reservation), f"{r.cloud}/{r.place}", r.instance_type, str(r.count),
            f"{r.paid_hours:.1f}", f"{r.used_hours:.1f} ({used:.0f}%)", f"{r.idle_hours:.1f}",
            "-" if r.idle_cost is None else dollars(r.idle_cost),
        )  # fmt: skip
    console.print(table)


def print_storage(report: CostReportResponse) -> None:
    """Buckets skyless created for the user's tasks bill by the GB-month whatever runs: apart, too."""
    if not report.storage:
        return
    table = Table(title="Buckets skyless created, storage cost in the window", title_justify="left")
    for column in ("BUCKET", "STORE", "GB", "$/GB-MONTH", "DAYS", "COST"):
        table.add_column(column, justify="left" if column in ("BUCKET", "STORE") else "right")
    for b in report.storage:
        size = "unknown" if b.gigabytes is None else f"{b.gigabytes:.3g}" + ("" if b.complete else "+")
        table.add_row(
            escape(b.bucket), b.store, size, f"{b.per_gb_month:.3f}", f"{b.days:.1f}", dollars(b.cost)
        )
    console.print(table)
    console.print(f"Storage {dollars(report.storage_cost)} (not in the jobs' total; + means at least)")


def print_clusters(report: CostReportResponse) -> None:
    """Named clusters (`launch -c`) bill while up whatever their jobs do: their cost so far, apart."""
    if not report.clusters:
        return
    table = Table(title="Named clusters (not torn down), cost so far", title_justify="left")
    for column in (
        "CLUSTER",
        *(("USER",) if report.all_users else ()),
        "STATE",
        "WHERE",
        "INSTANCE",
        "MARKET",
        "COST",
    ):
        table.add_column(column, justify="right" if column == "COST" else "left")
    for c in report.clusters:
        where = "/".join(p for p in (c.cloud, c.region) if p) or "-"
        owner = (escape(c.owner),) if report.all_users else ()
        resources = f"{c.num_nodes}x {c.instance_type}" if c.instance_type else "-"
        table.add_row(
            escape(c.name),
            *owner,
            c.state,
            where,
            resources,
            "spot" if c.use_spot else "on-demand",
            dollars(c.cost),
        )
    console.print(table)
    total = report.total.cost + report.clusters_cost
    console.print(
        f"Jobs {dollars(report.total.cost)} + named clusters {dollars(report.clusters_cost)} "
        f"= {dollars(total)}"
    )
