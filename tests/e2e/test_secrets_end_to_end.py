"""Secrets through the running local runtime, as a user gives them: `skyless schedule create --secret` (a
subprocess) fires on the runtime's own clock, and a file copied into the bucket names a secret of the user's;
each node's task sees the value (it prints its digest), and no table, printed output, log or file holds it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from test_uploads_end_to_end import Daemon

SCHEDULED = "hf_PLANTEDe2eScheduleSECRET0123"
UPLOADED = "hf_PLANTEDe2eUploadSECRET456789"
TASK = """name: {name}
resources:
  cpus: 1+
secrets:
  HF_TOKEN: null
run: printf 'digest %s\\n' "$(printf %s "$HF_TOKEN" | sha256sum | cut -d' ' -f1)"
"""


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    running = Daemon(tmp_path_factory.mktemp("skyless-home"))
    running.up()
    yield running
    running.cli("local", "down")


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def finished(daemon: Daemon, name: str) -> Any:
    def find() -> dict[str, Any] | None:
        jobs = daemon.api.get("/jobs").json()["jobs"]
        done = [j for j in jobs if j["name"] == name and j["state"] in ("SUCCEEDED", "FAILED")]
        return done[0] if done else None

    return find


def shipped_logs(daemon: Daemon, job_id: str) -> Any:
    def find() -> str | None:
        text: str = daemon.api.get(f"/jobs/{job_id}/logs").json()["text"]
        return text if "digest" in text else None

    return find


def files_holding(root: Path, value: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and value.encode() in p.read_bytes()]


def test_scheduled_and_uploaded_secrets_reach_the_node_and_nothing_else(
    daemon: Daemon, tmp_path: Path
) -> None:
    info = json.loads((daemon.home / "local" / "runtime.json").read_text())
    aws = {"endpoint_url": info["aws_endpoint_url"], "region_name": "us-east-1",
           "aws_access_key_id": "any", "aws_secret_access_key": "any"}  # fmt: skip
    boto3.client("secretsmanager", **aws).create_secret(
        Name="skyless/uploads/u-local/hf", SecretString=json.dumps({"HF_TOKEN": UPLOADED})
    )
    body = TASK.format(name="uploaded").encode()
    daemon.s3.put_object(
        Bucket="skyless-artifacts", Key="tasks/uploaded.yaml", Body=body, Metadata={"skyless-secrets": "hf"}
    )
    task = tmp_path / "scheduled.yaml"
    task.write_text(TASK.format(name="scheduled"))
    created = daemon.cli("schedule", "create", "tick", str(task), "--cron", "* * * * *",
                         "--secret", f"HF_TOKEN={SCHEDULED}")  # fmt: skip
    assert created.returncode == 0, created.stdout + created.stderr

    uploaded = daemon.poll(finished(daemon, "uploaded"), timeout=60)
    scheduled = daemon.poll(finished(daemon, "scheduled"), timeout=90)  # the next minute, then the run

    for job, value in ((uploaded, UPLOADED), (scheduled, SCHEDULED)):
        assert job["state"] == "SUCCEEDED", job
        logs = daemon.poll(shipped_logs(daemon, job["job_id"]), timeout=30)
        assert f"digest {digest(value)}" in logs and value not in logs
    shown = daemon.cli("schedule", "show", "tick")
    listed = daemon.cli("schedule", "list")
    assert "HF_TOKEN" in shown.stdout
    dynamodb = boto3.client("dynamodb", **aws)
    tables = [n for n in dynamodb.list_tables()["TableNames"] if n.startswith("skyless-")]
    items = json.dumps([dynamodb.scan(TableName=n)["Items"] for n in tables], default=str)
    assert len(tables) >= 4
    for value in (UPLOADED, SCHEDULED):
        for text in (created.stdout, created.stderr, shown.stdout, listed.stdout, items):
            assert value not in text
        assert value not in (daemon.home / "local" / "runtime.log").read_text()

    assert daemon.cli("schedule", "delete", "tick").returncode == 0
    assert daemon.cli("local", "down").returncode == 0  # the snapshot is written, sealed
    assert files_holding(daemon.home, SCHEDULED) == [] and files_holding(daemon.home, UPLOADED) == []
