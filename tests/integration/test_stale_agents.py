"""Agents of an attempt the job has moved past are told to stop (HTTP 410, `"stop": true`), and they do:
the task's process group is killed and the agent exits, even when the task ignores SIGTERM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from chalice.test import Client
from conftest import QueueDriver

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from functions.submit.app import app
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.jobs.agent_reports import AgentReport, report_agent_status
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.tokens import agent_token
from shared.jobs.views import get_job
from shared.wiring import wiring_for

SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])
SPOT = "name: train\nresources:\n  cloud: aws\n  cpus: 2+\n  use_spot: true\nrun: python train.py\n"


def headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}


@pytest.fixture
def recovered_job(stack: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """A spot job whose attempt 0 was preempted (the job is on attempt 1); its first node's instance id."""
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)
    job_id = submit_job(wiring_for(stack), SubmitJob.from_text(owner="alice", task_text=SPOT)).job_id
    optimize_handler(queues.event(queues.receive("optimize")), None)
    provision_handler(queues.event(queues.receive("provision")), None)
    instance_id = get_job(wiring_for(stack), job_id, owner=None).cluster["nodes"][0]["instance_id"]  # type: ignore[index]
    report_agent_status(
        wiring_for(stack), AgentReport(job_id, instance_id, "preempting")
    )  # the agent's notice
    assert LocalCloud(stack.home).preempt(job_id, notice_seconds=0.1) is not None
    assert get_job(wiring_for(stack), job_id, owner=None).attempt == 1
    return job_id, instance_id


def test_an_earlier_attempts_agent_is_answered_410_with_stop_on_config_and_status(
    stack: Settings, recovered_job: tuple[str, str]
) -> None:
    job_id, instance_id = recovered_job
    old = headers(agent_token(stack, job_id, 0))
    with Client(app) as client:
        config = client.http.get(f"/agent/{job_id}/config?instance_id={instance_id}", headers=old)
        body = json.dumps({"instance_id": instance_id, "phase": "heartbeat"})
        status = client.http.post(f"/agent/{job_id}/status", headers=old, body=body)
        stranger = client.http.post(f"/agent/{job_id}/status", headers=headers("f" * 64), body=body)
    assert config.status_code == 410 and config.json_body["stop"] is True
    assert config.json_body["error"] == "StaleAttemptError" and "attempt 0" in config.json_body["message"]
    assert status.status_code == 410 and status.json_body["stop"] is True
    assert stranger.status_code == 401 and "stop" not in stranger.json_body


def test_a_node_not_in_the_jobs_cluster_is_told_to_stop_once_the_launch_is_recorded(
    stack: Settings, queues: QueueDriver, recovered_job: tuple[str, str]
) -> None:
    job_id, _ = recovered_job
    optimize_handler(queues.event(queues.receive("optimize")), None)
    # while attempt 1 is being launched, a node of it that is not recorded yet waits ...
    waiting = report_agent_status(wiring_for(stack), AgentReport(job_id, "local-stray-000", "heartbeat"))
    assert waiting.stop is False
    provision_handler(queues.event(queues.receive("provision")), None)
    # ... and once the attempt's cluster is recorded without it, it is a stray of a launch that lost
    stray = report_agent_status(wiring_for(stack), AgentReport(job_id, "local-stray-000", "heartbeat"))
    assert stray.stop is True and stray.cancel is False


class StaleAfterRunning(BaseHTTPRequestHandler):
    """A fake API: a config, 200 to `setting_up` and `running`, then 410 (stop) to everything else."""

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        script = "trap '' TERM; echo $$ > \"$HOME/task.pid\"; while true; do sleep 0.2; done"
        self._answer(200, {"rank": 0, "num_nodes": 1, "node_ips": ["127.0.0.1"], "gpus_per_node": 0,
                           "task_id": "t", "setup": None, "run": script, "envs": {}, "workdir_url": None,
                           "file_mounts": [], "log_upload": None, "heartbeat_seconds": 1,
                           "agent_token": "attempt-0-agent-token"})  # fmt: skip

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        phase = json.loads(self.rfile.read(length) or b"{}").get("phase")
        if phase in ("setting_up", "running"):
            self._answer(200, {"job_id": "job-x", "state": "RUNNING", "cancel": False})
        else:
            self._answer(410, {"error": "StaleAttemptError", "message": "attempt 0 is over", "stop": True})


@pytest.fixture
def stale_api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), StaleAfterRunning)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def test_the_real_agent_told_to_stop_kills_a_task_that_ignores_sigterm_and_exits(
    stale_api: str, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "SKYLESS_API_URL": stale_api,
        "SKYLESS_JOB_ID": "job-x",
        "SKYLESS_INSTANCE_ID": "i-0",
        "SKYLESS_BOOT_TOKEN": "old-boot-token",
        "SKYLESS_NODE_HOME": str(tmp_path),
        "HOME": str(tmp_path),
        "SKYLESS_CLOUD": "local",
        "SKYLESS_STOP_GRACE_SECONDS": "1",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    agent = subprocess.Popen(
        [sys.executable, "-m", "node_agent.agent"], env=env, cwd=tmp_path, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while not (tmp_path / "task.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        task_pid = int((tmp_path / "task.pid").read_text())
        agent.wait(timeout=20)  # the first heartbeat (after 1 s) is answered 410
        output = agent.stdout.read().decode() if agent.stdout else ""
        assert "stopping:" in output
        deadline = time.monotonic() + 5
        while alive(task_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(task_pid)
    finally:
        if agent.poll() is None:
            os.killpg(agent.pid, 9)
