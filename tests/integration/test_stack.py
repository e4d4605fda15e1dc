from __future__ import annotations

import boto3

from shared.config import QUEUE_KINDS, Settings
from shared.stack import create_stack


def test_stack_creates_tables_queues_with_dlq_and_bucket(stack: Settings) -> None:
    dynamodb = boto3.client("dynamodb", endpoint_url=stack.endpoint_url)
    pages = dynamodb.get_paginator("list_tables").paginate()  # one moto serves every test: over 100 tables
    tables = [name for page in pages for name in page["TableNames"]]
    for kind in ("jobs", "clusters", "events", "notifications"):
        assert stack.table_name(kind) in tables
    sqs = boto3.client("sqs", endpoint_url=stack.endpoint_url)
    for kind in ("optimize", "provision", "spot_watch"):
        url = sqs.get_queue_url(QueueName=stack.queue_name(kind))["QueueUrl"]
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])["Attributes"]
        assert f"{stack.queue_name(kind)}-dlq" in attributes["RedrivePolicy"]
    s3 = boto3.client("s3", endpoint_url=stack.endpoint_url)
    assert stack.bucket in [b["Name"] for b in s3.list_buckets()["Buckets"]]


def test_creating_the_stack_twice_changes_nothing(stack: Settings) -> None:
    create_stack(stack)
    sqs = boto3.client("sqs", endpoint_url=stack.endpoint_url)
    names = [u.rsplit("/", 1)[1] for u in sqs.list_queues(QueueNamePrefix=stack.prefix)["QueueUrls"]]
    assert sorted(names) == sorted(
        [stack.queue_name(k) for k in QUEUE_KINDS] + [f"{stack.queue_name(k)}-dlq" for k in QUEUE_KINDS]
    )


def test_spot_warning_put_on_the_default_bus_reaches_the_spot_watch_queue(stack: Settings) -> None:
    events = boto3.client("events", endpoint_url=stack.endpoint_url)
    events.put_events(
        Entries=[
            {
                "Source": "skyless.local",
                "DetailType": "EC2 Spot Instance Interruption Warning",
                "Detail": '{"instance-id": "i-123", "instance-action": "terminate"}',
            }
        ]
    )
    sqs = boto3.client("sqs", endpoint_url=stack.endpoint_url)
    url = sqs.get_queue_url(QueueName=stack.queue_name("spot_watch"))["QueueUrl"]
    messages = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages", [])
    assert messages and "i-123" in messages[0]["Body"]
