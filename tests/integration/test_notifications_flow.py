"""Timeline → events stream (moto) → notify handler → a real local Slack webhook; SES read back from moto."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from conftest import sent_mail
from fakes.slack_webhook import SlackWebhook

from functions.notify.handler import handler
from local_runtime.events_stream import EventsStreamReader
from shared.config import Settings
from shared.notifications.settings import store_job_override, update_user_settings
from shared.states import JobState
from shared.store.jobs import DynamoJobStore as JobStore

OWNER = "user-alice"


@pytest.fixture
def webhook() -> Iterator[SlackWebhook]:
    server = SlackWebhook().start()
    yield server
    server.stop()


def new_job(store: JobStore, job_id: str = "job-0000000000a1") -> Any:
    job = store.jobs(
        job_id=job_id, owner=OWNER, name="train", state=JobState.PENDING.value, version=0, attempt=0,
        token_hash="-",
    )  # fmt: skip
    assert store.create(job, "submitted task.yaml")
    return job


def walk(store: JobStore, job: Any, *states: JobState, message: str = "moved") -> None:
    for to in states:
        assert store.move(job, to, message)


def deliver(settings: Settings, reader: EventsStreamReader) -> list[dict[str, Any]]:
    records = reader.poll()
    result = handler({"Records": records}, None)
    assert result == {"batchItemFailures": []}
    return records


def mail_to(endpoint: str, address: str) -> list[dict[str, Any]]:
    return [m for m in sent_mail(endpoint) if address in m["destinations"]["ToAddresses"]]


def stack_tables(settings: Settings) -> list[str]:
    """This test's tables (one moto serves every test: more than a page of tables)."""
    dynamodb = boto3.client("dynamodb", endpoint_url=settings.endpoint_url, region_name=settings.region)
    pages = dynamodb.get_paginator("list_tables").paginate()
    return [name for page in pages for name in page["TableNames"] if name.startswith(f"{settings.prefix}-")]


def notify_events(store: JobStore, job_id: str) -> list[Any]:
    return [e for e in store.timeline(job_id) if e.kind == "notify"]


S = JobState
TO_RUNNING = (S.PLANNED, S.PROVISIONING, S.SETTING_UP, S.RUNNING)


def test_preemption_recovery_and_success_reach_slack_and_email_once(
    stack: Settings, webhook: SlackWebhook, moto_endpoint: str
) -> None:
    address = f"alice-{stack.prefix}@example.com"
    update_user_settings(stack, OWNER, slack_webhook=webhook.url, email=address)
    store = JobStore(stack)
    reader = EventsStreamReader(stack)
    job = new_job(store)
    walk(store, job, *TO_RUNNING)
    walk(store, job, S.RECOVERING, message="node rank 0 was preempted")
    walk(store, job, *TO_RUNNING)
    walk(store, job, S.SUCCEEDED, message="every node succeeded")
    records = deliver(stack, reader)

    headers = [post["text"] for post in webhook.posts]
    assert headers == [
        "skyless: train was preempted; recovering",
        "skyless: train recovered and is running again",
        "skyless: train succeeded",
    ]
    section_text = str(webhook.posts[0]["blocks"])
    assert "node rank 0 was preempted" in section_text and "skyless logs job-0000000000a1" in section_text
    mails = mail_to(moto_endpoint, address)
    assert [m["subject"] for m in mails] == headers
    assert "skyless logs job-0000000000a1" in mails[-1]["body"]
    recorded = notify_events(store, job.job_id)
    assert len(recorded) == 6 and all(e.detail["status"] == "sent" for e in recorded)

    handler({"Records": records}, None)  # the same stream batch delivered again
    deliver(stack, reader)  # and the notify events themselves come round on the stream
    assert len(webhook.posts) == 3 and len(mail_to(moto_endpoint, address)) == 3
    assert len(notify_events(store, job.job_id)) == 6


def test_429_then_200_is_delivered_once_and_recorded(stack: Settings, webhook: SlackWebhook) -> None:
    update_user_settings(stack, OWNER, slack_webhook=webhook.url)
    webhook.fail_first(429, retry_after="0")
    store = JobStore(stack)
    reader = EventsStreamReader(stack)
    job = new_job(store)
    walk(store, job, *TO_RUNNING, S.SUCCEEDED)
    deliver(stack, reader)
    assert webhook.attempts == 2 and len(webhook.posts) == 1
    (event,) = notify_events(store, job.job_id)
    assert event.detail["status"] == "sent" and event.detail["attempts"] == 2


