"""An upload runs only as the user its key names (`tasks/<user id>/...`), checked against the users table;
no metadata changes that, and a key naming nobody gets a report beside the file. Two users, alice and bob,
try to run as each other: real S3 puts on moto's server, its event notifications to the submit queue, and
the submit handler given the SQS event Lambda would pass."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from conftest import QueueDriver
from test_uploads import TASK, deliver_submit, s3, upload

from shared.config import Settings
from shared.jobs.job_listing import list_jobs
from shared.store.users import create_user, find_user, revoke_key, user_exists
from shared.uploads import intake
from shared.uploads.intake import UploadRejection
from shared.wiring import wiring_for

HF = "hf_PLANTEDaliceSECRET0123456789"
SECRET_TASK = TASK + "secrets:\n  HF_TOKEN: null\n"


@pytest.fixture
def people(stack: Settings) -> dict[str, str]:
    """user id of alice and bob (as an admin makes them: ids are drawn, not chosen)."""
    ids = {}
    for name in ("alice", "bob"):
        user = find_user(create_user(name, stack), stack)
        assert user is not None
        ids[name] = user.user_id
    return ids


@pytest.fixture
def told(monkeypatch: pytest.MonkeyPatch) -> list[UploadRejection]:
    rejections: list[UploadRejection] = []
    monkeypatch.setattr(intake, "REJECTION_HOOKS", [lambda settings, rejection: rejections.append(rejection)])
    return rejections


def report_of(settings: Settings, key: str) -> dict[str, Any]:
    return json.loads(s3(settings).get_object(Bucket=settings.bucket, Key=key + ".error.json")["Body"].read())


def jobs(settings: Settings, owner: str) -> list[Any]:
    return list_jobs(wiring_for(settings), owner=owner)


def test_an_upload_runs_as_the_user_its_key_names(
    stack: Settings, queues: QueueDriver, people: dict[str, str]
) -> None:
    upload(stack, f"tasks/{people['bob']}/train.yaml", TASK)
    deliver_submit(queues)
    (job,) = jobs(stack, people["bob"])
    assert job.source_ref == f"tasks/{people['bob']}/train.yaml"
    assert jobs(stack, people["alice"]) == []


def test_metadata_naming_another_user_is_refused_never_obeyed(
    stack: Settings, queues: QueueDriver, people: dict[str, str], told: list[UploadRejection]
) -> None:
    alice, bob = people["alice"], people["bob"]
    secrets = boto3.client("secretsmanager", endpoint_url=stack.endpoint_url, region_name=stack.region)
    secrets.create_secret(
        Name=f"{stack.prefix}/uploads/{alice}/hf", SecretString=json.dumps({"HF_TOKEN": HF})
    )
    claims = {
        f"tasks/{bob}/as-alice.yaml": {"skyless-owner": alice},  # bob's own prefix, alice claimed
        f"tasks/{bob}/with-her-secret.yaml": {"skyless-owner": alice, "skyless-secrets": "hf"},
    }
    for key, metadata in claims.items():
        upload(stack, key, SECRET_TASK if "secret" in key else TASK, **metadata)
    deliver_submit(queues, times=2)  # and every event delivered twice

    for key in claims:
        report = report_of(stack, key)
        assert report["field"] == "x-amz-meta-skyless-owner" and "metadata cannot change" in report["message"]
        assert HF not in json.dumps(report)
    assert jobs(stack, alice) == [] and jobs(stack, bob) == []
    assert queues.bodies("provision") == [] and len(told) == len(claims)  # told once each, twice delivered


def test_a_top_level_file_is_nobodys_on_a_deployed_stack_whatever_its_metadata_says(
    stack: Settings,
    queues: QueueDriver,
    people: dict[str, str],
    told: list[UploadRejection],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SKYLESS_UPLOAD_OWNER", "")  # as the SAM template sets it
    upload(stack, "tasks/as-alice.yaml", TASK, **{"skyless-owner": people["alice"]})
    deliver_submit(queues)
    report = report_of(stack, "tasks/as-alice.yaml")
    assert "runs as the user its key names" in report["message"]
    assert report["hint"] == "upload it as tasks/<your user id>/as-alice.yaml"
    assert jobs(stack, people["alice"]) == [] and [r.owner for r in told] == [""]


@pytest.mark.parametrize("prefix", ["u-nobody", "alice", "", "x" * 300])
def test_a_key_naming_no_user_is_refused_with_a_report_beside_it(
    stack: Settings, queues: QueueDriver, people: dict[str, str], told: list[UploadRejection], prefix: str
) -> None:
    key = f"tasks/{prefix}/train.yaml"
    upload(stack, key, TASK, **{"skyless-owner": people["alice"]})
    deliver_submit(queues)
    report = report_of(stack, key)
    assert report["file"] == key and (
        "no skyless user" in report["message"] or "whose task" in report["message"]
    )
    assert report["error"] == "UserError" and report["etag"]
    (note,) = wiring_for(stack).store.timeline(f"upload#{key}")
    assert note.kind == "upload_rejected"
    assert [r.owner for r in told] == [""]  # nobody to notify: not alice, whom the metadata named
    assert jobs(stack, people["alice"]) == [] and jobs(stack, prefix or "u-nobody") == []


def test_a_user_whose_keys_are_all_revoked_can_no_longer_run_uploads(
    stack: Settings, queues: QueueDriver
) -> None:
    key = create_user("carol", stack, user_id="u-carol")
    upload(stack, "tasks/u-carol/one.yaml", TASK)
    deliver_submit(queues)
    assert len(jobs(stack, "u-carol")) == 1
    assert revoke_key(key, stack)
    upload(stack, "tasks/u-carol/two.yaml", TASK)
    deliver_submit(queues)
    assert "no skyless user" in report_of(stack, "tasks/u-carol/two.yaml")["message"]
    assert len(jobs(stack, "u-carol")) == 1


def test_whether_a_user_exists_reads_one_item_of_the_user_id_index(stack: Settings) -> None:
    for index in range(300):  # a team's worth of keys
        create_user(f"user{index}", stack, user_id=f"u-{index:04d}")
    create_user("second key", stack, user_id="u-0007")
    dynamodb = boto3.client("dynamodb", endpoint_url=stack.endpoint_url, region_name=stack.region)
    answer = dynamodb.query(
        TableName=stack.table_name("users"),
        IndexName="user-id-index",
        KeyConditionExpression="user_id = :u",
        ExpressionAttributeValues={":u": {"S": "u-0007"}},
        Limit=1,
        ReturnConsumedCapacity="TOTAL",
    )
    assert answer["Count"] == 1 and answer["ScannedCount"] == 1  # what user_exists asks
    assert user_exists("u-0007", stack) and user_exists("u-0299", stack)
    assert not user_exists("u-0300", stack) and not user_exists("", stack)


def test_a_users_table_made_before_the_index_is_still_answered(stack: Settings) -> None:
    """An older local runtime's saved state has the table without the index."""
    old = Settings(prefix=stack.prefix + "old", endpoint_url=stack.endpoint_url, region=stack.region)
    dynamodb = boto3.client("dynamodb", endpoint_url=stack.endpoint_url, region_name=stack.region)
    dynamodb.create_table(
        TableName=old.table_name("users"),
        AttributeDefinitions=[{"AttributeName": "key_hash", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "key_hash", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    create_user("dora", old, user_id="u-dora")
    assert user_exists("u-dora", old) and not user_exists("u-eve", old)
