"""A SkyPilot user's shell script, unchanged but for the command name, run by bash through the installed
`skyless` entry point on a fresh HOME (the first command starts the local runtime): launch -y with an
inline command, exec with resource overrides, queue -s, cancel, stop and start (each returning once the
cluster is STOPPED or UP), jobs launch/queue/cancel -n, jobs cancel by SkyPilot's integer id, down -a -y.
A second script launches with --ports, --git-url/--git-ref, --config and --wait-for, execs in another
checkout, then asks `status --endpoints` / `--endpoint PORT`.
`set -euo pipefail` makes every line's exit code part of the proof."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from local_runtime.moto_endpoint import free_port

SKYLESS = Path(sys.executable).with_name("skyless")

SKYPILOT_SCRIPT = """#!/usr/bin/env bash
set -euo pipefail
echo "== launch"
sky launch -y -c dev --cpus 2+ 'echo hello from $(hostname); echo ready > ~/marker'
echo "== exec"
sky exec dev --num-nodes 1 --cpus 2 --env GREETING=hi 'echo "$GREETING from exec"; cat ~/marker'
sky exec dev -d 'sleep 300'
echo "== queue -s"
sky queue dev -s
sky cancel -y dev
echo "== stop"
sky stop -y dev
sky status dev
echo "== start"
sky start -y dev
sky exec dev 'cat ~/marker'
echo "== jobs launch"
sky jobs launch -y -d -n train 'sleep 300'
echo "== jobs queue -s"
sky jobs queue -s
sky jobs cancel -y -n train
echo "== jobs by number"
sky jobs launch -y -d -n eval 'sleep 300'
sky jobs cancel -y 2
echo "== jobs queue"
sky jobs queue
echo "== down"
sky down -a -y
echo "== status"
sky status
"""


@pytest.fixture
def home(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKYLESS_", "AWS_"))}
    env.update(
        HOME=str(tmp_path),
        SKYLESS_LOCAL_MOTO_PORT=str(free_port()),
        SKYLESS_LOCAL_API_PORT=str(free_port()),
        SKYLESS_CLUSTER_POLL_SECONDS="0.5",
        SKYLESS_LOG_FLUSH_SECONDS="0.5",
        COLUMNS="200",
    )
    yield tmp_path, env
    subprocess.run([str(SKYLESS), "local", "down"], env=env, capture_output=True, timeout=120, check=False)


def test_a_skypilot_script_runs_unchanged_but_for_the_command_name(home: tuple[Path, dict[str, str]]) -> None:
    folder, env = home
    script = folder / "train.sh"
    script.write_text(re.sub(r"^sky ", f"{SKYLESS} ", SKYPILOT_SCRIPT, flags=re.M))

    done = subprocess.run(
        ["bash", str(script)], env=env, capture_output=True, text=True, timeout=600, check=False
    )

    out = done.stdout
    log = folder / ".skyless" / "local" / "runtime.log"
    assert done.returncode == 0, f"{out}\n{done.stderr}\n{log.read_text()[-3000:] if log.exists() else ''}"
    sections = dict(re.findall(r"^== (.+)\n((?:(?!^== ).*\n)*)", out, re.M))
    assert "hello from" in sections["launch"] and "Job 1 on dev SUCCEEDED" in sections["launch"]
    assert "hi from exec\nready\n" in sections["exec"]
    assert "--cpus: ignored by exec" in sections["exec"]  # said, not silently dropped
    queued = sections["queue -s"]
    assert re.search(r"3\W.*(PENDING|RUNNING).*sleep 300", queued), queued
    assert "SUCCEEDED" not in queued  # -s: finished jobs left out
    assert "cancelling the latest job, 3" in queued and "Cancelled job(s) 3 on dev" in queued
    stopped = sections["stop"]  # stop returns once the cluster is STOPPED, and says so
    assert re.search(r"dev: STOPPED\n", stopped) and re.search(r"^dev STOPPED", stopped, re.M), stopped
    started = sections["start"]
    assert re.search(r"dev: UP\n", started) and "ready\n" in started, started  # UP: exec works at once
    train = re.search(r"Job (job-\S+) submitted", sections["jobs launch"])
    assert train is not None, sections["jobs launch"]
    assert train.group(1) in sections["jobs queue -s"]
    assert "Managed Job ID: 1\n" in sections["jobs launch"]  # the first managed job of this user, as in sky
    assert "Managed Job ID: 2\n" in sections["jobs by number"]
    every = sections["jobs queue"]
    assert re.search(rf"\b1\W+{train.group(1)}\W+train\W+CANCELLED", every), every
    assert re.search(r"\b2\W+job-\S+\W+eval\W+CANCELLED", every), every  # `jobs cancel -y 2` reached it
    assert re.search(r"dev\W+TERMINATED", sections["down"]) or "dev: TERMINATED" in sections["down"].replace(
        "Cluster ", ""
    ), sections["down"]
    assert "0 cluster(s)" in sections["status"]


FLAGS_SCRIPT = """#!/usr/bin/env bash
set -euo pipefail
echo "== launch"
sky launch -y -c web --ports 8080 --ports 9000-9001 -i 30 --wait-for jobs_and_ssh \\
  --git-url "$REPO" --git-ref v1 --config allowed_clouds=[aws] 'git log -1 --format=%s; cat version.txt'
