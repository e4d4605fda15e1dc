"""`--deadline` as a user gives it: `POST /jobs` through the Chalice app, `skyless launch | status | plan`
through typer's CliRunner against the API on a local port, and an upload's metadata."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from chalice.test import Client
from typer.testing import CliRunner, Result

from cli.main import app as cli
from functions.submit.app import app
from shared.config import Settings
from shared.store.users import create_user
from shared.uploads.intake import Upload, UploadOutcome, submit_upload
from shared.wiring import wiring_for

WIDE = {"COLUMNS": "200"}
TASK = "name: deadline-demo\nresources:\n  cpus: 1+\n  use_spot: true\nrun: echo hi\n"


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=WIDE)


@pytest.fixture
def client(stack: Settings) -> Iterator[Client]:
    with Client(app) as chalice_client:
        yield chalice_client


def test_post_jobs_refuses_an_impossible_deadline_with_a_400_naming_the_field(
    stack: Settings, client: Client
):
    headers = {"Authorization": f"Bearer {create_user('alice', stack)}", "Content-Type": "application/json"}
    body = {"task": TASK, "deadline": "2h", "hours": 3}
    answer = client.http.post("/jobs", headers=headers, body=json.dumps(body).encode())
    assert answer.status_code == 400
    assert answer.json_body["field"] == "deadline"
    assert "cannot be met even on on-demand" in answer.json_body["message"]
    no_hours = client.http.post("/jobs", headers=headers, body=json.dumps({"task": TASK, "deadline": "2h"}))
    assert no_hours.status_code == 400 and no_hours.json_body["field"] == "hours"
    negative = client.http.post("/jobs", headers=headers, body=json.dumps({"task": TASK, "hours": -1}))
    assert negative.status_code == 422 and negative.json_body["field"] == "hours"
    fine = client.http.post("/jobs", headers=headers, body=json.dumps({**body, "hours": 1}).encode())
    assert fine.status_code == 201


def test_launch_with_an_impossible_deadline_is_a_clear_error_without_a_traceback(
    tmp_path: Path, cli_api: list[str]
) -> None:
    path = tmp_path / "task.yaml"
    path.write_text(TASK)
    result = _run("launch", str(path), "--deadline", "30m", "--hours", "1", "--detach", *cli_api)
    assert result.exit_code == 2
    assert "cannot be met even on on-demand" in result.output and "late" in result.output
    assert "Traceback" not in result.output


def test_launch_with_a_deadline_then_status_shows_deadline_work_slack_market_and_why(
    stack: Settings, tmp_path: Path, cli_api: list[str]
) -> None:
    path = tmp_path / "task.yaml"
    path.write_text(TASK)
    # An absolute deadline (the ISO form), always three days ahead of the clock this runs by.
    deadline = datetime.fromtimestamp(time.time() + 3 * 86400, UTC).replace(second=0, microsecond=0)
    when = deadline.strftime("%Y-%m-%dT%H:%MZ")
    launched = _run("launch", str(path), "--deadline", when, "--hours", "2", "-d", *cli_api)
    assert launched.exit_code == 0, launched.output
    assert "SkyPilot has none" in launched.output
    job_id = launched.output.split("Job ", 1)[1].split()[0]
    job = wiring_for(stack).store.get(job_id)
    assert job is not None and job.work_seconds == 7200 and job.deadline_at is not None
    status = _run("status", job_id, *cli_api)
    assert status.exit_code == 0, status.output
    assert f"deadline: {deadline:%Y-%m-%dT%H:%M:%SZ}" in status.output
    assert (
        "work done: 0.00 of 2 h" in status.output
        and "slack:" in status.output
        and "market: -" in status.output
    )


def test_plan_with_a_deadline_prints_the_expected_cost_against_all_on_demand(tmp_path: Path) -> None:
    path = tmp_path / "task.yaml"
    path.write_text(TASK)
    result = _run("plan", str(path), "--deadline", "36h", "--hours", "10")
    assert result.exit_code == 0, result.output
    assert "expected $" in result.output and "of all on-demand" in result.output
    assert "SkyPilot's fixed spot recovery" in result.output
    as_json = _run("plan", str(path), "--deadline", "36h", "--hours", "10", "--json")
    estimate = json.loads(as_json.output)["deadline"]
    assert 0 < estimate["ratio"] < 1 and estimate["expected_cost"] < estimate["on_demand_cost"]
    impossible = _run("plan", str(path), "--deadline", "5h", "--hours", "10")
    assert impossible.exit_code == 2 and "cannot be met" in impossible.output


def test_an_upload_with_deadline_metadata_is_a_deadline_job_and_a_bad_one_names_the_header(
    stack: Settings,
) -> None:
    from shared.aws.sessions import aws_client
    from shared.store.users import create_user

    create_user("alice", stack, user_id="u-alice")  # whom the key prefix names
    objects = {
        "tasks/u-alice/ok.yaml": {"skyless-deadline": "12h", "skyless-hours": "3"},
        "tasks/u-alice/late.yaml": {"skyless-deadline": "1h", "skyless-hours": "3"},
        "tasks/u-alice/nan.yaml": {"skyless-deadline": "1h", "skyless-hours": "lots"},
    }
    s3 = aws_client("s3", stack)
    outcome = UploadOutcome()
    for key, metadata in objects.items():  # uploaded as a user would, x-amz-meta-* headers and all
        etag = s3.put_object(Bucket=stack.bucket, Key=key, Body=TASK.encode(), Metadata=metadata)["ETag"]
        submit_upload(stack, Upload(bucket=stack.bucket, key=key, etag=etag.strip('"')), outcome)
    assert outcome.rejected == ["tasks/u-alice/late.yaml", "tasks/u-alice/nan.yaml"]
    [job_id] = outcome.submitted
    job = wiring_for(stack).store.get(job_id)
    assert job is not None and job.work_seconds == 3 * 3600
    reports = {
        key: json.loads(s3.get_object(Bucket=stack.bucket, Key=key + ".error.json")["Body"].read())
        for key in ("tasks/u-alice/late.yaml", "tasks/u-alice/nan.yaml")
    }
    assert reports["tasks/u-alice/late.yaml"]["field"] == "x-amz-meta-skyless-deadline"
    assert reports["tasks/u-alice/nan.yaml"]["field"] == "x-amz-meta-skyless-hours"