def test_a_dead_webhook_is_recorded_failed_and_the_job_is_unaffected(
    stack: Settings, webhook: SlackWebhook, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKYLESS_NOTIFY_BACKOFF_SECONDS", "0")
    update_user_settings(stack, OWNER, slack_webhook=webhook.url)
    webhook.fail_first(500, times=100)
    store = JobStore(stack)
    reader = EventsStreamReader(stack)
    job = new_job(store)
    walk(store, job, *TO_RUNNING)
    assert store.move(job, S.FAILED, "rank 0 exited with 3", changes={"reason": "rank 0 exited with 3"})
    deliver(stack, reader)
    (event,) = notify_events(store, job.job_id)
    assert event.detail["status"] == "failed" and event.detail["attempts"] == 4
    assert "500" in event.detail["error"]
    assert store.get(job.job_id).state == "FAILED"  # type: ignore[union-attr]


def test_no_capacity_notifies_on_first_wait_and_on_the_final_failure(
    stack: Settings, moto_endpoint: str
) -> None:
    address = f"nocap-{stack.prefix}@example.com"
    update_user_settings(stack, OWNER, email=address)
    store = JobStore(stack)
    reader = EventsStreamReader(stack)
    job = new_job(store)
    walk(store, job, S.PLANNED, S.PROVISIONING, S.WAITING, S.PROVISIONING, S.WAITING, S.PROVISIONING)
    reason = "no capacity anywhere after 3 rounds (aws/us-east-1a: no capacity)"
    assert store.move(job, S.FAILED_NO_RESOURCE, reason, changes={"reason": reason})
    deliver(stack, reader)
    subjects = [m["subject"] for m in mail_to(moto_endpoint, address)]
    assert subjects == ["skyless: train found no capacity anywhere"] * 2


def test_topics_filter_and_a_job_override_replaces_the_users_channels(
    stack: Settings, webhook: SlackWebhook, moto_endpoint: str
) -> None:
    update_user_settings(stack, OWNER, email=f"user-{stack.prefix}@example.com", topics=["failed"])
    store = JobStore(stack)
    reader = EventsStreamReader(stack)
    quiet = new_job(store, "job-0000000000b1")
    walk(store, quiet, *TO_RUNNING, S.SUCCEEDED)  # "succeeded" is not among the user's topics
    loud = new_job(store, "job-0000000000b2")
    override = f"job-{stack.prefix}@example.com"
    store_job_override(stack, loud.job_id, slack_webhook=webhook.url, email=override)
    walk(store, loud, *TO_RUNNING)
    assert store.move(loud, S.FAILED, "rank 0 exited with 1")
    deliver(stack, reader)
    assert mail_to(moto_endpoint, f"user-{stack.prefix}@example.com") == []
    assert [m["subject"] for m in mail_to(moto_endpoint, override)] == ["skyless: train failed"]
    assert len(webhook.posts) == 1


def test_nothing_configured_sends_nothing(stack: Settings, moto_endpoint: str) -> None:
    before = len(sent_mail(moto_endpoint))
    store = JobStore(stack)
    job = new_job(store)
    walk(store, job, *TO_RUNNING, S.SUCCEEDED)
    deliver(stack, EventsStreamReader(stack))
    assert len(sent_mail(moto_endpoint)) == before
    assert notify_events(store, job.job_id) == []


def test_the_webhook_url_is_in_no_table_only_in_secrets_manager(
    stack: Settings, webhook: SlackWebhook
) -> None:
    update_user_settings(stack, OWNER, slack_webhook=webhook.url, email="a@example.com")
    store = JobStore(stack)
    job = new_job(store)
    store_job_override(stack, job.job_id, slack_webhook=webhook.url + "?job", email=None)
    walk(store, job, *TO_RUNNING, S.SUCCEEDED)
    deliver(stack, EventsStreamReader(stack))
    assert len(webhook.posts) == 1
    tables = stack_tables(stack)
    assert f"{stack.prefix}-notifications" in tables
    dynamodb = boto3.client("dynamodb", endpoint_url=stack.endpoint_url, region_name=stack.region)
    for table in tables:
        items = dynamodb.scan(TableName=table)["Items"]
        assert "XXXXsecretXXXX" not in str(items), table
    secrets = boto3.client("secretsmanager", endpoint_url=stack.endpoint_url, region_name=stack.region)
    pages = secrets.get_paginator("list_secrets").paginate()
    listed = [x["Name"] for page in pages for x in page["SecretList"]]
    names = [name for name in listed if name.startswith(f"{stack.prefix}/")]
    assert len(names) == 2


def test_stream_records_of_other_writes_are_ignored(stack: Settings) -> None:
    event = {"Records": [{"eventName": "REMOVE", "dynamodb": {"SequenceNumber": "1"}},
                         {"eventName": "INSERT", "dynamodb": {"SequenceNumber": "2", "NewImage": {
                             "job_id": {"S": "reaper-marks"}, "at": {"S": "x"}}}}]}  # fmt: skip
    assert handler(event, None) == {"batchItemFailures": []}


def test_the_local_dispatcher_reads_the_stream_and_notifies(stack: Settings, webhook: SlackWebhook) -> None:
    from local_runtime.dispatcher import Dispatcher

    update_user_settings(stack, OWNER, slack_webhook=webhook.url)
    store = JobStore(stack)
    job = new_job(store)
    dispatcher = Dispatcher(stack, schedules={}, pollers_per_queue=1)
    dispatcher.start()
    try:
        walk(store, job, *TO_RUNNING, S.SUCCEEDED)
        deadline = time.monotonic() + 20
        while not webhook.posts and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        dispatcher.stop()
    assert [post["text"] for post in webhook.posts] == ["skyless: train succeeded"]


def test_a_rejected_upload_notifies_its_owner_through_the_timeline(
    stack: Settings, webhook: SlackWebhook, moto_endpoint: str
) -> None:
    from shared.errors import TaskFileError
    from shared.uploads.intake import Upload, reject

    update_user_settings(stack, OWNER, slack_webhook=webhook.url)
    reader = EventsStreamReader(stack)
    upload = Upload(bucket=stack.bucket, key="tasks/bad.yaml", etag="abc123")
    reject(
        stack, upload, OWNER, TaskFileError("unknown field 'rn'", file="tasks/bad.yaml", line=3, field="rn")
    )
    records = deliver(stack, reader)
    handler({"Records": records}, None)  # delivered twice: still one post
    (post,) = webhook.posts
    assert post["text"] == "skyless: tasks/bad.yaml was rejected"
    text = str(post["blocks"])
    assert "unknown field 'rn'" in text and "tasks/bad.yaml.error.json" in text and "skyless plan" in text
    (event,) = notify_events(JobStore(stack), "upload#tasks/bad.yaml")
    assert event.detail["status"] == "sent"
