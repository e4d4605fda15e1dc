"""Buckets skyless creates for checkpoints get the deployment's lifecycle rule (S3
PutBucketLifecycleConfiguration, read back from moto); buckets it did not create are never touched; and
their storage cost (listed GB x the store's $/GB-month) reaches `cost-report`."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from shared.config import Settings
from shared.storage.lifecycle import prepare_job_storage
from shared.store.tenancy import Grant, put_grant
from shared.task.loader import load_pipeline


def _task(mounts: str) -> Any:
    return load_pipeline(f"resources:\n  cpus: 1+\nfile_mounts:\n{mounts}run: ls\n").tasks[0]


def _job(owner: str = "u-a") -> Any:
    return SimpleNamespace(job_id=f"job-{uuid.uuid4().hex[:12]}", owner=owner, attempt=0)


def _rules(stack: Settings, bucket: str) -> list[dict[str, Any]] | None:
    s3 = boto3.client("s3", endpoint_url=stack.endpoint_url)
    try:
        return s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    except ClientError as error:
        assert error.response["Error"]["Code"] == "NoSuchLifecycleConfiguration"
        return None


def test_a_bucket_skyless_creates_gets_the_deployments_expiry_and_an_existing_one_is_left_alone(
    stack: Settings, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("SKYLESS_CHECKPOINT_EXPIRE_DAYS", "7")
    made, existing = (f"{kind}-{uuid.uuid4().hex[:8]}" for kind in ("ckpt", "theirs"))
    boto3.client("s3", endpoint_url=stack.endpoint_url).create_bucket(Bucket=existing)
    put_grant(stack, Grant(existing, "user:u-a", "", write=True))
    task = _task(f"  /ckpt:\n    name: {made}\n    mode: MOUNT_CACHED\n  /old:\n    name: {existing}\n")
    job = _job()

    first = prepare_job_storage(stack, job, task, "aws")
    again = prepare_job_storage(stack, job, task, "aws")  # the next attempt: the rule is set again, quietly

    assert f"bucket s3://{made}: objects expire 7 days after they are written" in first
    assert not any("expire" in note for note in again)
    [rule] = _rules(stack, made) or []
    assert (rule["Status"], rule["Expiration"], rule["Filter"]) == ("Enabled", {"Days": 7}, {"Prefix": ""})
    assert rule["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 1}
    assert _rules(stack, existing) is None  # not skyless's: never given a rule


def test_without_a_configured_expiry_no_rule_is_set(stack: Settings):
    made = f"ckpt-{uuid.uuid4().hex[:8]}"
    notes = prepare_job_storage(stack, _job(), _task(f"  /ckpt:\n    name: {made}\n"), "aws")
    assert _rules(stack, made) is None and not any("expire" in note for note in notes)


def test_a_negative_expiry_is_a_config_error_naming_the_variable(monkeypatch: pytest.MonkeyPatch):
    from shared.config.channels import StorageConfig
    from shared.config.environment import ConfigError

    with pytest.raises(ConfigError, match="SKYLESS_CHECKPOINT_EXPIRE_DAYS"):
        StorageConfig.from_env({"SKYLESS_CHECKPOINT_EXPIRE_DAYS": "-1"})


def test_cost_report_shows_what_the_buckets_skyless_made_cost_to_keep_and_only_the_owners(
    stack: Settings, cli_api: list[str]
):
    import json
    import time

    from chalice.test import Client

    from functions.submit.app import app
    from shared.storage.registry import buckets_model
    from shared.store.users import create_user

    made, granted = (f"{kind}-{uuid.uuid4().hex[:8]}" for kind in ("ckpt", "data"))
    boto3.client("s3", endpoint_url=stack.endpoint_url).create_bucket(Bucket=granted)
    put_grant(stack, Grant(granted, "user:u-alice", "", write=True))
    task = _task(f"  /ckpt:\n    name: {made}\n  /data:\n    name: {granted}\n")
    prepare_job_storage(stack, _job("u-alice"), task, "aws")
    s3 = boto3.client("s3", endpoint_url=stack.endpoint_url)
    for i in range(3):
        s3.put_object(Bucket=made, Key=f"step-{i}", Body=b"z" * 2_000_000)
        s3.put_object(Bucket=granted, Key=f"big-{i}", Body=b"z" * 2_000_000)  # the user's own bill
    model = buckets_model(stack)
    model(bucket=made).update(actions=[model.created_at.set(time.time() - 30 * 86400)])  # made a month ago

    def report(name: str) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {create_user(name, stack, user_id=f'u-{name}')}"}
        with Client(app) as client:
            answer = client.http.get("/costs?days=7", headers=headers)
        assert answer.status_code == 200, answer.body
        return json.loads(answer.body)

    alice, bob = report("alice"), report("bob")

    [row] = alice["storage"]
    assert (row["bucket"], row["store"], row["complete"]) == (made, "s3", True)
    assert row["gigabytes"] == pytest.approx(0.006) and row["days"] == pytest.approx(7, abs=0.01)
    assert row["cost"] == pytest.approx(0.006 * 0.023 * 7 / 30.44, abs=1e-6)  # USD, to the micro-dollar
    assert alice["storage_cost"] == pytest.approx(row["cost"])
    assert bob["storage"] == [] and bob["storage_cost"] == 0.0
    from typer.testing import CliRunner

    from cli.main import app as cli

    key = create_user("alice", stack, user_id="u-alice")
    typed = CliRunner().invoke(cli, ["cost-report", "--days", "7", *cli_api[:2], "--api-key", key],
                               env={"COLUMNS": "200"})  # fmt: skip
    assert typed.exit_code == 0, typed.output
    assert "Buckets skyless created" in typed.output and made in typed.output and granted not in typed.output


def test_the_last_n_objects_per_prefix_are_kept_in_skylesss_buckets_only_and_only_by_their_owner(
    stack: Settings, monkeypatch: pytest.MonkeyPatch
):
    import time

    from shared.storage.lifecycle import release_job_storage

    monkeypatch.setenv("SKYLESS_CHECKPOINT_KEEP_LAST", "2")
    made, theirs = (f"{kind}-{uuid.uuid4().hex[:8]}" for kind in ("ckpt", "theirs"))
    s3 = boto3.client("s3", endpoint_url=stack.endpoint_url)
    s3.create_bucket(Bucket=theirs)
    put_grant(stack, Grant(theirs, "user:u-a", "", write=True))
    task = _task(f"  /ckpt:\n    name: {made}\n  /theirs:\n    name: {theirs}\n")
    job = _job("u-a")
    prepare_job_storage(stack, job, task, "aws")
    put_grant(stack, Grant(made, "user:u-b", "", write=True))  # alice's bucket, shared with bob
    for step in (9, 8, 7):  # written oldest first, named against time: the newest is the smallest name
        for prefix in ("run/a", "run/b"):
            s3.put_object(Bucket=made, Key=f"{prefix}/step-{step}", Body=b"w")
        s3.put_object(Bucket=theirs, Key=f"run/step-{step}", Body=b"w")
        time.sleep(1.1)
    s3.put_object(Bucket=made, Key="log.txt", Body=b"l")

    def keys(bucket: str) -> set[str]:
        return {o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])}

    assert release_job_storage(stack, _job("u-b"), [task]) == []  # bob's job (a grant) trims nothing
    assert len(keys(made)) == 7
    notes = release_job_storage(stack, job, [task])
    again = release_job_storage(stack, job, [task])  # the end delivered twice

    assert (
        notes == [f"bucket s3://{made}: 2 older object(s) deleted, the last 2 per prefix kept"]
        and again == []
    )
    assert keys(made) == {"run/a/step-8", "run/a/step-7", "run/b/step-8", "run/b/step-7", "log.txt"}
    assert keys(theirs) == {"run/step-9", "run/step-8", "run/step-7"}  # not skyless's: never trimmed


def test_a_trim_reads_a_bounded_listing_and_never_deletes_one_of_the_newest(stack: Settings):
    import time

    from shared.storage.retention import trim_to_last

    bucket = f"ckpt-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client("s3", endpoint_url=stack.endpoint_url)
    s3.create_bucket(Bucket=bucket)
    for step in range(4):  # step-0 oldest ... step-3 newest; listed in name order
        s3.put_object(Bucket=bucket, Key=f"run/step-{step}", Body=b"w")
        time.sleep(1.1)

    assert trim_to_last(s3, bucket, 1, max_listed=2) == 1  # saw step-0 and step-1 only
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == [
        "run/step-1", "run/step-2", "run/step-3"]  # fmt: skip
