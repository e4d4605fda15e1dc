"""`skyless plan` on a task that runs in a container: it says where setup and run run, and, where this
machine has no working docker or podman, that the local runtime would refuse it at launch."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from shared.clouds import containers

FILES = Path(__file__).resolve().parents[1] / "fixtures" / "containers"


def plan(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["plan", *args], env={"COLUMNS": "250"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, " ".join(result.stdout.split())


def test_plan_says_the_container_and_the_login_and_plans_without_the_password(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(containers, "local_runtime", lambda: "podman")
    code, out = plan(str(FILES / "private_image.yaml"))
    assert code == 0, out
    assert (
        "resources.image_id: setup and run run inside the container "
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainer:v3 (docker or podman on each node, "
        "logged in to 123456789012.dkr.ecr.us-east-1.amazonaws.com as AWS)"
    ) in out
    assert "refuses this task" not in out


def test_plan_says_the_local_runtime_refuses_it_where_no_runtime_works(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(containers, "local_runtime", lambda: None)
    code, out = plan(str(FILES / "public_image.yaml"), "--json")
    assert code == 0, out
    assert (
        "neither docker nor podman works on this machine: the local runtime refuses this task at launch"
        in out
    )