echo "== exec"
sky exec web --git-url "$REPO" 'cat version.txt'
echo "== endpoints"
sky status --endpoints web
echo "== endpoint"
sky status web --endpoint 9001
echo "== closed"
sky status web --endpoint 9002 || echo "exit $?"
sky launch -y -c plain 'true'
echo "== no ports"
sky status --endpoints plain || echo "exit $?"
echo "== down"
sky down -y web plain
"""


def _tagged_repo(folder: Path) -> Path:
    """A git repository whose tag `v1` is behind its default branch."""
    repo = folder / "repo"
    repo.mkdir()
    for args in (["init", "-q"], ["config", "user.email", "t@example.com"], ["config", "user.name", "t"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    for version in ("one", "two"):
        (repo / "version.txt").write_text(f"{version}\n")
        subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
        subprocess.run(["git", "-C", str(repo), "commit", "-qm", f"commit {version}"], check=True)
        if version == "one":
            subprocess.run(["git", "-C", str(repo), "tag", "v1"], check=True)
    return repo


def test_a_script_with_sky_launch_git_config_wait_for_and_status_endpoints(
    home: tuple[Path, dict[str, str]],
) -> None:
    folder, env = home
    script = folder / "web.sh"
    script.write_text(re.sub(r"^sky ", f"{SKYLESS} ", FLAGS_SCRIPT, flags=re.M))

    done = subprocess.run(
        ["bash", str(script)], env={**env, "REPO": str(_tagged_repo(folder))},
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip

    out = done.stdout
    log = folder / ".skyless" / "local" / "runtime.log"
    assert done.returncode == 0, f"{out}\n{done.stderr}\n{log.read_text()[-3000:] if log.exists() else ''}"
    sections = dict(re.findall(r"^== (.+)\n((?:(?!^== ).*\n)*)", out, re.M))
    launched = sections["launch"]
    assert "commit one\none\n" in launched and "Job 1 on web SUCCEEDED" in launched, launched  # v1, cloned
    assert "--config: allowed_clouds: applied: only aws considered" in launched
    assert "two\n" in sections["exec"] and "Job 2 on web SUCCEEDED" in sections["exec"]  # the default branch
    lines = sections["endpoints"].splitlines()
    assert [line.split(":", 1)[0] for line in lines] == ["8080", "9000", "9001"], lines
    host = lines[0].split(": ", 1)[1].rsplit(":", 1)[0]
    assert lines == [f"{port}: {host}:{port}" for port in (8080, 9000, 9001)]
    assert sections["endpoint"] == f"{host}:9001\n"
    closed = "web has no open port 9002 (its launch task's resources.ports: 8080, 9000-9001)"
    assert "exit 2" in sections["closed"] and closed in done.stderr
    assert "exit 2" in sections["no ports"]
    assert "plain has no open ports (its launch task's resources.ports: none)" in done.stderr
