"""What `sam build` ships (infra/lambda_code: links to three packages, a Makefile, two requirement lists)
agrees with pyproject.toml, and the handlers need nothing outside it. The built size, and an import of every
handler from a real build, are benchmarks/bundle_size.py's (it needs the package index)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CODE = ROOT / "infra" / "lambda_code"
# the CLI's, in the base install so `skyless` works against a deployed stack
CLI_ONLY = {"typer", "rich", "python-dotenv"}
HANDLER_MODULES = (
    "functions.submit.app",
    "functions.submit.handler",
    "functions.optimize.handler",
    "functions.provision.handler",
    "functions.spot_watch.handler",
    "functions.reconcile.handler",
    "functions.reaper.handler",
    "functions.notify.handler",
    "functions.catalog_refresh.handler",
)


def _requirements(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, spec = re.match(r"([A-Za-z0-9_.\-\[\]]+)(.*)", line).groups()  # type: ignore[union-attr]
            found[name.lower()] = spec.strip()
    return found


def test_only_the_three_runtime_packages_and_the_build_files_are_in_the_code_folder() -> None:
    entries = {p.name: p for p in CODE.iterdir() if p.name != "__pycache__"}
    assert set(entries) == {
        "functions",
        "shared",
        "node_agent",
        "Makefile",
        "requirements.txt",
        "requirements-no-deps.txt",
    }
    for name in ("functions", "shared", "node_agent"):
        assert entries[name].is_symlink() and entries[name].resolve() == ROOT / name


def test_the_bundle_requirements_are_pyprojects_runtime_dependencies_and_nothing_else() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = _requirements_from(project["dependencies"])
    bundle = {**_requirements(CODE / "requirements.txt"), **_requirements(CODE / "requirements-no-deps.txt")}
    assert (
        bundle.pop("six") == ""
    )  # chalice's one run-time need, installed because chalice comes without deps
    assert bundle == {name: spec for name, spec in runtime.items() if name not in CLI_ONLY}
    assert "moto[server]" not in runtime and "moto" not in runtime
    assert any(r.startswith("moto[server]") for r in project["optional-dependencies"]["local"])
    assert "skyless[gcp,azure,local,stores]" in project["optional-dependencies"]["dev"]


def _requirements_from(lines: list[str]) -> dict[str, str]:
    found = {}
    for line in lines:
        name, spec = re.match(r"([A-Za-z0-9_.\-\[\]]+)(.*)", line).groups()  # type: ignore[union-attr]
        found[name.lower()] = spec.strip()
    return found


def test_no_handler_imports_the_cli_the_local_runtime_or_their_dependencies() -> None:
    code = (
        "import importlib, json, sys\n"
        f"for name in {HANDLER_MODULES!r}:\n    importlib.import_module(name)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=CODE, capture_output=True, text=True, check=True)
    loaded = set(done.stdout.split("\n")[-2].strip('[]"\n').split('", "'))
    # (not rich: httpx imports it, and click, when they are installed; benchmarks/bundle_size.py imports every
    # handler from a real build that lacks them)
    forbidden = {"cli", "local_runtime", "tests", "moto", "typer", "flask", "werkzeug", "pytest"}
    assert not loaded & forbidden, loaded & forbidden


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="bytecode is made only by Lambda's Python, 3.11")
def test_the_build_ships_bytecode_so_a_cold_start_compiles_nothing(tmp_path: Path) -> None:
    """Lambda's /var/task is read-only: what the bundle lacks in bytecode every cold start compiles. The
    Makefile's own rule, without its pip steps (PIP=true: the package index is bundle_size.py's)."""
    artifacts = tmp_path / "bundle"
    artifacts.mkdir()
    env = {**os.environ, "ARTIFACTS_DIR": str(artifacts), "PYTHON": sys.executable}
    make = ["make", "-s", "--no-print-directory", "-C", str(CODE), "PIP=true", "build-SubmitFunction"]
    subprocess.run(make, env=env, check=True)
    sources = list(artifacts.rglob("*.py"))
    assert len(sources) > 100
    from node_agent.user_data import prebuilt_path  # the agent user-data carries, built once (no AST work)

    assert prebuilt_path("shipped-aws", artifacts / "node_agent" / "prebuilt").is_file()
    for source in sources:
        cached = Path(importlib.util.cache_from_source(str(source)))
        header = cached.read_bytes()[:8]
        assert header[:4] == importlib.util.MAGIC_NUMBER, source
        assert int.from_bytes(header[4:8], "little") == 0b01, source  # hash-based, never checked
    code = (
        "import sys\nfrom functions.notify.handler import handler\n"
        "print(sorted(m for m in sys.modules if m.startswith(('shared', 'functions'))))\n"
    )
    read_only = {**env, "PYTHONPATH": str(artifacts), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=read_only, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "shared.store" in done.stdout


def test_the_bundle_keeps_the_botocore_model_of_every_aws_service_the_code_makes_a_client_of() -> None:
    """The Makefile drops every other service's model from botocore's data: a client of a dropped one would
    fail in Lambda only (UnknownServiceError). Every `client("<service>"` the Lambda code spells is kept."""
    makefile = (CODE / "Makefile").read_text()
    kept = set(re.search(r"^BOTOCORE_SERVICES = (.*)$", makefile, re.M).group(1).split())  # type: ignore[union-attr]
    called: dict[str, str] = {}
    for package in ("functions", "shared", "node_agent"):
        for source in (ROOT / package).rglob("*.py"):
            for service in re.findall(r"client\(\s*\"([a-z0-9-]+)\"", source.read_text()):
                called.setdefault(service, str(source.relative_to(ROOT)))
    assert {"dynamodb", "sqs", "s3", "ec2"} <= called.keys()  # the scan finds what surely is there
    assert not called.keys() - kept, {s: f for s, f in called.items() if s not in kept}
    assert not kept - called.keys()  # nor a model kept that no code calls
