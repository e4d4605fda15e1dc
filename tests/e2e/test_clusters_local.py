"""A SkyPilot user's cluster session, typed at the `skyless` command on a fresh HOME, on the local runtime
the first command starts: launch -c, exec twice, queue, a command through ssh, autostop stopping the idle
cluster (an autostop "minute" is two seconds here: the file's 30m outlasts the session on a busy machine),
start, down, and nothing left running after it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from local_runtime.moto_endpoint import free_port

ROOT = Path(__file__).resolve().parents[2]
SKYLESS = Path(sys.executable).with_name("skyless")


class User:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.skyless_home = home / ".skyless"
        self.env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("SKYLESS_", "AWS_"))  # nothing configured: the CLI starts it all
        }
        self.env.update(
            HOME=str(home),
            SKYLESS_LOCAL_MOTO_PORT=str(free_port()),
            SKYLESS_LOCAL_API_PORT=str(free_port()),
            SKYLESS_AUTOSTOP_MINUTE_SECONDS="2",
            SKYLESS_CLUSTER_POLL_SECONDS="0.5",
            SKYLESS_LOG_FLUSH_SECONDS="0.5",
        )

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(SKYLESS), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, cwd=ROOT, check=False)  # fmt: skip

    def ok(self, *args: str, timeout: float = 120) -> str:
        done = self.run(*args, timeout=timeout)
        assert done.returncode == 0, f"skyless {' '.join(args)}: {done.stdout}\n{done.stderr}\n{self.log()}"
        return done.stdout

    def log(self) -> str:
        path = self.skyless_home / "local" / "runtime.log"
        return path.read_text()[-3000:] if path.exists() else ""

    def cluster_state(self, name: str) -> str:
        out = self.ok("status")
        match = re.search(rf"^\W*{name}\W+(\w+)", out, re.M)
        return match.group(1) if match else "absent"

    def node_pids(self) -> list[int]:
        files = (self.skyless_home / "local" / "nodes").glob("*/*/node.json")
        return [json.loads(p.read_text())["pid"] for p in files]


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


@pytest.fixture
def user(tmp_path: Path) -> Iterator[User]:
    person = User(tmp_path / "home")
    person.home.mkdir()
    yield person
    person.run("local", "down")


def test_a_cluster_session_from_launch_to_down(user: User) -> None:
    first = user.ok("launch", "-c", "dev", "examples/dev_cluster.yaml")
    assert "provisioning a new cluster" in first and "hello from" in first, first
    assert "Job 1 on dev SUCCEEDED" in first
    assert "resources.autostop" not in first  # applied to the cluster, so never called "read, not applied"

    user.ok("exec", "dev", "cat ~/marker; echo second >> ~/marker")
    second = user.ok("exec", "dev", "cat", "~/marker", "~/setup.log")
    assert "ready\nsecond\n" in second and second.count("setup ran at") == 1, second  # files kept; setup once

    queue = user.ok("queue", "dev")
    assert re.search(r"3\W.*SUCCEEDED", queue) and re.search(r"1\W.*dev.*SUCCEEDED", queue), queue
    listed = json.loads(user.ok("queue", "dev", "--json"))
    assert sorted((job["job"], job["state"]) for job in listed) == [
        (1, "SUCCEEDED"),
        (2, "SUCCEEDED"),
        (3, "SUCCEEDED"),
    ], listed
    logs = user.ok("logs", "dev", "1")
    assert "hello from" in logs
    refused_cancel = user.run("cancel", "dev", "first")
    assert refused_cancel.returncode == 2 and "job numbers" in refused_cancel.stderr

    shell = user.ok("ssh", "dev", "--", "cat", "marker")
    assert shell == "ready\nsecond\n"
    pwd = user.ok("ssh", "dev", "--", "sh", "-c", 'echo "$PWD $HOME"')
    sandbox = pwd.split()[0]
    assert pwd.split() == [sandbox, sandbox] and "/local/nodes/" in sandbox  # the node's home, not mine
    assert not (user.home / ".ssh" / "config").exists()  # local: no ssh config entry

    everything = json.loads(user.ok("status", "--json"))
    assert [(c["name"], c["state"]) for c in everything["clusters"]] == [("dev", "UP")], everything
    assert everything["jobs"] == []  # cluster jobs are the cluster's, not managed jobs
    status = user.ok("status")
    assert re.search(r"dev\W+UP\W+\S+\W+1x \S+\W+30m", status), status  # resources.autostop: 30m
    user.ok("autostop", "dev", "-i", "2")
    deadline = time.monotonic() + 60
    while user.cluster_state("dev") != "STOPPED" and time.monotonic() < deadline:
        time.sleep(1)
    assert user.cluster_state("dev") == "STOPPED", user.ok("status", "dev")
    assert [pid for pid in user.node_pids() if alive(pid)] == []
    detail = user.ok("status", "dev")
    assert "autostop: idle for 2 min, stopping" in detail

    refused = user.run("exec", "dev", "true")
    assert refused.returncode == 2 and "exec needs it UP" in refused.stderr
    assert "autostop -" in user.ok("autostop", "dev", "--cancel")  # else it stops again 2 s after start
    user.ok("start", "dev")
    deadline = time.monotonic() + 30
    while user.cluster_state("dev") != "UP" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert "ready\nsecond\n" in user.ok("exec", "dev", "cat ~/marker")  # the disk came back with it

    user.ok("down", "dev")
    deadline = time.monotonic() + 30
    while user.cluster_state("dev") != "absent" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert user.cluster_state("dev") == "absent"
    assert [pid for pid in user.node_pids() if alive(pid)] == []
    again = user.run("exec", "dev", "true")
    assert again.returncode == 2 and "no cluster dev" in again.stderr
