"""`skyless check`: which clouds have working credentials, and exactly what to do about the others."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from cli.console import stderr_console, stdout_console
from shared.clouds.credentials_check import CLOUDS, OK, CloudCheck, check_clouds

STYLE = {OK: "green", "found": "green", "missing": "yellow", "refused": "red"}
errors = stderr_console()


def register(app: typer.Typer) -> None:
    """Add this area's verbs to the `skyless` command."""
    app.command("check")(check)


def check(
    clouds: Annotated[
        list[str] | None, typer.Argument(help="Clouds to check (default: all).", show_default=False)
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Check the credentials of each cloud; for the ones that do not work, say what to set or run."""
    wanted = tuple(c.lower() for c in clouds) if clouds else CLOUDS
    unknown = [c for c in wanted if c not in CLOUDS]
    if unknown:
        errors.print(f"[red]error:[/red] unknown cloud {unknown[0]!r}; expected one of: {', '.join(CLOUDS)}")
        raise typer.Exit(2)
    results = check_clouds(wanted)
    if as_json:
        typer.echo(json.dumps([r.as_dict() for r in results], indent=2))
        return
    _print_table(results)


def _print_table(results: list[CloudCheck]) -> None:
    console = stdout_console()
    table = Table(box=box.SIMPLE_HEAD, title="Cloud credentials")
    table.add_column("CLOUD")
    table.add_column("STATUS")
    table.add_column("DETAIL", overflow="fold")
    for result in results:
        status = f"[{STYLE[result.status]}]{result.status}[/]"
        table.add_row(result.cloud, status, result.detail)
    console.print(table)
    todo = [r for r in results if r.fix]
    for result in todo:
        console.print(f"[bold]{result.cloud}[/bold]: {result.fix}", soft_wrap=True)
    usable = [r.cloud for r in results if r.usable]
    console.print(f"Enabled: {', '.join(usable) if usable else 'none'}")
