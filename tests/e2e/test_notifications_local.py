"""The issue's "done when", for real: with the local runtime up, a user sets Slack and email once, copies a
task file into the bucket with a plain S3 client, and hears back on both when it finishes; a bad file too."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from conftest import sent_mail
from fakes.slack_webhook import SlackWebhook
from test_end_to_end_local import ROOT, Runtime


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    rt = Runtime(tmp_path_factory.mktemp("skyless-home"))
    rt.env["SKYLESS_NOTIFY_BACKOFF_SECONDS"] = "0.1"
    rt.up()
    yield rt
    rt.cli("local", "down")


@pytest.fixture
def webhook() -> Iterator[SlackWebhook]:
    server = SlackWebhook().start()
    yield server
    server.stop()


def _aws(runtime: Runtime, service: str) -> Any:
    return boto3.client(service, endpoint_url=_endpoint(runtime), region_name="us-east-1",
                        aws_access_key_id="skyless-local", aws_secret_access_key="skyless-local")  # fmt: skip


def _endpoint(runtime: Runtime) -> str:
    return json.loads((runtime.home / "local" / "runtime.json").read_text())["aws_endpoint_url"]


def _wait_for(condition: Any, what: str, runtime: Runtime, timeout: float = 150) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    jobs = runtime.api.get("/jobs").json()
    raise AssertionError(f"never saw {what}; jobs: {jobs}\n{runtime.log()}")


def test_an_uploaded_task_that_finishes_sends_slack_and_email(
    runtime: Runtime, webhook: SlackWebhook
) -> None:
    answer = runtime.api.put("/notifications", json={"slack_webhook": webhook.url, "email": "me@example.com"})
    assert answer.status_code == 200, answer.text
    assert "XXXXsecretXXXX" not in answer.text

    s3 = _aws(runtime, "s3")
    (bucket,) = [b["Name"] for b in s3.list_buckets()["Buckets"] if b["Name"].endswith("-artifacts")]
    s3.put_object(Bucket=bucket, Key="tasks/hello.yaml", Body=(ROOT / "examples" / "hello.yaml").read_bytes())
    _wait_for(
        lambda: any("succeeded" in p["text"] for p in webhook.posts), "a Slack post for success", runtime
    )

    (post,) = [p for p in webhook.posts if "succeeded" in p["text"]]
    assert post["text"] == "skyless: hello succeeded"
    job_id = str(post["blocks"]).split("skyless logs ", 1)[1].split("`")[0]
    assert runtime.job(job_id)["state"] == "SUCCEEDED"
    mail = sent_mail(_endpoint(runtime))
    assert [m["subject"] for m in mail if "me@example.com" in m["destinations"]["ToAddresses"]] == [
        "skyless: hello succeeded"
    ]
    timeline = runtime.job(job_id)["timeline"]
    sent = [e for e in timeline if e["kind"] == "notify"]
    assert sorted(e["detail"]["channel"] for e in sent) == ["email", "slack"]
    assert "XXXXsecretXXXX" not in str(timeline) and "XXXXsecretXXXX" not in runtime.log()

    s3.put_object(Bucket=bucket, Key="tasks/broken.yaml", Body=b"name: broken\nrn: echo typo\n")
    _wait_for(
        lambda: any("rejected" in p["text"] for p in webhook.posts), "a Slack post for the bad file", runtime
    )
