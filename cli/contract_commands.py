"""`skyless admin contracts set FILE | show | clear`: the deployment's contracts (reservations, discounts),
which every launch is planned at, stored by the API (/admin/contracts). Setting and clearing take an admin
key; any user's `show` answers the deployment's part and their own teams' parts.

Exit codes: 0 success, 2 an error (the file, the API, a key that is not an admin's).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from cli.admin_commands import _call
from cli.client_config import ApiKey, ApiUrl
from cli.console import stderr_console, stdout_console
from shared.api.admin_models import ContractsView

MAX_FILE_BYTES = 64 * 1024  # the API's limit (shared/jobs/contract_admin.py), said before sending

contracts_app = typer.Typer(
    help="The deployment's contracts: reservations and negotiated prices every launch is planned at.",
    no_args_is_help=True,
)
AsJson = Annotated[bool, typer.Option("--json", help="The API's answer, as JSON.")]


def _fail(message: str) -> None:
    stderr_console().print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    raise typer.Exit(2)


def _print(view: ContractsView, as_json: bool, said: str) -> None:
    out = stdout_console()
    if as_json:
        out.out(json.dumps(view.model_dump(mode="json"), indent=2), highlight=False)
        return
    out.print(said, soft_wrap=True)


def _when(view: ContractsView) -> str:
    by = f" by {view.set_by}" if view.set_by else ""
    at = datetime.fromtimestamp(view.set_at, UTC).strftime(" at %Y-%m-%d %H:%M UTC") if view.set_at else ""
    return by + at


@contracts_app.command("set")
def set_contracts(
    file: Annotated[Path, typer.Argument(help="A contracts file (YAML: contracts:, teams:, aws:, gcp:).")],
    as_json: AsJson = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Plan every launch from now on at this file's contracts (an admin key; audited)."""
    try:
        size = file.stat().st_size
        if size > MAX_FILE_BYTES:
            _fail(f"{file}: is {size} bytes, over the {MAX_FILE_BYTES} a deployment's contracts may be")
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        _fail(f"{file}: cannot read it: {getattr(error, 'strerror', None) or 'not UTF-8 text'}")
    body = {"file": str(file), "text": text}
    view = ContractsView.model_validate(_call(api_url, api_key, "PUT", "/admin/contracts", json=body))
    _print(view, as_json, f"Contracts version {view.version} from {escape(view.file)} set{_when(view)}: "
                          "launches are planned at them (warm functions within a minute).")  # fmt: skip


@contracts_app.command("show")
def show_contracts(as_json: AsJson = False, api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """The deployment's contracts (a non-admin: the deployment's part and their teams' parts)."""
    view = ContractsView.model_validate(_call(api_url, api_key, "GET", "/admin/contracts"))
    if not view.text:
        _print(view, as_json, "No contracts are set: launches are planned at list price "
                              "(or at the operator's SKYLESS_CONTRACTS_FILE, where one is set).")  # fmt: skip
        return
    teams = f"; teams: {', '.join(view.teams)}" if view.teams else ""
    _print(view, as_json, f"# contracts version {view.version} from {escape(view.file)}{_when(view)}{teams}\n"
                          f"{escape(view.text)}")  # fmt: skip


@contracts_app.command("clear")
def clear_contracts(as_json: AsJson = False, api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """Stop planning at stored contracts (an admin key; audited)."""
    view = ContractsView.model_validate(_call(api_url, api_key, "DELETE", "/admin/contracts"))
    _print(view, as_json, f"Contracts cleared (version {view.version}): launches are planned at list price "
                          "(or at the operator's SKYLESS_CONTRACTS_FILE, where one is set).")  # fmt: skip
