"""`skyless notify set|show|test` through typer's CliRunner against the API on a real local HTTP port."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from fakes.slack_webhook import SlackWebhook
from typer.testing import CliRunner, Result

from cli import notify_commands
from shared.config import Settings
from shared.notifications.events import TOPICS
from shared.notifications.settings import channels_for

cli = typer.Typer()
notify_commands.register(cli)
cli.command("version")(lambda: None)  # a second command keeps `notify` a sub-command group


@pytest.fixture
def webhook() -> Iterator[SlackWebhook]:
    server = SlackWebhook().start()
    yield server
    server.stop()


def run(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env={"COLUMNS": "200"}, input=stdin)


def test_show_says_plainly_when_nothing_is_configured(cli_api: list[str]) -> None:
    result = run("notify", "show", *cli_api)
    assert result.exit_code == 0, result.output
    assert "no notifications: nothing is configured" in result.output
    assert run("notify", "test", *cli_api).exit_code == 1


def test_set_show_test_with_the_webhook_masked(cli_api: list[str], webhook: SlackWebhook) -> None:
    flags = ["--slack-webhook", "-", "--email", "c@example.com", "--on", "failed,no-capacity"]
    result = run("notify", "set", *flags, *cli_api, stdin=webhook.url + "\n")
    assert result.exit_code == 0, result.output
    shown = run("notify", "show", *cli_api).output
    assert "c@example.com" in shown and "failed, no_capacity" in shown
    assert "XXXXsecretXXXX" not in shown and "…XXXX" in shown
    tested = run("notify", "test", *cli_api)
    assert tested.exit_code == 0, tested.output
    assert "slack: sent" in tested.output and "email: sent" in tested.output
    assert len(webhook.posts) == 1
    post = json.dumps(webhook.posts[0])
    assert webhook.posts[0]["text"] == "skyless: test notification"  # not "test test notification"
    assert "None" not in post and "local/local" not in post and "job-000000000000" not in post
    assert "skyless can reach you" in post


def test_set_refuses_unknown_events_and_bad_addresses(cli_api: list[str]) -> None:
    bad_topic = run("notify", "set", "--on", "exploded", *cli_api)
    assert bad_topic.exit_code == 2 and "unknown event 'exploded'" in bad_topic.output
    bad_email = run("notify", "set", "--email", "nobody", *cli_api)
    assert bad_email.exit_code == 2 and "email" in bad_email.output
    assert run("notify", "set", *cli_api).exit_code == 2


def test_market_is_a_default_event_and_every_event_can_be_chosen_at_once(cli_api: list[str]) -> None:
    assert run("notify", "set", "--email", "m@example.com", *cli_api).exit_code == 0
    assert "market" in _on(run("notify", "show", *cli_api).output)  # no --on given: the defaults
    result = run("notify", "set", "--on", ",".join(TOPICS), *cli_api)  # the API once took at most 5 of the 6
    assert result.exit_code == 0, result.output
    assert _on(result.output) == ", ".join(TOPICS) and "market" in TOPICS
    assert _on(run("notify", "set", "--on", "market", *cli_api).output) == "market"


def _on(output: str) -> str:
    return next(line for line in output.splitlines() if line.startswith("On:")).removeprefix("On:").strip()


def test_launch_notify_flags_become_the_jobs_override(
    cli_api: list[str], stack: Settings, webhook: SlackWebhook, tmp_path: Path
) -> None:
    from cli.main import app as skyless

    task = tmp_path / "task.yaml"
    task.write_text("name: n\nresources:\n  cpus: 1+\nrun: echo hi\n")
    flags = ["--notify-slack", webhook.url, "--notify-email", "l@example.com", "--detach"]
    result = CliRunner().invoke(skyless, ["launch", str(task), *flags, *cli_api], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    job_id = result.output.split("Job ", 1)[1].split()[0]
    channels = channels_for(stack, "-", job_id)
    assert channels.slack_webhook == webhook.url and channels.email == "l@example.com"
    assert "XXXXsecretXXXX" not in result.output
