"""`skyless schedule ...` through typer's CliRunner against the API on a real local HTTP port over moto."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
import typer
from typer.testing import CliRunner, Result

from cli.schedule_commands import register
from functions.submit.app import app as api_app
from local_runtime.api_server import ApiServer
from shared.config import Settings
from shared.store.users import create_user

TASK = "name: cli-nightly\nresources:\n  cpus: 1+\nrun: echo hi\n"
root = typer.Typer()


@root.callback()
def _root() -> None:
    """Stands in for cli/main.py, which registers the same verbs."""


register(root)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def api(stack: Settings) -> Iterator[list[str]]:
    server = ApiServer(api_app, "127.0.0.1", _free_port())
    server.start()
    try:
        yield ["--api-url", server.url, "--api-key", create_user("cli-user", stack)]
    finally:
        server.stop()


def _run(*args: str) -> Result:
    return CliRunner().invoke(root, list(args), env={"COLUMNS": "200"})


def test_schedule_verbs_create_list_show_pause_resume_delete(
    stack: Settings, tmp_path: Path, api: list[str]
) -> None:
    task = tmp_path / "nightly.yaml"
    task.write_text(TASK)
    created = _run("schedule", "create", "nightly", str(task), "--cron", "0 3 * * *", "--timezone",
                   "Europe/Paris", "--overlap", "allow", "--env", "A=1", *api)  # fmt: skip
    assert created.exit_code == 0, created.output
    assert "nightly" in created.output and "next run" in created.output
    listed = _run("schedule", "list", *api)
    assert listed.exit_code == 0 and "0 3 * * *" in listed.output and "Europe/Paris" in listed.output
    shown = _run("schedule", "show", "nightly", *api)
    assert "allow" in shown.output and "'A': '1'" in shown.output
    assert _run("schedule", "pause", "nightly", *api).exit_code == 0
    assert "paused" in _run("schedule", "list", *api).output
    assert _run("schedule", "resume", "nightly", *api).exit_code == 0
    schedules = boto3.client("scheduler", endpoint_url=stack.endpoint_url).list_schedules()["Schedules"]
    assert any(s["Name"].startswith(stack.prefix) and s["State"] == "ENABLED" for s in schedules)
    assert _run("schedule", "delete", "nightly", *api).exit_code == 0
    gone = _run("schedule", "show", "nightly", *api)
    assert gone.exit_code == 2 and "no schedule named" in gone.output


def test_a_bad_cron_is_a_clear_error_not_a_traceback(stack: Settings, tmp_path: Path, api: list[str]) -> None:
    task = tmp_path / "t.yaml"
    task.write_text(TASK)
    result = _run("schedule", "create", "n", str(task), "--cron", "every day", *api)
    assert result.exit_code == 2 and "cron" in result.output and "Traceback" not in result.output
