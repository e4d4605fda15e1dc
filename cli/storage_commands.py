"""`skyless storage ls | delete`: SkyPilot's `sky storage ls | delete` over the buckets skyless knows for
you (those your task files' `file_mounts` named). Only a bucket skyless created is ever deleted; one that
existed before is refused, saying so."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from cli import sky_flags
from cli.client_config import ApiKey, ApiUrl
from cli.client_session import client_session
from cli.clock_format import age
from cli.console import stderr_console, stdout_console
from shared.errors import UserError

console = stdout_console()
errors = stderr_console()

storage_app = typer.Typer(name="storage", help="Buckets skyless made for your tasks, as `sky storage`.",
                          no_args_is_help=True)  # fmt: skip


def register(app: typer.Typer) -> None:
    app.add_typer(storage_app, name="storage")


@storage_app.command("ls")
def storage_ls(
    verbose: sky_flags.Verbose = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the buckets as JSON.")] = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Your buckets: name, store, who made it, and whether it outlives its job."""
    del verbose  # every column is shown
    with client_session(api_url, api_key) as client:
        buckets = client.list_storage()
    if as_json:
        typer.echo(json.dumps([b.model_dump(mode="json") for b in buckets], indent=2))
        return
    table = Table(title=f"{len(buckets)} bucket(s)")
    for column in ("NAME", "URL", "STORE", "MADE BY", "PERSISTENT", "AGE"):
        table.add_column(column)
    for b in buckets:
        made = b.created_by or "(existed before)"
        since = datetime.fromtimestamp(b.created_at, UTC).isoformat() if b.created_at else None
        table.add_row(
            escape(b.name), escape(b.url), b.store, made, "yes" if b.persistent else "no", age(since)
        )
    console.print(table)


@storage_app.command("delete")
def storage_delete(
    names: Annotated[list[str] | None, typer.Argument(metavar="[NAME]...", help="Bucket names.")] = None,
    every: Annotated[bool, typer.Option("--all", "-a", help="Every bucket skyless made for you.")] = False,
    yes: sky_flags.Yes = False,
    async_call: sky_flags.Async = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Delete buckets skyless made (objects and all). Buckets that existed before are never deleted."""
    del yes, async_call  # skyless never asks; a delete is done when this returns
    if bool(names) == every:
        errors.print("[red]error:[/red] give bucket names or --all (one of them)")
        raise typer.Exit(2)
    failed = False
    with client_session(api_url, api_key) as client:
        targets = names or [b.name for b in client.list_storage() if b.created_by]
        if not targets:
            console.print("No bucket skyless made for you.")
        for name in targets:
            try:
                deleted = client.delete_storage(name)
            except UserError as exc:  # one refusal (not made by skyless, in use) does not stop the others
                errors.print(f"[red]error:[/red] {escape(name)}: {escape(str(exc))}")
                failed = True
                continue
            console.print(f"Deleted {escape(deleted.url)}.")
    if failed:
        raise typer.Exit(2)
