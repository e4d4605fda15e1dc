"""One API session per command: the configured client, with a user's mistake (or the API's refusal)
printed as one `error:` line and exit code 2, and Ctrl-C as `interrupted` and 130, never a traceback."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from cli import is_interrupt
from cli.client_config import resolve_api
from cli.console import stderr_console
from shared.errors import UserError

if TYPE_CHECKING:  # the API client and its models load when a verb calls the API, not with the command
    from cli.api_client import SkylessClient

errors = stderr_console()


@contextmanager
def client_session(api_url: str | None, api_key: str | None) -> Iterator[SkylessClient]:
    """A client of the configured API; any UserError in the block is printed and exits 2."""
    from cli.api_client import SkylessClient  # the HTTP client: only once a verb calls the API

    try:
        target = resolve_api(api_url, api_key)
        with SkylessClient(target.url, target.api_key) as client:
            yield client
    except UserError as exc:
        errors.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    except (KeyboardInterrupt, RuntimeError) as exc:
        if not is_interrupt(exc):
            raise
        errors.print("interrupted")
        raise typer.Exit(130) from None
