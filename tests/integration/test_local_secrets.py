"""The local runtime keeps secrets like secrets: folders 0700, files 0600, and no task secret or webhook
URL in clear text in its snapshot (sealed with a 0600 key beside it), yet all of them survive a restart."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

import boto3
import httpx
import pytest

from local_runtime import ensure_local_runtime, stop_local_runtime
from local_runtime.snapshot_cipher import KEY_FILE
from local_runtime.state_snapshot import restore_snapshot, save_snapshot
from shared.aws.sessions import aws_client
from shared.config import Settings
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.task_records import secrets_of
from shared.notifications.settings import channels_for, update_user_settings
from shared.wiring import wiring_for

TASK_SECRET = "hf_PLANTEDtaskSECRETvalue0123456789"
WEBHOOK_SECRET = "PLANTEDwebhookSECRET9876"
WEBHOOK = f"https://hooks.slack.com/services/T0/B0/{WEBHOOK_SECRET}"
TASK = f"name: secretive\nresources:\n  cpus: 2+\nsecrets:\n  HF_TOKEN: {TASK_SECRET}\nrun: echo hi\n"


def encodings(value: str) -> list[bytes]:
    """The value as it could appear in a file: raw, and inside base64 at each of the three alignments."""
    raw = value.encode()
    return [raw] + [base64.b64encode(b"x" * shift + raw)[4:-4] for shift in range(3)]


def files_holding(root: Path, value: str) -> list[str]:
    needles = encodings(value)
    return [str(p) for p in root.rglob("*") if p.is_file() and any(n in p.read_bytes() for n in needles)]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def plant_secrets(stack: Settings) -> str:
    job = submit_job(
        wiring_for(stack), SubmitJob.from_text(owner="u-alice", task_text=TASK, filename="secretive.yaml")
    )
    update_user_settings(stack, "u-alice", slack_webhook=WEBHOOK)
    return job.job_id


def test_the_snapshot_holds_no_secret_in_clear_text_and_is_owner_only(stack: Settings) -> None:
    job_id = plant_secrets(stack)
    path = stack.local_dir / "state.json"

    save_snapshot(stack, path)

    assert files_holding(stack.home, TASK_SECRET) == []
    assert files_holding(stack.home, WEBHOOK_SECRET) == []
    assert set(json.loads(path.read_text())) == {"version", "prefix", "taken_at", "sealed"}
    assert mode(path) == 0o600 and mode(stack.local_dir / KEY_FILE) == 0o600
    assert mode(stack.local_dir) == 0o700
    assert secrets_of(wiring_for(stack), wiring_for(stack).store.get(job_id), 0) == {"HF_TOKEN": TASK_SECRET}


def test_sealed_secrets_come_back_after_a_restore(stack: Settings) -> None:
    job_id = plant_secrets(stack)
    path = stack.local_dir / "state.json"
    save_snapshot(stack, path)
    aws_client("s3", stack).delete_object(Bucket=stack.bucket, Key=f"runs/{job_id}/secrets.json")
    sm = aws_client("secretsmanager", stack)
    for entry in sm.list_secrets()["SecretList"]:
        if entry["Name"].startswith(f"{stack.prefix}/"):
            sm.delete_secret(SecretId=entry["Name"], ForceDeleteWithoutRecovery=True)
    assert channels_for(stack, "u-alice", None).slack_webhook is None

    restored = restore_snapshot(stack, path)

    assert restored["secrets"] == 1 and restored["objects"] >= 1
    assert channels_for(stack, "u-alice", None).slack_webhook == WEBHOOK
    assert secrets_of(wiring_for(stack), wiring_for(stack).store.get(job_id), 0) == {"HF_TOKEN": TASK_SECRET}


def test_a_snapshot_whose_key_is_gone_is_kept_aside_not_restored_or_overwritten(stack: Settings) -> None:
    plant_secrets(stack)
    path = stack.local_dir / "state.json"
    save_snapshot(stack, path)
    (stack.local_dir / KEY_FILE).unlink()

    assert restore_snapshot(stack, path) == {"items": 0, "objects": 0, "messages": 0, "secrets": 0}
    assert not path.exists() and (stack.local_dir / "state.json.unreadable").exists()


def test_a_clear_snapshot_of_an_earlier_version_is_still_restored(stack: Settings) -> None:
    path = stack.local_dir / "state.json"
    key = "runs/job-0123456789ab/status.json"
    old = {"version": 1, "taken_at": 0, "prefix": stack.prefix, "tables": {}, "queues": {},
           "objects": {key: base64.b64encode(b'{"state": "RUNNING"}').decode()}}  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(old))

    assert restore_snapshot(stack, path)["objects"] == 1
    assert (
        aws_client("s3", stack).get_object(Bucket=stack.bucket, Key=key)["Body"].read()
        == b'{"state": "RUNNING"}'
    )


def test_a_running_local_runtime_keeps_its_home_private_and_its_snapshot_sealed(local_home: Path) -> None:
    info = ensure_local_runtime()
    api = httpx.Client(base_url=info.api_url, headers={"Authorization": f"Bearer {info.api_key}"}, timeout=60)
    submitted = api.post("/jobs", json={"task": TASK, "filename": "secretive.yaml", "env": {}})
    assert submitted.status_code == 201, submitted.text
    assert api.put("/notifications", json={"slack_webhook": WEBHOOK}).status_code == 200
    s3 = boto3.client("s3", endpoint_url=info.aws_endpoint_url, region_name="us-east-1",
                      aws_access_key_id="x", aws_secret_access_key="x")  # fmt: skip
    job_id = submitted.json()["job_id"]
    held = s3.get_object(Bucket="skyless-artifacts", Key=f"runs/{job_id}/secrets.json")["Body"].read()
    assert TASK_SECRET.encode() in held  # the state really holds the secret the snapshot must hide

    assert stop_local_runtime(local_home)  # the final snapshot is written at shutdown

    local = local_home / "local"
    assert mode(local_home) == 0o700 and mode(local) == 0o700
    for name in ("state.json", KEY_FILE, "api_key", "agent-secret", "runtime.log"):
        assert mode(local / name) == 0o600, name
    assert files_holding(local_home, TASK_SECRET) == []
    assert files_holding(local_home, WEBHOOK_SECRET) == []


@pytest.mark.parametrize("wide", [0o755, 0o777])
def test_an_existing_home_readable_by_others_is_narrowed_when_the_runtime_starts(
    local_home: Path, wide: int
) -> None:
    (local_home / "local").mkdir(parents=True)
    local_home.chmod(wide)
    (local_home / "local").chmod(wide)
    log = local_home / "local" / "runtime.log"
    log.write_text("an old log\n")
    log.chmod(0o644)

    ensure_local_runtime()

    assert mode(local_home) == 0o700 and mode(local_home / "local") == 0o700
    assert mode(log) == 0o600 and mode(local_home / "local" / "runtime.json") == 0o600
