"""The node's side of bucket mounts: requests signed as AWS signs them, a bucket prefix pulled before setup
and written back (changes and deletions), a single object copied as a file, and the agent as a real process
writing back on a preemption notice *before* it reports `preempting`, and at the end before `succeeded`,
with the bucket at the absolute path the task names (a private mount namespace on the local cloud)."""

from __future__ import annotations

import signal
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from test_agent import TOKEN, AgentProtocolServer, _config, _start_agent, _wait_for

from node_agent.agent.buckets import BucketMirror, sigv4_headers
from shared.storage.backends import S3Backend


@pytest.fixture
def backend(moto_endpoint: str) -> S3Backend:
    role = "arn:aws:iam::123456789012:role/t-storage"
    return S3Backend("local", "us-east-1", moto_endpoint, node_endpoint=moto_endpoint, role_arn=role)


def _entry(backend: S3Backend, bucket: str, prefix: str = "", mode: str = "MOUNT_CACHED", path: str = "/c"):
    access = backend.node_access(bucket, prefix, read_only=mode == "COPY", session="test-session")
    return {"path": path, "mode": mode, "store": "s3", "bucket": bucket, "prefix": prefix,
            "write_back": mode != "COPY", **access}  # fmt: skip


def _objects(s3: Any, bucket: str) -> dict[str, bytes]:
    listed = s3.list_objects_v2(Bucket=bucket).get("Contents", [])
    return {o["Key"]: s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read() for o in listed}


@pytest.mark.parametrize(
    "url",
    [
        "https://my-bucket.s3.eu-west-1.amazonaws.com/ckpt/a%20b.pt",
        "http://127.0.0.1:5566/my-bucket/?list-type=2&prefix=ckpt%2F&continuation-token=a%2Bb%3D",
    ],
)
def test_requests_are_signed_exactly_as_botocore_signs_them(url: str, monkeypatch: pytest.MonkeyPatch):
    import datetime

    creds = {"access_key_id": "ASIAEXAMPLE", "secret_access_key": "secret/key", "session_token": "tok=="}
    moment = datetime.datetime(2026, 11, 23, 12, 34, 56)
    monkeypatch.setattr("botocore.auth.get_current_datetime", lambda: moment)
    request = AWSRequest(method="GET", url=url, headers={})
    request.context["client_config"] = Config(s3={"payload_signing_enabled": False})
    S3SigV4Auth(Credentials("ASIAEXAMPLE", "secret/key", "tok=="), "s3", "eu-west-1").add_auth(request)

    ours = sigv4_headers("GET", url, "eu-west-1", creds, amz_date="20261123T123456Z")

    assert ours["Authorization"] == request.headers["Authorization"]


def test_a_prefix_is_pulled_then_changes_and_deletions_are_written_back(backend, tmp_path: Path):
    s3 = boto3.client("s3", endpoint_url=backend.endpoint_url)
    bucket = f"b-{uuid.uuid4().hex[:8]}"
    backend.create(bucket)
    s3.put_object(Bucket=bucket, Key="run1/step", Body=b"4\n")
    s3.put_object(Bucket=bucket, Key="run1/old/ckpt.pt", Body=b"old")
    s3.put_object(Bucket=bucket, Key="run10/other", Body=b"not under run1/")

    mirror = BucketMirror(_entry(backend, bucket, "run1"), tmp_path / "c")
    assert mirror.pull() == 2
    assert (tmp_path / "c" / "step").read_text() == "4\n" and not (tmp_path / "c" / "other").exists()
    assert mirror.push() == 0  # nothing changed

    (tmp_path / "c" / "step").write_text("5\n")
    (tmp_path / "c" / "old" / "ckpt.pt").unlink()
    (tmp_path / "c" / "new").mkdir()
    (tmp_path / "c" / "new" / "ckpt.pt").write_bytes(b"\x00" * 70_000)
    assert mirror.push() == 3

    assert _objects(s3, bucket) == {"run1/step": b"5\n", "run1/new/ckpt.pt": b"\x00" * 70_000,
                                    "run10/other": b"not under run1/"}  # fmt: skip


