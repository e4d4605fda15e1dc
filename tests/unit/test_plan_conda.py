"""`plan` and `launch` say once, naming the line, that a task calls conda where the local runtime's nodes
have none (SkyPilot's nodes always have conda); a machine with conda on its PATH hears nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.job_commands import prepare_launch
from cli.main import app
from shared.task import ResourceOverrides, conda_lines

MINIMAL = Path(__file__).resolve().parents[1] / "fixtures" / "skypilot" / "accepted" / "minimal.yaml"


def _plan(path: Path) -> str:
    result = CliRunner().invoke(app, ["plan", str(path)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    return " ".join(result.stdout.split())


def test_plan_names_the_line_that_calls_conda_when_this_machine_has_none(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no conda here
    out = _plan(MINIMAL)
    assert f"{MINIMAL}:7: calls conda, and this machine has none" in out
    assert out.count("calls conda") == 1


def test_plan_says_nothing_of_conda_where_this_machine_has_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    conda = tmp_path / "conda"
    conda.write_text("#!/bin/sh\n")
    conda.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert "conda" not in _plan(MINIMAL).replace("conda env list", "")


def test_launch_says_it_once_for_a_pipeline_naming_the_first_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    text = (
        "name: a\nsetup: |\n  echo conda is mentioned, not called\n  conda create -n x -y\nrun: echo hi\n"
        "---\nname: b\nrun: |\n  conda activate x  # the env setup made\n  python -c 'print(1)'\n"
    )
    notes = [n for n in prepare_launch(text, "pipe.yaml", {}, {}, ResourceOverrides()).notes if "conda" in n]
    assert notes == [
        "pipe.yaml:4: calls conda (and 1 more line(s)), and this machine has none: on the local runtime that "
        "command ends with `conda: command not found` (exit 127). Cloud VMs get Miniconda before setup, as "
        "SkyPilot's nodes do; locally, put conda on this machine's PATH"
    ]
    assert conda_lines(text) == [4, 9]


def test_names_keys_and_comments_that_say_conda_are_no_call() -> None:
    text = "name: conda\nenvs:\n  TOOL: conda\nrun: |\n  # conda later\n  echo conda\n"
    assert conda_lines(text) == []
    calls = "run: |\n  conda info\n  x && conda list\n  if true; then conda env list; fi\n  $(conda info)\n"
    assert conda_lines(calls) == [2, 3, 4, 5]
