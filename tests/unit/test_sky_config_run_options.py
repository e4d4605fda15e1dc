"""`docker.run_options` of SkyPilot's `~/.sky/config.yaml` and of a task's `config:` section, as
`skyless plan` says them in a fresh HOME: applied to a task's container (the task's own value replacing the
file's, as in SkyPilot), said not applied where the task runs in no container, and refused naming the file
and the field where an option would undo the agent's own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from cli.main import app
from shared.clouds import containers

BOXED = "name: shm\nresources:\n  cpus: 2+\n  image_id: docker:ubuntu:22.04\nrun: df -h /dev/shm\n"
OWN = "config:\n  docker:\n    run_options: --cap-add=SYS_PTRACE\n"


@pytest.fixture(autouse=True)
def podman_here(sky_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(containers, "local_runtime", lambda: "podman")
    return sky_home


def with_config(home: Path, run_options: object) -> Path:
    path = home / ".sky" / "config.yaml"
    path.write_text(yaml.safe_dump({"docker": {"run_options": run_options}}))
    return path


def plan(tmp_path: Path, text: str) -> tuple[int, dict]:
    task = tmp_path / "shm.yaml"
    task.write_text(text)
    result = CliRunner().invoke(app, ["plan", str(task), "--json"], env={"COLUMNS": "200"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, json.loads(result.stdout)


def test_the_files_run_options_start_the_tasks_container_and_nothing_says_they_are_ignored(
    podman_here: Path, tmp_path: Path
):
    path = with_config(podman_here, ["--shm-size=1g", "-e FOO=bar"])
    code, body = plan(tmp_path, BOXED)
    assert code == 0, body
    notes = body["notes"]
    assert (
        f"{path}: docker.run_options: applied to shm: its container starts with --shm-size=1g -e FOO=bar"
        in notes
    )
    assert any(
        "setup and run run inside the container ubuntu:22.04 (docker or podman on each node, started with "
        "config.docker.run_options --shm-size=1g -e FOO=bar)" in note
        for note in notes
    ), notes
    assert not any("run_options: read, not applied" in note for note in notes), notes


def test_a_tasks_own_run_options_replace_the_files_as_in_skypilot(podman_here: Path, tmp_path: Path):
    path = with_config(podman_here, "--shm-size=1g")
    code, body = plan(tmp_path, BOXED + OWN)
    assert code == 0, body
    assert (
        f"{path}: docker.run_options: read, not applied to shm: its own config.docker.run_options replaces "
        "them, as in SkyPilot"
    ) in body["notes"]
    assert any("started with config.docker.run_options --cap-add=SYS_PTRACE)" in n for n in body["notes"])
    assert not any("--shm-size" in note for note in body["notes"] if "started with" in note)


def test_a_task_with_no_container_is_told_they_are_not_applied(podman_here: Path, tmp_path: Path):
    path = with_config(podman_here, ["--shm-size=1g"])
    code, body = plan(tmp_path, BOXED.replace("  image_id: docker:ubuntu:22.04\n", ""))
    assert code == 0, body
    assert (
        f"{path}: docker.run_options: read, not applied to shm: it runs on its machine's own OS (it names no "
        "image_id: docker:...)"
    ) in body["notes"]


def test_an_option_the_agent_sets_in_the_file_is_refused_naming_the_file_and_the_key(
    podman_here: Path, tmp_path: Path
):
    path = with_config(podman_here, ["--shm-size=1g", "--network=bridge"])
    code, body = plan(tmp_path, BOXED)
    assert code == 2
    assert (body["file"], body["field"]) == (str(path), "docker.run_options")
    assert body["message"].startswith("--network cannot be given: the container shares its node's network")


def test_an_option_the_agent_sets_in_the_task_is_refused_naming_the_field_and_line(tmp_path: Path):
    code, body = plan(tmp_path, BOXED + OWN.replace("--cap-add=SYS_PTRACE", "'--entrypoint /bin/sh'"))
    assert code == 2
    assert (body["file"], body["line"], body["field"]) == (
        str(tmp_path / "shm.yaml"), 8, "config.docker.run_options",
    )  # fmt: skip
    assert body["message"].startswith("--entrypoint cannot be given: the agent keeps the container up")
