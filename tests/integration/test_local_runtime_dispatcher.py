"""The dispatcher delivers SQS batches in Lambda's event shape and honours partial batch responses."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from local_runtime.dispatcher import QueueWorker, failed_message_ids, scheduled_event
from shared.config import Settings


def _queue(stack: Settings, kind: str) -> tuple[Any, str]:
    sqs = boto3.client("sqs", endpoint_url=stack.endpoint_url, region_name=stack.region)
    return sqs, sqs.get_queue_url(QueueName=stack.queue_name(kind))["QueueUrl"]


def _depth(sqs: Any, url: str) -> tuple[int, int]:
    attrs = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]), int(attrs["ApproximateNumberOfMessagesNotVisible"])


def test_batch_arrives_as_lambda_sqs_event_and_only_successes_are_deleted(stack: Settings):
    sqs, url = _queue(stack, "optimize")
    origin = {"origin": {"DataType": "String", "StringValue": "test"}}
    for attempt in range(3):
        body = json.dumps({"job_id": f"j{attempt}", "attempt": 0})
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=origin)
    seen: list[dict[str, Any]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        seen.extend(event["Records"])
        assert context.get_remaining_time_in_millis() > 0
        failing = [r["messageId"] for r in event["Records"] if json.loads(r["body"])["job_id"] == "j1"]
        return {"batchItemFailures": [{"itemIdentifier": m} for m in failing]}

    worker = QueueWorker(stack, "optimize", handler)
    received = 0
    while received < 3:
        received += worker.poll_once(wait_seconds=1)

    record = seen[0]
    assert record["eventSource"] == "aws:sqs"
    assert record["eventSourceARN"].endswith(f":{stack.queue_name('optimize')}")
    assert record["awsRegion"] == stack.region
    assert {"messageId", "receiptHandle", "body", "attributes", "md5OfBody"} <= set(record)
    assert record["attributes"]["ApproximateReceiveCount"] == "1"
    assert record["messageAttributes"]["origin"] == {
        "stringValue": "test",
        "binaryValue": None,
        "stringListValues": [],
        "binaryListValues": [],
        "dataType": "String",
    }
    assert (worker.delivered, worker.failed) == (2, 1)
    assert _depth(sqs, url) == (0, 1)  # the failed one waits out its visibility timeout, then comes back


def test_failed_message_is_redelivered_after_its_visibility_timeout(stack: Settings):
    sqs, url = _queue(stack, "provision")
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"job_id": "j", "attempt": 1, "action": "launch"}))
    counts: list[str] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        record = event["Records"][0]
        counts.append(record["attributes"]["ApproximateReceiveCount"])
        if len(counts) == 1:
            # What SQS does when the visibility timeout runs out, without waiting two minutes for it.
            sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=record["receiptHandle"],
                                          VisibilityTimeout=0)  # fmt: skip
            return {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
        return {"batchItemFailures": []}

    worker = QueueWorker(stack, "provision", handler)
    while len(counts) < 2:
        worker.poll_once(wait_seconds=1)
    assert counts == ["1", "2"]
    assert _depth(sqs, url) == (0, 0)


def test_a_handler_that_raises_leaves_the_whole_batch_for_redelivery(stack: Settings):
    sqs, url = _queue(stack, "spot_watch")
    sqs.send_message(QueueUrl=url, MessageBody="{}")
    sqs.send_message(QueueUrl=url, MessageBody="{}")

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        raise RuntimeError("boom")

    worker = QueueWorker(stack, "spot_watch", handler)
    received = 0
    while received < 2:
        received += worker.poll_once(wait_seconds=1)
    assert worker.delivered == 0 and worker.failed == 2
    assert _depth(sqs, url) == (0, 2)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (None, set()),
        ({"batchItemFailures": []}, set()),
        ({"batchItemFailures": [{"itemIdentifier": "m1"}]}, {"m1"}),
        ({"batchItemFailures": [{"wrong": "m1"}]}, None),
        ("not a dict", None),
    ],
)
def test_partial_batch_answers_are_read_like_lambda_reads_them(answer: Any, expected: set[str] | None):
    assert failed_message_ids(answer) == expected


def test_scheduled_event_has_eventbridge_schedule_shape():
    from datetime import UTC, datetime

    event = scheduled_event("skyless-reconcile", "us-east-1", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert event["detail-type"] == "Scheduled Event" and event["source"] == "aws.events"
    assert event["time"] == "2026-01-02T03:04:05Z"
    assert event["resources"] == ["arn:aws:events:us-east-1:123456789012:rule/skyless-reconcile"]


def test_schedule_tick_runs_the_real_reconcile_handler_with_a_scheduled_event(stack: Settings):
    from local_runtime.dispatcher import SCHEDULED_HANDLERS, Dispatcher

    dispatcher = Dispatcher(stack, schedules={})
    module, every = SCHEDULED_HANDLERS["reconcile"]
    assert every == 60.0
    dispatcher.schedule_runs["reconcile"] = 0
    dispatcher.fire("reconcile", module)
    assert dispatcher.schedule_runs["reconcile"] == 1  # the handler accepted the event and did not raise
