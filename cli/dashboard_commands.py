"""`skyless dashboard`: where the web dashboard is (the API's own /dashboard) and how to sign in."""

from __future__ import annotations

import os
import sys
import webbrowser
from typing import Annotated

import typer

from cli.client_config import ApiKey, ApiUrl, resolve_api
from cli.console import stderr_console, stdout_console
from shared.errors import UserError

console = stdout_console()
errors = stderr_console()


def register(app: typer.Typer) -> None:
    """Add this area's verbs to the `skyless` command."""
    app.command("dashboard")(dashboard)


def _can_open_a_browser() -> bool:
    """A graphical browser is there to open (a text browser would take over this terminal)."""
    return sys.platform in ("darwin", "win32") or bool(
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )


def dashboard(
    open_browser: Annotated[
        bool, typer.Option("--open/--no-open", help="Open it in a browser, where this machine has one.")
    ] = True,
    show_key: Annotated[
        bool, typer.Option("--show-key", help="Print the API key to sign in with (the CLI's own).")
    ] = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Print the dashboard's URL (the local runtime's, or your deployed API's) and open it."""
    try:
        target = resolve_api(api_url, api_key)
    except UserError as exc:
        errors.print(f"[red]error:[/red] {exc}", markup=True)
        raise typer.Exit(2) from None
    url = target.url.rstrip("/") + "/dashboard"
    console.print(f"Dashboard: {url}", soft_wrap=True)
    console.print(f"  (the API of the {target.source})", soft_wrap=True)
    if show_key and target.api_key:
        console.print(f"Sign in with this API key: {target.api_key}", soft_wrap=True, highlight=False)
    elif target.api_key:
        console.print(
            "Sign in with your API key: the one this CLI uses (`skyless dashboard --show-key` prints it)."
        )
    else:
        console.print(
            "Sign in with your API key (an operator makes one: python -m shared.store.users create NAME)."
        )
    if url.startswith("http://") and not url.startswith(("http://127.", "http://localhost")):
        errors.print(
            "[yellow]warning:[/yellow] not https: the key and the session would cross the network in clear"
        )
    if open_browser and _can_open_a_browser():
        webbrowser.open(url)
