"""The `skyless` command: each area of the product registers its own verbs here."""

from __future__ import annotations

import typer

from cli import (
    admin_commands,
    budget_commands,
    catalog_commands,
    check_commands,
    cluster_commands,
    cost_commands,
    dashboard_commands,
    exec_command,
    job_commands,
    launch_command,
    local_commands,
    managed_jobs_commands,
    notify_commands,
    plan_commands,
    report_commands,
    schedule_commands,
    ssh_commands,
    storage_commands,
    team_commands,
)

app = typer.Typer(
    name="skyless",
    help="Run SkyPilot task files on the cheapest cloud capacity, with a serverless control plane.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for area in (
    plan_commands,
    catalog_commands,
    launch_command,
    job_commands,
    exec_command,
    cluster_commands,
    managed_jobs_commands,
    ssh_commands,
    cost_commands,
    report_commands,
    budget_commands,
    dashboard_commands,
    schedule_commands,
    notify_commands,
    local_commands,
    check_commands,
    admin_commands,
    team_commands,
    storage_commands,
):
    area.register(app)
