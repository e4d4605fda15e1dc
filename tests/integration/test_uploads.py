"""A task file uploaded under tasks/ runs: S3 (moto's server) -> the submit queue -> the submit handler."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from conftest import QueueDriver

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from functions.submit.handler import handler as submit_handler
from shared.config import Settings
from shared.errors import UserError
from shared.jobs.agent_reports import AgentReport, report_agent_status
from shared.jobs.job_listing import list_jobs
from shared.jobs.views import get_job
from shared.store.users import create_user
from shared.uploads import intake as uploads
from shared.uploads.intake import UploadRejection, check_task_runs, uploads_in
from shared.wiring import wiring_for

EVENTS = Path(__file__).resolve().parents[1] / "events"
SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])
TASK = """
name: nightly
resources:
  cloud: aws
  cpus: 2+
envs:
  EPOCHS: "1"
run: python train.py --epochs $EPOCHS
"""
BAD_TASK = """
name: nightly
resources:
  cloud: aws
  cpuz: 2+
run: python train.py
"""


@pytest.fixture(autouse=True)
def sleeping_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)


UPLOADERS = ("u-alice", "u-bob", "u-carol", "u-dan", "u-erin", "u-fay", "u-local")


@pytest.fixture(autouse=True)
def uploaders(stack: Settings) -> None:
    """The users these tests upload as: a key prefix must name a user the users table holds."""
    for user_id in UPLOADERS:
        create_user(user_id.removeprefix("u-"), stack, user_id=user_id)


def s3(settings: Settings) -> Any:
    return boto3.client("s3", endpoint_url=settings.endpoint_url, region_name=settings.region)


def upload(settings: Settings, key: str, text: str, **metadata: str) -> None:
    s3(settings).put_object(Bucket=settings.bucket, Key=key, Body=text.encode(), Metadata=metadata)


def deliver_submit(queues: QueueDriver, times: int = 1) -> list[dict[str, Any]]:
    """Every waiting submit-queue message, each delivered `times` times in one batch."""
    records = queues.receive("submit")
    answer = submit_handler(queues.event([r for r in records for _ in range(times)]), None)
    assert answer == {"batchItemFailures": []}
    return records


def deliver(queues: QueueDriver, kind: str) -> None:
    handler = {"optimize": optimize_handler, "provision": provision_handler}[kind]
    assert handler(queues.event(queues.receive(kind)), None) == {"batchItemFailures": []}


def jobs_of(settings: Settings, owner: str) -> list[Any]:
    return list_jobs(wiring_for(settings), owner=owner)


def test_fixture_events_name_their_upload_with_the_key_decoded() -> None:
    event = json.loads((EVENTS / "s3_object_created_task.json").read_text())
    (found,) = uploads_in(event) or []
    assert (found.bucket, found.key, found.etag) == (
        "skyless-artifacts", "tasks/u-alice/nightly train.yaml", "d41d8cd98f00b204e9800998ecf8427e",
    )  # fmt: skip
    assert uploads_in(json.loads((EVENTS / "s3_test_event.json").read_text())) == []
    assert uploads_in({"job_id": "job-1"}) is None


def test_an_upload_under_a_users_prefix_runs_the_task_to_success(
    stack: Settings, queues: QueueDriver
) -> None:
    upload(stack, "tasks/u-alice/nightly.yaml", TASK)
    deliver_submit(queues)  # moto's s3:TestEvent (sent when the notification was set) and the upload
    (job,) = jobs_of(stack, "u-alice")
    assert job.state == "PLANNED" and job.name == "nightly"
    status = json.loads(wiring_for(stack).objects.get_text(f"runs/{job.job_id}/status.json") or "{}")
    assert status["source"]["key"] == "tasks/u-alice/nightly.yaml" and status["state"] == "PLANNED"
    deliver(queues, "optimize")
    deliver(queues, "provision")
    view = get_job(wiring_for(stack), job.job_id, owner="u-alice")
    assert view.state == "SETTING_UP" and view.cluster is not None
    for node in view.cluster["nodes"]:
        for phase, code in (("running", None), ("succeeded", 0)):
            report_agent_status(
                wiring_for(stack), AgentReport(job.job_id, node["instance_id"], phase, exit_code=code)
            )
    assert get_job(wiring_for(stack), job.job_id, owner="u-alice").state == "SUCCEEDED"


def test_the_same_upload_delivered_twice_runs_once_and_a_changed_file_runs_again(
    stack: Settings, queues: QueueDriver
) -> None:
    upload(stack, "tasks/u-bob/a.yaml", TASK)
    records = deliver_submit(queues, times=2)
    submit_handler(queues.event(records), None)  # and once more, later
    assert len(jobs_of(stack, "u-bob")) == 1
    assert len(queues.bodies("provision")) == 1
    upload(stack, "tasks/u-bob/a.yaml", TASK.replace('"1"', '"2"'))
    deliver_submit(queues)
    jobs = jobs_of(stack, "u-bob")
    assert len(jobs) == 2 and len({j.job_id for j in jobs}) == 2
    assert sorted(j.job_number for j in jobs) == [1, 2]  # the redeliveries took no number of their own


def test_a_top_level_upload_runs_as_the_local_user_with_env_from_its_metadata(
    stack: Settings, queues: QueueDriver
) -> None:
    upload(stack, "tasks/one.yml", TASK, **{"skyless-env": '{"EPOCHS": "7"}'})
    deliver_submit(queues)
    (job,) = jobs_of(stack, "u-local")
    stored = wiring_for(stack).store.get(job.job_id)
    assert stored is not None and json.loads(stored.task or "{}")["tasks"][0]["envs"] == {"EPOCHS": "7"}


def test_files_that_are_not_task_files_are_left_alone(stack: Settings, queues: QueueDriver) -> None:
    upload(stack, "tasks/notes.txt", "hello")
    upload(stack, "uploads/u-dan/x.yaml", TASK)
    deliver_submit(queues)
    assert queues.bodies("provision") == []


def test_a_malformed_upload_gets_the_plan_error_beside_it_a_record_and_a_notification(
    stack: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    told: list[UploadRejection] = []
    monkeypatch.setattr(uploads, "REJECTION_HOOKS", [lambda settings, rejection: told.append(rejection)])
    upload(stack, "tasks/u-erin/bad.yaml", BAD_TASK)
    deliver_submit(queues, times=2)
    report = json.loads(
        s3(stack).get_object(Bucket=stack.bucket, Key="tasks/u-erin/bad.yaml.error.json")["Body"].read()
    )
    with pytest.raises(UserError) as expected:  # what `skyless plan` says about the same file
        check_task_runs(BAD_TASK, filename="tasks/u-erin/bad.yaml", env={})
    assert {k: report[k] for k in expected.value.to_dict()} == expected.value.to_dict()
    assert report["line"] == 5 and report["field"] and "cpus" in json.dumps(report)
    assert report["key"] == "tasks/u-erin/bad.yaml" and report["etag"]
    assert told and told[0].owner == "u-erin" and told[0].report_key.endswith(".error.json")
    (note,) = wiring_for(stack).store.timeline("upload#tasks/u-erin/bad.yaml")  # delivered twice, noted once
    assert note.kind == "upload_rejected" and len(told) == 1
    assert jobs_of(stack, "u-erin") == [] and queues.bodies("provision") == []
    deliver_submit(queues)  # the report itself (.error.json) does not trigger anything
    upload(stack, "tasks/u-erin/bad.yaml", TASK)  # fixed: it runs, and the stale report goes
    deliver_submit(queues)
    assert len(jobs_of(stack, "u-erin")) == 1
    listed = s3(stack).list_objects_v2(Bucket=stack.bucket, Prefix="tasks/u-erin/")["Contents"]
    assert [o["Key"] for o in listed] == ["tasks/u-erin/bad.yaml"]


def test_a_task_nothing_can_run_is_rejected_like_skyless_plan(stack: Settings, queues: QueueDriver) -> None:
    upload(stack, "tasks/u-fay/huge.yaml", "resources:\n  accelerators: H100:4096\nrun: echo\n")
    deliver_submit(queues)
    got = s3(stack).get_object(Bucket=stack.bucket, Key="tasks/u-fay/huge.yaml.error.json")["Body"].read()
    assert json.loads(got)["error"] == "NoOfferingError"


def test_without_a_default_owner_a_top_level_file_must_name_its_owner(
    stack: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKYLESS_UPLOAD_OWNER", "")  # as the SAM template sets it
    upload(stack, "tasks/whose.yaml", TASK)
    deliver_submit(queues)
    got = s3(stack).get_object(Bucket=stack.bucket, Key="tasks/whose.yaml.error.json")["Body"].read()
    report = json.loads(got)
    assert "runs as the user its key names" in report["message"]
    assert "tasks/<your user id>/whose.yaml" in report["hint"]
    assert queues.bodies("provision") == []
