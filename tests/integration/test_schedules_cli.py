"""`skyless schedule ...` through typer's CliRunner against the API on a real local HTTP port over moto."""

from __future__ import annotations

from pathlib import Path

import boto3
import typer
from typer.testing import CliRunner, Result

from cli.schedule_commands import register
from shared.config import Settings

TASK = "name: cli-nightly\nresources:\n  cpus: 1+\nrun: echo hi\n"
root = typer.Typer()


@root.callback()
def _root() -> None:
    """Stands in for cli/main.py, which registers the same verbs."""


register(root)


def _run(*args: str) -> Result:
    return CliRunner().invoke(root, list(args), env={"COLUMNS": "200"})


def test_schedule_verbs_create_list_show_pause_resume_delete(
    stack: Settings, tmp_path: Path, cli_api: list[str]
) -> None:
    task = tmp_path / "nightly.yaml"
    task.write_text(TASK)
    created = _run("schedule", "create", "nightly", str(task), "--cron", "0 3 * * *", "--timezone",
                   "Europe/Paris", "--overlap", "allow", "--env", "A=1", *cli_api)  # fmt: skip
    assert created.exit_code == 0, created.output
    assert "nightly" in created.output and "next run" in created.output
    listed = _run("schedule", "list", *cli_api)
    assert listed.exit_code == 0 and "0 3 * * *" in listed.output and "Europe/Paris" in listed.output
    shown = _run("schedule", "show", "nightly", *cli_api)
    assert "allow" in shown.output and "'A': '1'" in shown.output
    assert _run("schedule", "pause", "nightly", *cli_api).exit_code == 0
    assert "paused" in _run("schedule", "list", *cli_api).output
    assert _run("schedule", "resume", "nightly", *cli_api).exit_code == 0
    schedules = boto3.client("scheduler", endpoint_url=stack.endpoint_url).list_schedules()["Schedules"]
    assert any(s["Name"].startswith(stack.prefix) and s["State"] == "ENABLED" for s in schedules)
    assert _run("schedule", "delete", "nightly", *cli_api).exit_code == 0
    gone = _run("schedule", "show", "nightly", *cli_api)
    assert gone.exit_code == 2 and "no schedule named" in gone.output


def test_a_bad_cron_is_a_clear_error_not_a_traceback(
    stack: Settings, tmp_path: Path, cli_api: list[str]
) -> None:
    task = tmp_path / "t.yaml"
    task.write_text(TASK)
    result = _run("schedule", "create", "n", str(task), "--cron", "every day", *cli_api)
    assert result.exit_code == 2 and "cron" in result.output and "Traceback" not in result.output
