"""`skyless` without the `local` extra and without a deployment says exactly what to install, and starts
nothing; with a deployment configured it never needs the extra."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import cli.local_extra
from cli.main import app

REAL_FIND_SPEC = importlib.util.find_spec


def _without_moto(name: str, *args: Any, **kwargs: Any) -> Any:
    return None if name.split(".")[0] == "moto" else REAL_FIND_SPEC(name, *args, **kwargs)


@pytest.fixture
def no_deployment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "skyless-home"
    for name in ("SKYLESS_API_URL", "SKYLESS_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SKYLESS_HOME", str(home))
    monkeypatch.setattr(cli.local_extra.importlib.util, "find_spec", _without_moto)
    return home


@pytest.mark.parametrize("argv", [["queue"], ["local", "up"]])
def test_without_the_local_extra_the_cli_names_the_exact_install_command(
    no_deployment: Path, argv: list[str]
) -> None:
    result = CliRunner().invoke(app, argv)

    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert cli.local_extra.install_command() in text, text
    assert "[local]" in text and "moto" in text and "--api-url" in text
    assert not (no_deployment / "local" / "runtime.json").exists()  # nothing was started


def test_a_configured_deployment_needs_no_local_extra(
    no_deployment: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKYLESS_API_URL", "http://127.0.0.1:9")  # nothing listens: the call fails, not this
    monkeypatch.setenv("SKYLESS_API_KEY", "k")

    result = CliRunner().invoke(app, ["queue"])

    assert "[local]" not in result.output and "pip install" not in result.output, result.output
