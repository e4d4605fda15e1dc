"""The upload intake (shared/uploads/intake.py) over the wiring's object store, without an endpoint: the
bucket is tests/chaos/memory_objects.py, the events are S3's notification shape
(tests/events/s3_object_created_task.json) naming what was put. tests/integration/test_uploads.py drives the
same through moto's S3 notifications."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import pytest

from shared.config import Settings
from shared.uploads.intake import submit_uploads
from shared.wiring import wiring_for

EVENTS = Path(__file__).resolve().parents[1] / "events"
TASK = "name: nightly\nresources:\n  cloud: aws\n  cpus: 2+\nrun: echo hi\n"


@pytest.fixture(autouse=True)
def known_users(monkeypatch: pytest.MonkeyPatch) -> None:
    """The users table, which the memory stack has not: tests/integration/test_upload_owners.py reads
    the real one."""
    monkeypatch.setattr("shared.store.users.user_exists", lambda user_id, settings: user_id in USERS)


USERS = {"u-alice", "u-erin", "u-fay"}


def put(settings: Settings, key: str, text: str, **metadata: str) -> dict[str, Any]:
    """Put the object and answer the S3 event notification for it."""
    objects: Any = wiring_for(settings).objects
    etag = objects.put_object(key, text, metadata)
    event = copy.deepcopy(json.loads((EVENTS / "s3_object_created_task.json").read_text()))
    s3 = event["Records"][0]["s3"]
    s3["bucket"]["name"] = settings.bucket
    s3["object"].update(key=quote_plus(key), eTag=etag, size=len(text))
    return event


def report_of(settings: Settings, key: str) -> dict[str, Any] | None:
    text = wiring_for(settings).objects.get_text(key + ".error.json")
    return json.loads(text) if text is not None else None


def test_an_upload_is_submitted_once_and_a_redelivery_finds_its_job(stack: Settings) -> None:
    event = put(stack, "tasks/u-alice/nightly.yaml", TASK, **{"skyless-env": '{"EPOCHS": "3"}'})
    first = submit_uploads(stack, event)
    assert first.rejected == [] and len(first.submitted) == 1
    job = wiring_for(stack).store.get(first.submitted[0])
    assert job is not None and (job.owner, job.source, job.source_ref) == (
        "u-alice", "upload", "tasks/u-alice/nightly.yaml",
    )  # fmt: skip
    assert submit_uploads(stack, event).submitted == first.submitted
    assert [j.job_id for j in wiring_for(stack).store.jobs_of("u-alice")] == first.submitted


def test_a_bad_file_gets_its_report_once_and_a_fixed_version_removes_it(stack: Settings) -> None:
    key = "tasks/u-erin/bad.yaml"
    bad = put(stack, key, "run: [unclosed\n")
    assert submit_uploads(stack, bad).rejected == [key]
    report = report_of(stack, key)
    assert report is not None and report["file"] == key and report["bucket"] == stack.bucket
    assert submit_uploads(stack, bad).rejected == [key]  # a re-delivery: no second note
    notes = [e for e in wiring_for(stack).store.timeline(f"upload#{key}") if e.kind == "upload_rejected"]
    assert len(notes) == 1
    fixed = put(stack, key, TASK)
    assert len(submit_uploads(stack, fixed).submitted) == 1
    assert report_of(stack, key) is None


def test_an_event_about_overwritten_bytes_or_another_bucket_runs_nothing(stack: Settings) -> None:
    stale = put(stack, "tasks/u-fay/a.yaml", TASK)
    put(stack, "tasks/u-fay/a.yaml", TASK.replace("echo hi", "echo bye"))
    assert submit_uploads(stack, stale).ignored == ["tasks/u-fay/a.yaml"]
    elsewhere = put(stack, "tasks/u-fay/b.yaml", TASK)
    elsewhere["Records"][0]["s3"]["bucket"]["name"] = "someone-elses-bucket"
    assert submit_uploads(stack, elsewhere).ignored == ["tasks/u-fay/b.yaml"]
    assert wiring_for(stack).store.jobs_of("u-fay") == []
