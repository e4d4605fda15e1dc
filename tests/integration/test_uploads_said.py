"""What an upload's status.json and .error.json say, as `plan` and `launch` do: fields read but not
acted on, the line an optimizer error comes from, and the task-file size limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import QueueDriver
from test_uploads import deliver_submit, jobs_of, s3, upload

from shared.config import Settings
from shared.store.users import create_user
from shared.task.limits import MAX_TASK_FILE_BYTES
from shared.wiring import wiring_for

FILES = Path(__file__).resolve().parents[1] / "fixtures" / "semantics"


@pytest.fixture(autouse=True)
def uploaders(stack: Settings) -> None:
    """The users these tests upload as: a key prefix must name a user the users table holds."""
    for user_id in ("u-gil", "u-hal", "u-ivy"):
        create_user(user_id.removeprefix("u-"), stack, user_id=user_id)


def report(settings: Settings, key: str) -> dict:
    return json.loads(s3(settings).get_object(Bucket=settings.bucket, Key=key + ".error.json")["Body"].read())


def test_a_submitted_upload_says_in_its_status_which_fields_have_no_effect(
    stack: Settings, queues: QueueDriver
) -> None:
    upload(stack, "tasks/u-gil/ignored.yaml", (FILES / "every_ignored_field.yaml").read_text())
    deliver_submit(queues)
    (job,) = jobs_of(stack, "u-gil")
    status = json.loads(wiring_for(stack).objects.get_text(f"runs/{job.job_id}/status.json") or "{}")
    fields = [note.split(": ")[1] for note in status["notes"]]
    assert fields[:3] == ["event_callback", "config", "volumes"] and "resources.disk_tier" in fields


def test_a_rejected_upload_names_the_line_of_the_field_and_still_says_the_notes(
    stack: Settings, queues: QueueDriver
) -> None:
    text = (FILES / "too_cheap.yaml").read_text() + "event_callback: echo done\n"
    upload(stack, "tasks/u-hal/cheap.yaml", text)
    deliver_submit(queues)
    got = report(stack, "tasks/u-hal/cheap.yaml")
    assert (got["error"], got["line"], got["field"]) == ("NoOfferingError", 4, "resources.max_hourly_cost")
    assert any(note.startswith("too-cheap: event_callback: read,") for note in got["notes"])


def test_an_upload_over_the_size_limit_is_refused_naming_the_limit(
    stack: Settings, queues: QueueDriver
) -> None:
    upload(
        stack, "tasks/u-ivy/big.yaml", "run: |\n" + "  echo 0123456789abcdef\n" * (MAX_TASK_FILE_BYTES // 20)
    )
    deliver_submit(queues)
    got = report(stack, "tasks/u-ivy/big.yaml")
    assert got["file"] == "tasks/u-ivy/big.yaml" and "256 KiB" in got["message"]
    assert jobs_of(stack, "u-ivy") == []
