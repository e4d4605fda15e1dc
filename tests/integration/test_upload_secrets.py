"""An uploaded task file's secrets, by reference: `x-amz-meta-skyless-secrets` names a secret of the owner's
in Secrets Manager (the moto server). Uploads are real S3 puts; moto sends their event notifications to the
submit queue, and the submit handler gets them as the SQS event Lambda would pass."""

from __future__ import annotations

import json
import logging
from typing import Any

import boto3
import pytest
from conftest import QueueDriver
from secret_leaks import holds, objects_holding, table_items_holding

from functions.submit.handler import handler as submit_handler
from shared.config import Settings
from shared.jobs.job_listing import list_jobs
from shared.jobs.task_records import secrets_of
from shared.store.users import create_user
from shared.wiring import wiring_for

HF = "hf_PLANTEDuploadSECRET0123456789"
REFERENCE = "the secret {prefix}/uploads/u-bob/hf named by x-amz-meta-skyless-secrets"
TASK = """name: train
resources:
  cpus: 1+
secrets:
  HF_TOKEN: null
run: echo training
"""


@pytest.fixture(autouse=True)
def uploaders(stack: Settings) -> None:
    """The users these tests upload as: a key prefix must name a user the users table holds."""
    for user_id in ("u-alice", "u-bob", "u-carol", "u-dave", "u-local"):
        create_user(user_id.removeprefix("u-"), stack, user_id=user_id)


def s3(settings: Settings) -> Any:
    return boto3.client("s3", endpoint_url=settings.endpoint_url, region_name=settings.region)


def put_secret(settings: Settings, name: str, text: str) -> None:
    """What the owner does with their own credentials (or `aws secretsmanager create-secret`)."""
    client = boto3.client("secretsmanager", endpoint_url=settings.endpoint_url, region_name=settings.region)
    client.create_secret(Name=f"{settings.prefix}/uploads/{name}", SecretString=text)


def upload(settings: Settings, key: str, text: str = TASK, **metadata: str) -> None:
    s3(settings).put_object(Bucket=settings.bucket, Key=key, Body=text.encode(), Metadata=metadata)


def deliver_submit(queues: QueueDriver, times: int = 1) -> None:
    records = queues.receive("submit")
    answer = submit_handler(queues.event([r for r in records for _ in range(times)]), None)
    assert answer == {"batchItemFailures": []}


def report_of(settings: Settings, key: str) -> dict[str, Any]:
    body = s3(settings).get_object(Bucket=settings.bucket, Key=key + ".error.json")["Body"].read()
    return json.loads(body)  # type: ignore[no-any-return]


def assert_nowhere(settings: Settings, value: str, *texts: str) -> None:
    assert table_items_holding(settings.endpoint_url or "", settings.region, settings.prefix, value) == []
    assert objects_holding(s3(settings), settings.bucket, value) == []
    for text in texts:
        assert not holds(text, value)


def test_an_upload_naming_its_owners_secret_runs_with_its_values_kept_out_of_tables_and_logs(
    stack: Settings, queues: QueueDriver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)  # skyless's own at DEBUG; botocore's DEBUG prints request bodies
    caplog.set_level(logging.DEBUG, logger="skyless")
    put_secret(stack, "u-alice/hf", json.dumps({"HF_TOKEN": HF, "UNUSED": "x"}))

    upload(stack, "tasks/u-alice/train.yaml", **{"skyless-secrets": "hf"})
    deliver_submit(queues, times=2)  # delivered twice: one job

    (job,) = list_jobs(wiring_for(stack), owner="u-alice")
    wiring = wiring_for(stack)
    assert secrets_of(wiring, wiring.store.get(job.job_id), 0) == {"HF_TOKEN": HF}
    head = s3(stack).head_object(Bucket=stack.bucket, Key="tasks/u-alice/train.yaml")
    assert head["Metadata"] == {"skyless-secrets": "hf"}  # a name anyone reading the object may see
    assert_nowhere(stack, HF, caplog.text, json.dumps(head, default=str))


@pytest.mark.parametrize(
    ("secret", "named", "says"),
    [
        (None, "hf", REFERENCE + " does not exist"),
        ('{"OTHER": "x"}', "hf", REFERENCE + " has no 'HF_TOKEN'"),
        (None, None, "has no value"),
    ],
)
def test_a_missing_secret_gets_an_error_report_naming_the_secret_and_the_fields_line(
    stack: Settings, queues: QueueDriver, secret: str | None, named: str | None, says: str
) -> None:
    if secret is not None:
        put_secret(stack, "u-bob/hf", secret)
    upload(stack, "tasks/u-bob/train.yaml", **({"skyless-secrets": named} if named else {}))
    deliver_submit(queues)

    report = report_of(stack, "tasks/u-bob/train.yaml")
    assert report["error"] == "TaskFileError" and report["file"] == "tasks/u-bob/train.yaml"
    assert report["field"] == "secrets.HF_TOKEN" and report["line"] == 5  # `HF_TOKEN: null`
    assert says.format(prefix=stack.prefix) in report["message"], report
    if named is None:
        assert "x-amz-meta-skyless-secrets" in report["hint"]
    assert list_jobs(wiring_for(stack), owner="u-bob") == []


@pytest.mark.parametrize(
    ("key", "metadata", "says"),
    [
        ("tasks/u-carol/train.yaml", {"skyless-secrets": "../u-dave/hf"}, "not a secret name"),
        ("tasks/u-carol/train.yaml", {"skyless-secrets": "raw"}, "is not a JSON object of strings"),
        ("tasks/u-carol/plain.yaml", {"skyless-secrets": "gone"}, "does not exist"),
    ],
)
def test_bad_secret_references_are_reported_naming_the_metadata_never_a_value(
    stack: Settings, queues: QueueDriver, key: str, metadata: dict[str, str], says: str
) -> None:
    put_secret(stack, "u-carol/hf", json.dumps({"HF_TOKEN": HF}))
    put_secret(stack, "u-carol/raw", HF)  # not JSON: the error must not quote it
    put_secret(stack, "u-dave/hf", json.dumps({"HF_TOKEN": HF}))
    text = TASK.replace("  HF_TOKEN: null\n", "  PLAIN: given\n") if "plain" in key else TASK
    upload(stack, key, text, **metadata)
    deliver_submit(queues)

    report = report_of(stack, key)
    assert report["field"] == "x-amz-meta-skyless-secrets" and says in report["message"], report
    assert not holds(json.dumps(report), HF)
    assert (
        list_jobs(wiring_for(stack), owner="u-carol") == []
        and list_jobs(wiring_for(stack), owner="u-dave") == []
    )


def test_the_local_default_owner_may_use_secrets_for_a_top_level_file(
    stack: Settings, queues: QueueDriver
) -> None:
    put_secret(stack, "u-local/hf", json.dumps({"HF_TOKEN": HF}))
    upload(stack, "tasks/train.yaml", **{"skyless-secrets": "hf"})
    deliver_submit(queues)
    (job,) = list_jobs(wiring_for(stack), owner="u-local")
    wiring = wiring_for(stack)
    assert secrets_of(wiring, wiring.store.get(job.job_id), 0) == {"HF_TOKEN": HF}
