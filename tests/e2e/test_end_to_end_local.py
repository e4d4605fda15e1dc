"""The local runtime as a user runs it: `skyless local up`, jobs through the HTTP API, a preemption
recovered on another candidate, `skyless local down` leaving no process behind, state kept across a restart.

One real daemon (moto + API + dispatcher) per test module, in a temporary SKYLESS_HOME on free ports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from local_runtime.moto_endpoint import free_port

ROOT = Path(__file__).resolve().parents[2]
SKYLESS = Path(sys.executable).with_name("skyless")
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


class Runtime:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.moto_port, self.api_port = free_port(), free_port()
        self.env = {**os.environ, "SKYLESS_HOME": str(home), "SKYLESS_LOCAL_SNAPSHOT_SECONDS": "2"}
        for name in ("AWS_ENDPOINT_URL", "SKYLESS_API_URL", "SKYLESS_PREFIX", "SKYLESS_API_KEY"):
            self.env.pop(name, None)

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(SKYLESS), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=False)  # fmt: skip

    def up(self) -> dict[str, Any]:
        result = self.cli("local", "up", "--moto-port", str(self.moto_port), "--api-port", str(self.api_port))
        assert result.returncode == 0, result.stdout + result.stderr + self.log()
        info = json.loads((self.home / "local" / "runtime.json").read_text())
        self.api = httpx.Client(base_url=info["api_url"], timeout=30,
                                headers={"Authorization": f"Bearer {info['api_key']}"})  # fmt: skip
        return info

    def log(self) -> str:
        path = self.home / "local" / "runtime.log"
        return path.read_text()[-4000:] if path.exists() else ""

    def submit(self, example: str) -> str:
        text = (ROOT / "examples" / example).read_text()
        answer = self.api.post("/jobs", json={"task": text, "filename": example})
        assert answer.status_code == 201, answer.text
        return answer.json()["job_id"]

    def job(self, job_id: str) -> dict[str, Any]:
        answer = self.api.get(f"/jobs/{job_id}")
        assert answer.status_code == 200, answer.text
        return answer.json()

    def wait(self, job_id: str, condition: Any, timeout: float = 150) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        job = self.job(job_id)
        while time.monotonic() < deadline:
            if condition(job):
                return job
            time.sleep(0.5)
            job = self.job(job_id)
        last = json.dumps({k: v for k, v in job.items() if k != "plan"})[:6000]
        raise AssertionError(f"job {job_id} never met the condition; last: {last}\n{self.log()}")

    def logs(self, job_id: str, rank: int) -> str:
        answer = self.api.get(f"/jobs/{job_id}/logs", params={"rank": rank})
        assert answer.status_code == 200, answer.text
        return answer.json()["text"]

    def node_pids(self) -> list[int]:
        files = (self.home / "local" / "nodes").glob("*/*/node.json")
        return [json.loads(p.read_text())["pid"] for p in files]


def _sqs(endpoint: str) -> Any:
    return boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id="skyless-local", aws_secret_access_key="skyless-local")  # fmt: skip


def _alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    rt = Runtime(tmp_path_factory.mktemp("skyless-home"))
    yield rt
    rt.cli("local", "down")  # whatever a failed test left running


def test_up_then_status_shows_endpoints_and_queues(runtime: Runtime):
    info = runtime.up()
    assert oct((runtime.home / "local" / "runtime.json").stat().st_mode & 0o777) == "0o600"
    status = runtime.cli("local", "status")
    assert status.returncode == 0, status.stderr
    assert info["api_url"] in status.stdout and info["aws_endpoint_url"] in status.stdout
    for queue in ("optimize", "provision", "spot_watch"):
        assert queue in status.stdout
    again = runtime.cli("local", "up")
    assert "already running" in again.stdout and str(info["pid"]) in again.stdout


def test_two_node_hello_job_succeeds_with_rank_and_ips_in_logs(runtime: Runtime):
    job_id = runtime.submit("hello.yaml")
    job = runtime.wait(job_id, lambda j: j["state"] in TERMINAL)
    assert job["state"] == "SUCCEEDED", json.dumps(job)[:2000]
    rank0, rank1 = runtime.logs(job_id, 0), runtime.logs(job_id, 1)
    assert "rank 0 of 2" in rank0 and "rank 1 of 2" in rank1
    assert "127.0.0.2\n127.0.0.3" in rank0  # SKYPILOT_NODE_IPS, one per line, rank order


def test_preempted_spot_job_recovers_on_another_candidate(runtime: Runtime):
    job_id = runtime.submit("spot.yaml")
    first = runtime.wait(job_id, lambda j: j["state"] == "RUNNING" and "step 1/12" in runtime.logs(job_id, 0))
    assert first["use_spot"] is True
    place = (first["cloud"], first["region"], first["zone"])

    preempt = runtime.cli("local", "preempt", job_id, "--grace", "1")
    assert preempt.returncode == 0, preempt.stdout + preempt.stderr
    recovered = runtime.wait(
        job_id, lambda j: j["state"] == "RUNNING" and j["recoveries"] >= 1 and j["attempt"] > first["attempt"]
    )
    assert (recovered["cloud"], recovered["region"], recovered["zone"]) != place
    states = [e["state"] for e in recovered["timeline"] if e.get("state")]
    assert "RECOVERING" in states

    assert runtime.api.post(f"/jobs/{job_id}/cancel").status_code == 200
    runtime.wait(job_id, lambda j: j["state"] == "CANCELLED")


def test_down_stops_every_node_and_restart_keeps_jobs(runtime: Runtime):
    listed_before = {j["job_id"] for j in runtime.api.get("/jobs").json()["jobs"]}
    assert len(listed_before) == 2
    # A node left running on purpose: `local down` must stop it with the daemon.
    running = runtime.submit("spot.yaml")
    runtime.wait(running, lambda j: j["state"] == "RUNNING")
    pids = runtime.node_pids()
    assert any(_alive(pid) for pid in pids)
    info = json.loads((runtime.home / "local" / "runtime.json").read_text())
    daemon_pid = info["pid"]
    # A message SQS still holds back (a retry with backoff, say) must also survive the restart.
    sqs = _sqs(info["aws_endpoint_url"])
    url = sqs.get_queue_url(QueueName="skyless-optimize")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"job_id": "held", "attempt": 9}), DelaySeconds=900)

    down = runtime.cli("local", "down")
    assert down.returncode == 0, down.stderr
    assert not _alive(daemon_pid)
    assert [pid for pid in runtime.node_pids() if _alive(pid)] == []
    assert runtime.cli("local", "status").returncode == 1

    info = runtime.up()
    after = {j["job_id"]: j for j in runtime.api.get("/jobs").json()["jobs"]}
    sqs = _sqs(info["aws_endpoint_url"])
    url = sqs.get_queue_url(QueueName="skyless-optimize")["QueueUrl"]
    held = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesDelayed"])
    assert held["Attributes"]["ApproximateNumberOfMessagesDelayed"] == "1"
    assert listed_before | {running} <= set(after)
    assert runtime.job(next(iter(listed_before)))["state"] in TERMINAL
    down = runtime.cli("local", "down")
    assert down.returncode == 0
