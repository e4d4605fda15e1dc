"""`skyless notify set|show|test`: where and on what skyless tells you about your jobs (Slack, email)."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.markup import escape

from cli.client_config import ApiKey, ApiUrl
from cli.console import stderr_console, stdout_console
from cli.job_commands import _client
from shared.notifications.events import TOPICS

console = stdout_console()
errors = stderr_console()

notify_app = typer.Typer(help="Slack and email notifications about your jobs.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(notify_app, name="notify")


def _topics(text: str) -> list[str]:
    topics = [t.strip().replace("-", "_") for t in text.split(",") if t.strip()]
    unknown = [t for t in topics if t not in TOPICS]
    if unknown:
        errors.print(
            f"[red]error:[/red] --on: unknown event {escape(unknown[0])!r}; choose from {', '.join(TOPICS)}"
        )
        raise typer.Exit(2)
    return topics


def _print_settings(answer: dict[str, Any]) -> None:
    if not answer.get("configured"):
        console.print(escape(answer.get("message") or "no notifications: nothing is configured"))
        console.print("Set one with: skyless notify set --slack-webhook URL --email ADDRESS")
        return
    console.print(f"Slack: {escape(answer.get('slack_webhook') or '-')}")
    console.print(f"Email: {escape(answer.get('email') or '-')}")
    console.print(f"On:    {escape(', '.join(answer.get('on') or []))}")


@notify_app.command("set")
def set_notifications(
    slack_webhook: Annotated[
        str | None,
        typer.Option("--slack-webhook", help="A Slack webhook URL ('-': read it from stdin)."),
    ] = None,
    email: Annotated[str | None, typer.Option("--email", help="An email address (SES sends to it).")] = None,
    on: Annotated[
        str | None, typer.Option("--on", help=f"Events to hear about, comma-separated: {','.join(TOPICS)}.")
    ] = None,
    clear_slack: Annotated[bool, typer.Option("--clear-slack", help="Stop notifying on Slack.")] = False,
    clear_email: Annotated[bool, typer.Option("--clear-email", help="Stop notifying by email.")] = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Set your notification channels and events (what you leave out stays as it is)."""
    body: dict[str, Any] = {}
    if slack_webhook == "-":
        slack_webhook = sys.stdin.readline().strip()
    if slack_webhook is not None or clear_slack:
        body["slack_webhook"] = None if clear_slack else slack_webhook
    if email is not None or clear_email:
        body["email"] = None if clear_email else email
    if on is not None:
        body["on"] = _topics(on)
    if not body:
        errors.print(
            "[red]error:[/red] nothing to set: give --slack-webhook, --email, --on or a --clear-* option"
        )
        raise typer.Exit(2)
    with _client(api_url, api_key) as client:
        _print_settings(client._call("PUT", "/notifications", json=body))


@notify_app.command("show")
def show_notifications(api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """Your notification settings (the webhook masked)."""
    with _client(api_url, api_key) as client:
        _print_settings(client._call("GET", "/notifications"))


@notify_app.command("test")
def test_notifications(api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """Send a test notification to your channels now."""
    with _client(api_url, api_key) as client:
        answer = client._call("POST", "/notifications/test")
    deliveries = answer.get("deliveries") or []
    if not deliveries:
        console.print(escape(answer.get("message") or "no notifications: nothing is configured"))
        raise typer.Exit(1)
    failed = False
    for delivery in deliveries:
        ok = delivery.get("status") == "sent"
        failed = failed or not ok
        mark = "[green]sent[/green]" if ok else "[red]failed[/red]"
        detail = f" ({escape(delivery.get('error') or '')})" if delivery.get("error") else ""
        tries = delivery.get("attempts")
        console.print(
            f"{delivery['channel']}: {mark} to {escape(delivery.get('target') or '')}, {tries} tries{detail}"
        )
    if failed:
        raise typer.Exit(1)
