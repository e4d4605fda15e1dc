"""The node agent as a real process against a real HTTP server speaking the agent protocol,
with the workdir, file mounts and logs in moto's S3 (presigned GET/POST)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TOKEN = "job-token-123"  # the boot token in user-data: good for the config fetch only
AGENT_TOKEN = "agent-token-456"  # what the config answer hands over for status reports


class AgentProtocolServer:
    """Answers /agent/{job}/config (425 a few times first) to the boot token with the agent's own key,
    and records /agent/{job}/status posts made with the agent token the config carried."""

    def __init__(self, config: dict[str, Any], not_ready_times: int = 2) -> None:
        self.config = config
        self.not_ready_left = not_ready_times
        self.config_requests: list[str] = []
        self.statuses: list[dict[str, Any]] = []
        self.unauthorized = 0
        self.node_keys: set[str] = set()  # one agent, one key, however often it asks
        self.fail_next_status = 1  # the first status post gets a 503: the agent must retry it
        self.metadata_notice: str | None = None
        self.cancel_after: str | None = None  # answer {"cancel": true} to statuses after this phase
        self.on_status: Any = None  # called with each status post before it is answered
        self.fresh_storage: Any = lambda: []  # what POST /agent/{job}/storage answers (fresh credentials)
        self.storage_requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, body: bytes = b"{}") -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_PUT(self) -> None:  # IMDSv2 token
                self._send(200, b"imds-token")

            def do_GET(self) -> None:
                if self.path.startswith("/latest/meta-data/spot/instance-action"):
                    notice = outer.metadata_notice
                    token_ok = self.headers.get("X-aws-ec2-metadata-token") == "imds-token"
                    if notice and token_ok:
                        self._send(200, notice.encode())
                    else:
                        self._send(404, b"")
                    return
                node_key = self.headers.get("X-Skyless-Node-Key") or ""
                if self.headers.get("Authorization") != f"Bearer {TOKEN}" or len(node_key) < 32:
                    outer.unauthorized += 1
                    self._send(401)
                    return
                outer.node_keys.add(node_key)
                outer.config_requests.append(self.path)
                if outer.not_ready_left > 0:
                    outer.not_ready_left -= 1
                    self._send(425)
                    return
                self._send(200, json.dumps({**outer.config, "agent_token": AGENT_TOKEN}).encode())

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Authorization") != f"Bearer {AGENT_TOKEN}":
                    outer.unauthorized += 1
                    self._send(401)
                    return
                if self.path.endswith("/storage"):
                    outer.storage_requests += 1
                    self._send(200, json.dumps({"storage": outer.fresh_storage()}).encode())
                    return
                if outer.fail_next_status > 0:
                    outer.fail_next_status -= 1
                    self._send(503)
                    return
                status = json.loads(body)
                cancel = outer.cancel_after is not None and outer.cancel_after in outer.phases()
                outer.statuses.append(status)
                if outer.on_status is not None:
                    outer.on_status(status)
                self._send(200, json.dumps({"job_id": "j", "state": "RUNNING", "cancel": cancel}).encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> AgentProtocolServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def phases(self) -> list[str]:
        return [s["phase"] for s in self.statuses if s["phase"] != "heartbeat"]


def _tarball(files: dict[str, str]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


@pytest.fixture
def bucket(moto_endpoint: str) -> Iterator[tuple[Any, str]]:
    s3 = boto3.client("s3", endpoint_url=moto_endpoint)
    name = f"agent-test-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=name)
    yield s3, name


def _config(s3: Any, bucket: str, job: str, *, run: str, setup: str | None, rank: int = 1) -> dict[str, Any]:
    s3.put_object(
        Bucket=bucket,
        Key=f"runs/{job}/workdir.tar.gz",
        Body=_tarball({"train.py": "print('hi')\n", "data/input.txt": "42\n"}),
    )
    s3.put_object(Bucket=bucket, Key=f"runs/{job}/mounts/0", Body=b"mounted-content")
    prefix = f"runs/{job}/logs/{rank}/"
    post = s3.generate_presigned_post(
        Bucket=bucket,
        Key=prefix + "${filename}",
        Conditions=[["starts-with", "$key", prefix]],
        ExpiresIn=3600,
    )

    def get_url(key: str) -> str:
        return s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=3600)

    common = {"SKYPILOT_TASK_ID": f"{job}-task-0", "SKYPILOT_NUM_NODES": "2"}
    ips = "10.0.0.1\n10.0.0.2"
    return {
        "rank": rank,
        "num_nodes": 2,
        "node_ips": ["10.0.0.1", "10.0.0.2"],
        "gpus_per_node": 8,
        "task_id": f"{job}-task-0",
        "setup": setup,
        "run": run,
        "envs": {"MY_VAR": "hello world", "SKYPILOT_TASK_ID": "the task's own value loses"},
        "setup_env": {
            **common,
            "SKYPILOT_SETUP_NODE_RANK": str(rank),
            "SKYPILOT_SETUP_NODE_IPS": ips,
            "SKYPILOT_SETUP_NUM_GPUS_PER_NODE": "8",
        },
        "run_env": {
            **common,
            "SKYPILOT_NODE_RANK": str(rank),
            "SKYPILOT_NODE_IPS": ips,
            "SKYPILOT_NUM_GPUS_PER_NODE": "8",
        },
        "workdir_url": get_url(f"runs/{job}/workdir.tar.gz"),
        "file_mounts": [{"path": "~/mounted/file.txt", "url": get_url(f"runs/{job}/mounts/0")}],
        "log_upload": {"url": post["url"], "fields": post["fields"], "key_prefix": prefix},
        "heartbeat_seconds": 1,
    }


def _start_agent(api_url: str, job: str, home: Path, **extra_env: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "PYTHONPATH": str(PROJECT_ROOT),
        "SKYLESS_API_URL": api_url,
        "SKYLESS_JOB_ID": job,
        "SKYLESS_CLUSTER_ID": f"c-{job}",
        "SKYLESS_INSTANCE_ID": "i-rank1",
        "SKYLESS_BOOT_TOKEN": TOKEN,
        "SKYLESS_NODE_IP": "10.0.0.2",
        "SKYLESS_LOG_FLUSH_SECONDS": "0.5",
        **extra_env,
    }
    home.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-m", "node_agent.agent"],
        cwd=home,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def _shipped_log(s3: Any, bucket: str, prefix: str) -> str:
    listing = s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    keys = sorted(item["Key"] for item in listing)
    return "".join(s3.get_object(Bucket=bucket, Key=k)["Body"].read().decode() for k in keys)


def _wait_for(predicate: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_agent_runs_setup_and_run_with_skypilot_env_and_ships_logs(bucket: tuple[Any, str], tmp_path: Path):
    s3, name = bucket
    job = "j-" + uuid.uuid4().hex[:6]
    run = (
        'echo "rank=$SKYPILOT_NODE_RANK nodes=$SKYPILOT_NUM_NODES gpus=$SKYPILOT_NUM_GPUS_PER_NODE"\n'
        'echo "ips=$(echo "$SKYPILOT_NODE_IPS" | paste -sd,) task=$SKYPILOT_TASK_ID var=$MY_VAR"\n'
        'echo "pwd=$(basename "$PWD") data=$(cat data/input.txt) mount=$(cat ../mounted/file.txt)"\n'
        'echo "token=${SKYLESS_BOOT_TOKEN:-absent}"\n'
        "exit 3\n"
    )
    setup = (
        "echo setup-ran; test -f train.py\n"
        'echo "setup rank=$SKYPILOT_SETUP_NODE_RANK gpus=$SKYPILOT_SETUP_NUM_GPUS_PER_NODE'
        ' run-rank=${SKYPILOT_NODE_RANK-unset} var=$MY_VAR"\n'
    )
    with AgentProtocolServer(_config(s3, name, job, run=run, setup=setup)) as api:
        agent = _start_agent(api.url, job, tmp_path / "node")
        _out, err = agent.communicate(timeout=60)

    assert agent.returncode == 1, err.decode()
    assert api.unauthorized == 0
    assert len(api.config_requests) == 3  # two 425s, then the config
    assert len(api.node_keys) == 1
    assert "instance_id=i-rank1" in api.config_requests[-1]
    assert api.phases() == ["setting_up", "running", "failed"]
    final = api.statuses[-1]
    assert final["exit_code"] == 3 and final["instance_id"] == "i-rank1"

    logs = _shipped_log(s3, name, f"runs/{job}/logs/1/")
    assert "setup-ran" in logs
    assert "setup rank=1 gpus=8 run-rank=unset var=hello world" in logs  # each stage gets its own variables
    assert "rank=1 nodes=2 gpus=8" in logs
    assert f"ips=10.0.0.1,10.0.0.2 task={job}-task-0 var=hello world" in logs
    assert "pwd=sky_workdir data=42 mount=mounted-content" in logs
    assert "token=absent" in logs  # the agent's credential is not handed to user code


def test_agent_reports_success_and_heartbeats_while_running(bucket: tuple[Any, str], tmp_path: Path):
    s3, name = bucket
    job = "j-" + uuid.uuid4().hex[:6]
    run = "for i in 1 2 3; do echo tick $i; sleep 1; done"
    with AgentProtocolServer(_config(s3, name, job, run=run, setup=None), not_ready_times=0) as api:
        agent = _start_agent(api.url, job, tmp_path / "node")
        # Logs are shipped while the task still runs, not only at the end.
        _wait_for(lambda: "tick 1" in _shipped_log(s3, name, f"runs/{job}/logs/1/"))
        assert agent.poll() is None
        agent.communicate(timeout=60)

    assert agent.returncode == 0
    assert api.phases() == ["setting_up", "running", "succeeded"]
    assert api.statuses[-1]["exit_code"] == 0
    assert sum(1 for s in api.statuses if s["phase"] == "heartbeat") >= 1
    assert "tick 3" in _shipped_log(s3, name, f"runs/{job}/logs/1/")


def test_setup_failure_stops_before_run_and_reports_its_exit_code(bucket: tuple[Any, str], tmp_path: Path):
    s3, name = bucket
    job = "j-" + uuid.uuid4().hex[:6]
    with AgentProtocolServer(_config(s3, name, job, run="echo should-not-run", setup="exit 7")) as api:
        agent = _start_agent(api.url, job, tmp_path / "node")
        agent.communicate(timeout=60)
    assert api.phases() == ["setting_up", "setup_failed"]  # FAILED_SETUP, as SkyPilot names it
    assert api.statuses[-1]["exit_code"] == 7
    assert "should-not-run" not in _shipped_log(s3, name, f"runs/{job}/logs/1/")


def test_sigterm_reports_preempting_and_lets_the_task_checkpoint(bucket: tuple[Any, str], tmp_path: Path):
    s3, name = bucket
    job = "j-" + uuid.uuid4().hex[:6]
    home = tmp_path / "node"
    run = "trap 'echo checkpointed > ../checkpoint; exit 0' TERM; echo started; while :; do sleep 0.1; done"
    task_log = home / "skyless_task.log"
    with AgentProtocolServer(_config(s3, name, job, run=run, setup=None), not_ready_times=0) as api:
        agent = _start_agent(api.url, job, home)
        _wait_for(lambda: "running" in api.phases())
        _wait_for(lambda: task_log.exists() and "started" in task_log.read_text())
        os.kill(agent.pid, signal.SIGTERM)
        agent.communicate(timeout=30)

    assert (home / "checkpoint").read_text().strip() == "checkpointed"
    assert api.phases() == ["setting_up", "running", "preempting"]  # no "succeeded": the node was taken away


def test_aws_spot_notice_in_instance_metadata_reports_preempting(bucket: tuple[Any, str], tmp_path: Path):
    s3, name = bucket
    job = "j-" + uuid.uuid4().hex[:6]
    run = "trap 'exit 0' TERM; while true; do sleep 0.1; done"
    with AgentProtocolServer(_config(s3, name, job, run=run, setup=None), not_ready_times=0) as api:
        agent = _start_agent(
            api.url,
            job,
            tmp_path / "node",
            SKYLESS_CLOUD="aws",
            SKYLESS_AWS_METADATA_URL=api.url,
            SKYLESS_METADATA_POLL_SECONDS="0.2",
        )
        _wait_for(lambda: "running" in api.phases())
        assert agent.poll() is None
        api.metadata_notice = json.dumps({"action": "terminate", "time": "2026-01-01T00:02:00Z"})
        agent.communicate(timeout=30)

    preempting = [s for s in api.statuses if s["phase"] == "preempting"]
    assert len(preempting) == 1 and "terminate" in preempting[0]["message"]
    assert "succeeded" not in api.phases() and "failed" not in api.phases()


def test_cancel_in_a_status_answer_stops_the_task_without_reporting_a_result(
    bucket: tuple[Any, str], tmp_path: Path
):
    s3, name = bucket
    job = "j-" + uuid.uuid4().hex[:6]
    home = tmp_path / "node"
    run = "trap 'echo stopped > ../stopped; exit 0' TERM; while :; do sleep 0.1; done"
    with AgentProtocolServer(_config(s3, name, job, run=run, setup=None), not_ready_times=0) as api:
        api.fail_next_status = 0
        api.cancel_after = "running"  # the next heartbeat learns the job was cancelled
        agent = _start_agent(api.url, job, home)
        agent.communicate(timeout=30)

    assert (home / "stopped").read_text().strip() == "stopped"
    assert api.phases() == ["setting_up", "running"]


def test_sigterm_while_waiting_for_the_config_exits_without_a_report(bucket: tuple[Any, str], tmp_path: Path):
    """Before its config the agent holds only the boot token, which opens nothing but that config: the
    notice is not reported (the cloud's preemption event and the reconcile sweep see the node go)."""
    s3, name = bucket
    job = "j-" + uuid.uuid4().hex[:6]
    config = _config(s3, name, job, run="echo never", setup=None)
    with AgentProtocolServer(config, not_ready_times=10**6) as api:
        api.fail_next_status = 0
        agent = _start_agent(api.url, job, tmp_path / "node")
        _wait_for(lambda: len(api.config_requests) >= 2)
        os.kill(agent.pid, signal.SIGTERM)
        agent.communicate(timeout=30)
    assert api.phases() == [] and api.unauthorized == 0
    assert not (tmp_path / "node" / "sky_workdir").exists()
