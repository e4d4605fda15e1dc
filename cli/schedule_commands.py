"""`skyless schedule create | list | show | pause | resume | delete`: cron schedules, through the HTTPS API.

Exit codes: 0 success, 2 an error (the request, the task file, the API).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer
from rich.markup import escape
from rich.table import Table

from cli import sky_config, task_options
from cli.api_client import SkylessClient
from cli.client_config import ApiKey, ApiUrl, resolve_api
from cli.console import stderr_console, stdout_console
from shared.api.schedule_models import ScheduleList, ScheduleView
from shared.errors import UserError

schedule_app = typer.Typer(help="Run a task file on a cron schedule.", no_args_is_help=True)

Name = Annotated[str, typer.Argument(help="The schedule's name.")]


def register(app: typer.Typer) -> None:
    """Add `skyless schedule ...` to the `skyless` command."""
    app.add_typer(schedule_app, name="schedule")


@contextmanager
def _client(api_url: str | None, api_key: str | None) -> Iterator[SkylessClient]:
    try:
        target = resolve_api(api_url, api_key)
        with SkylessClient(target.url, target.api_key) as client:
            yield client
    except UserError as exc:
        stderr_console().print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None


def _path(name: str, action: str = "") -> str:
    return f"/schedules/{quote(name, safe='')}{action}"


@schedule_app.command("create")
def create(
    name: Name,
    file: Annotated[Path, typer.Argument(help="The task file (SkyPilot YAML).")],
    cron: Annotated[str, typer.Option("--cron", help='Five-field cron, e.g. "0 3 * * *".')],
    timezone: Annotated[str, typer.Option("--timezone", help="IANA time zone of the cron.")] = "UTC",
    overlap: Annotated[
        str, typer.Option("--overlap", help="skip (while the last run is live) or allow.")
    ] = "skip",
    env: Annotated[list[str] | None, typer.Option("--env", help="K=V override of the task's envs.")] = None,
    secret: Annotated[
        list[str] | None,
        typer.Option(
            "--secret", help="K=V value of a task secret, given to every run (kept in Secrets Manager)."
        ),
    ] = None,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Create a schedule that runs FILE at each cron time."""
    with _client(api_url, api_key) as client:
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot read {file}: {exc.strerror}", file=str(file)) from None
        overrides = _pairs(env or [])
        configured = sky_config.apply_sky_config(text, str(file), None)  # ~/.sky/config.yaml, as launch
        for note in configured.notes:
            stdout_console().print(f"[yellow]note:[/yellow] {escape(note)}", soft_wrap=True)
        body: dict[str, Any] = {
            "name": name, "cron": cron, "timezone": timezone, "overlap": overlap,
            "task": configured.text, "filename": str(file), "env": overrides,
            "secrets": task_options.pairs(secret, "--secret"),
        }  # fmt: skip
        if configured.clouds:
            body["clouds"] = configured.clouds
        view = ScheduleView.model_validate(client._call("POST", "/schedules", json=body))
        stdout_console().print(
            f"Schedule [bold]{escape(view.name)}[/bold] created; next run {view.next_run}."
        )


@schedule_app.command("list")
def list_(api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """The schedules you own."""
    with _client(api_url, api_key) as client:
        found = ScheduleList.model_validate(client._call("GET", "/schedules")).schedules
    table = Table("NAME", "CRON", "TZ", "OVERLAP", "STATE", "NEXT RUN", "RUNS", "LAST JOB")
    for view in found:
        table.add_row(
            escape(view.name), escape(view.cron), view.timezone, view.overlap,
            "paused" if view.paused else "active", view.next_run or "-", str(view.runs),
            view.last_job_id or "-",
        )  # fmt: skip
    stdout_console().print(table)


@schedule_app.command("show")
def show(name: Name, api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """One schedule in full."""
    with _client(api_url, api_key) as client:
        view = ScheduleView.model_validate(client._call("GET", _path(name)))
    out = stdout_console()
    for field, value in view.model_dump().items():
        out.print(f"{field:>14}: {escape(str(value))}")


@schedule_app.command("pause")
def pause(name: Name, api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """Stop firing until resumed."""
    with _client(api_url, api_key) as client:
        client._call("POST", _path(name, "/pause"))
    stdout_console().print(f"Schedule {escape(name)} paused.")


@schedule_app.command("resume")
def resume(name: Name, api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """Fire again from now on (times missed while paused are not made up)."""
    with _client(api_url, api_key) as client:
        view = ScheduleView.model_validate(client._call("POST", _path(name, "/resume")))
    stdout_console().print(f"Schedule {escape(name)} resumed; next run {view.next_run}.")


@schedule_app.command("delete")
def delete(name: Name, api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """Delete the schedule (jobs it started keep running)."""
    with _client(api_url, api_key) as client:
        client._call("DELETE", _path(name))
    stdout_console().print(f"Schedule {escape(name)} deleted.")


def _pairs(items: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"expected K=V, found {item!r}", field="--env")
        found[key] = value
    return found
