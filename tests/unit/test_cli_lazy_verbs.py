"""The `skyless` command loads only what the verb it runs needs: `--help` lists every verb without importing
one area, `logs --help` builds its options without httpx, and `status` against a deployed API never loads
moto or the local runtime. The verb table in cli/main.py is held to what the areas register."""

from __future__ import annotations

import importlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.core import TyperCommand

from cli.main import VERBS, area_verbs

ROOT = Path(__file__).resolve().parents[2]
COMMAND_MODULES = ("cli.main", "cli.typer_params")  # the command itself, before any area
HEAVY = ("boto3", "botocore", "moto", "httpx", "shared.api", "local_runtime")
PROBE = """
import json, sys
sys.argv = ["skyless", *json.loads(sys.argv[1])]
from cli.main import app
try:
    app()
except SystemExit as exc:
    code = exc.code
sys.stdout.flush()
print("\\nPROBE" + json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _run(args: list[str], **env: str) -> tuple[int, str, set[str]]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SKYLESS_")}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        cwd=ROOT,
        env={**base, "COLUMNS": "200", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    text, _, probe = out.stdout.rpartition("\nPROBE")
    assert probe, out.stderr
    result = json.loads(probe)
    return result["code"], text, set(result["modules"])


def _loaded(modules: set[str], roots: tuple[str, ...]) -> list[str]:
    return sorted(name for name in modules if name in roots or name.startswith(tuple(f"{r}." for r in roots)))


def test_help_lists_every_verb_and_imports_no_area() -> None:
    code, text, modules = _run(["--help"])

    assert code == 0
    for verb in VERBS:
        assert f" {verb} " in text
    assert _loaded(modules, (*HEAVY, "pydantic")) == []
    assert [name for name in modules if name.startswith("cli.") and name not in COMMAND_MODULES] == []


def test_a_verbs_help_loads_its_area_without_the_api_client() -> None:
    code, text, modules = _run(["logs", "--help"])

    assert code == 0
    assert "--rank" in text
    assert "cli.job_commands" in modules
    assert _loaded(modules, HEAVY) == []  # pydantic may load here: typer's own parameter adapters import it


def test_status_against_a_deployed_api_calls_it_without_httpx_pydantic_or_the_local_runtime() -> None:
    with socket.socket() as sock:  # a port nothing listens on: the call is made and refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code, _, modules = _run(["status"], SKYLESS_API_URL=f"http://127.0.0.1:{port}", SKYLESS_API_KEY="sky_x")

    assert code == 2
    assert "http.client" in modules
    assert _loaded(modules, (*HEAVY, "pydantic")) == []


def test_a_value_typed_on_the_line_is_still_checked_by_typer() -> None:
    from typer.testing import CliRunner

    from cli.main import app

    result = CliRunner().invoke(app, ["queue", "--limit", "0", "--api-url", "http://127.0.0.1:9"])

    assert result.exit_code == 2
    assert "Invalid value for '--limit'" in result.output


def test_the_table_rows_name_the_fields_of_the_api_models_they_stand_for() -> None:
    from typing import get_type_hints

    from cli.api_rows import ClusterRow, JobPage, JobRow
    from shared.api.cluster_models import ClusterView
    from shared.api.models import JobList, JobSummary

    for row, model in ((JobRow, JobSummary), (JobPage, JobList), (ClusterRow, ClusterView)):
        assert sorted(get_type_hints(row)) == sorted(model.model_fields), row.__name__


def test_an_unknown_verb_is_refused_without_loading_an_area() -> None:
    code, _, modules = _run(["stauts"])

    assert code == 2
    assert [name for name in modules if name.startswith("cli.") and name not in COMMAND_MODULES] == []


@pytest.mark.parametrize("module", sorted({module for module, _ in VERBS.values()}))
def test_the_verb_table_is_what_each_area_registers(module: str) -> None:
    group = area_verbs(module)
    ctx = typer.Context(group)
    names = group.list_commands(ctx)
    registered = {name: group.get_command(ctx, name) or TyperCommand(name) for name in names}

    assert sorted(registered) == sorted(verb for verb, (owner, _) in VERBS.items() if owner == module)
    for verb, command in registered.items():
        first_paragraph = (command.short_help or command.help or "").split("\n\n")[0].strip()
        assert VERBS[verb][1] == first_paragraph, verb


def test_the_lazy_help_screen_is_the_one_every_area_registered_at_once_would_print() -> None:
    from typer.testing import CliRunner

    from cli.main import app

    eager = typer.Typer(name="skyless", help=app.info.help, add_completion=False, rich_markup_mode=None)
    for module in dict.fromkeys(module for module, _ in VERBS.values()):
        importlib.import_module(f"cli.{module}").register(eager)
    runner = CliRunner()

    lazy_help = runner.invoke(app, ["--help"], prog_name="skyless", terminal_width=120)
    eager_help = runner.invoke(eager, ["--help"], prog_name="skyless", terminal_width=120)

    assert lazy_help.exit_code == eager_help.exit_code == 0
    assert lazy_help.output == eager_help.output