def test_one_object_copied_lands_as_that_file_and_a_copy_writes_nothing_back(backend, tmp_path: Path):
    s3 = boto3.client("s3", endpoint_url=backend.endpoint_url)
    bucket = f"b-{uuid.uuid4().hex[:8]}"
    backend.create(bucket)
    s3.put_object(Bucket=bucket, Key="models/weights.bin", Body=b"weights")

    mirror = BucketMirror(_entry(backend, bucket, "models/weights.bin", mode="COPY"), tmp_path / "w.bin")
    assert mirror.pull() == 1
    assert (tmp_path / "w.bin").read_bytes() == b"weights"
    (tmp_path / "w.bin").write_bytes(b"changed")
    assert mirror.push() == 0 and _objects(s3, bucket) == {"models/weights.bin": b"weights"}


def _agent_with_bucket(
    s3: Any, backend: S3Backend, run: str, setup: str | None = None
) -> tuple[dict, str, str]:
    logs, job = f"logs-{uuid.uuid4().hex[:8]}", f"job-{uuid.uuid4().hex[:8]}"
    bucket = f"ckpt-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=logs)
    backend.create(bucket)
    s3.put_object(Bucket=bucket, Key=f"{job}/step", Body=b"7\n")
    config = _config(s3, logs, job, run=run, setup=setup)
    config["storage"] = [_entry(backend, bucket, job, path="/ckpt")]
    return config, job, bucket


def test_preemption_notice_writes_back_before_the_node_reports_preempting(backend, tmp_path: Path):
    s3 = boto3.client("s3", endpoint_url=backend.endpoint_url)
    run = (
        "step=$(cat /ckpt/step); trap 'echo \"$step\" > /ckpt/step; echo saved $step; exit 0' TERM\n"
        "while true; do step=$((step + 1)); echo $step > /ckpt/step; sleep 0.05; done\n"
    )
    config, job, bucket = _agent_with_bucket(s3, backend, run)
    bucket_when_preempting: list[bytes] = []

    with AgentProtocolServer(config, not_ready_times=0) as api:
        api.on_status = lambda status: (
            status["phase"] == "preempting"
            and bucket_when_preempting.append(s3.get_object(Bucket=bucket, Key=f"{job}/step")["Body"].read())
        )
        agent = _start_agent(api.url, job, tmp_path / "node", SKYLESS_STORAGE_SYNC_SECONDS="60")
        _wait_for(lambda: "running" in api.phases())
        _wait_for(lambda: int((tmp_path / "node" / "ckpt" / "step").read_text() or 0) > 20)
        agent.send_signal(signal.SIGTERM)
        agent.wait(30)

    final = (tmp_path / "node" / "ckpt" / "step").read_bytes()
    assert api.phases() == ["setting_up", "running", "preempting"]
    assert bucket_when_preempting == [final] and int(final) > 20  # the last step, before letting go
    assert api.unauthorized == 0 and TOKEN


def test_the_task_sees_the_bucket_at_its_absolute_path_and_the_end_writes_back_before_succeeded(
    backend, tmp_path: Path
):
    s3 = boto3.client("s3", endpoint_url=backend.endpoint_url)
    run = "read s < /ckpt/step; echo $((s + 1)) > /ckpt/step; rm -f /ckpt/x\n"
    config, job, bucket = _agent_with_bucket(s3, backend, run, setup="echo from-setup > /ckpt/setup.txt")
    s3.put_object(Bucket=bucket, Key=f"{job}/x", Body=b"to delete")
    bucket_when_done: list[dict] = []

    with AgentProtocolServer(config, not_ready_times=0) as api:
        api.on_status = lambda status: (
            status["phase"] == "succeeded" and bucket_when_done.append(_objects(s3, bucket))
        )
        agent = _start_agent(api.url, job, tmp_path / "node", SKYLESS_STORAGE_SYNC_SECONDS="60")
        assert agent.wait(60) == 0, agent.stderr.read().decode()

    assert api.phases() == ["setting_up", "running", "succeeded"]
    assert bucket_when_done == [{f"{job}/step": b"8\n", f"{job}/setup.txt": b"from-setup\n"}]
    assert not Path("/ckpt").exists()  # the host never saw the task's /ckpt
