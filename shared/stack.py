"""Create the control plane's AWS resources on an AWS-compatible endpoint (moto, or a real account).

Idempotent: running it again on a live stack changes nothing. Used by the tests and the local runtime;
the deployed stack gets the same resources from infra/template.yaml.
"""

from __future__ import annotations

import json

from botocore.exceptions import ClientError

from shared.aws.sessions import aws_client
from shared.config import QUEUE_KINDS, Settings
from shared.store.models import models_for

MAX_MESSAGE_BYTES = 262_144
# Six times the queue's function timeout (infra/template.yaml), as AWS advises for a Lambda event source:
# a batch still being retried inside Lambda must not reappear to a second invocation. The template holds
# the same numbers (tests/test_queue_settings.py checks that they agree); the local dispatcher gets them too.
# The teardown queue feeds the provision function too, through its own event source: no teardown waits
# behind launches.
FUNCTION_TIMEOUT_SECONDS = {"optimize": 60, "provision": 120, "spot_watch": 60, "submit": 60, "teardown": 120}
VISIBILITY_TIMEOUT_SECONDS = {kind: 6 * timeout for kind, timeout in FUNCTION_TIMEOUT_SECONDS.items()}
MAX_RECEIVES_BEFORE_DLQ = 5

SPOT_EVENT_PATTERN = {
    "source": ["aws.ec2"],
    "detail-type": ["EC2 Spot Instance Interruption Warning", "EC2 Instance State-change Notification"],
}
LOCAL_EVENT_PATTERN = {"source": ["skyless.local"]}


def create_stack(settings: Settings) -> dict[str, str]:
    """Tables, queues (each with a DLQ), the bucket, the EventBridge rules, and the notification resources
    (events stream, notifications table, SES sender). Returns queue URLs by kind."""
    _create_tables(settings)
    from shared.store.table_upgrades import upgrade_tables

    upgrade_tables(settings)  # a stack made before the live indexes: its indexes, backfill and TTL
    from shared.jobs.rollup_backfill import backfill_rollups

    backfill_rollups(settings)  # a stack made before cost rollups: its ended attempts' costs (once)
    urls = _create_queues(settings)
    _create_bucket(settings)
    _create_event_rules(settings, urls["spot_watch"])
    _create_task_upload_notifications(settings, urls["submit"])
    from shared.notifications.stack_resources import create_notification_resources  # imports this module

    create_notification_resources(settings)
    return urls


def _create_tables(settings: Settings) -> None:
    for model in models_for(settings).all():
        model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    try:
        from shared.store.users import users_model  # the API's table, owned by the API module
    except ImportError:
        return
    users_model(settings).create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    from shared.store.schedules import schedules_model

    schedules_model(settings).create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    from shared.store.cluster_records import create_cluster_table

    create_cluster_table(settings)
    from shared.storage.registry import buckets_model

    buckets_model(settings).create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    from shared.store.audit import audit_model
    from shared.store.tenancy import tenancy_model

    for model in (tenancy_model(settings), audit_model(settings)):  # teams, grants; the admin audit log
        model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")


def _create_queues(settings: Settings) -> dict[str, str]:
    sqs = aws_client("sqs", settings)
    urls: dict[str, str] = {}
    for kind in QUEUE_KINDS:
        name = settings.queue_name(kind)
        dlq_url = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        attributes = {
            "MaximumMessageSize": str(MAX_MESSAGE_BYTES),
            "VisibilityTimeout": str(VISIBILITY_TIMEOUT_SECONDS[kind]),
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(MAX_RECEIVES_BEFORE_DLQ)}
            ),
        }
        try:
            urls[kind] = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        except ClientError as error:  # a stack made with older settings: bring it up to date
            if error.response["Error"]["Code"] not in ("QueueAlreadyExists", "QueueNameExists"):
                raise
            urls[kind] = sqs.get_queue_url(QueueName=name)["QueueUrl"]
            sqs.set_queue_attributes(QueueUrl=urls[kind], Attributes=attributes)
    return urls


def _create_bucket(settings: Settings) -> None:
    s3 = aws_client("s3", settings)
    try:
        if settings.region == "us-east-1":
            s3.create_bucket(Bucket=settings.bucket)
        else:
            s3.create_bucket(
                Bucket=settings.bucket, CreateBucketConfiguration={"LocationConstraint": settings.region}
            )
    except ClientError as error:
        if error.response["Error"]["Code"] not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise


def _create_event_rules(settings: Settings, spot_watch_url: str) -> None:
    sqs = aws_client("sqs", settings)
    events = aws_client("events", settings)
    queue_arn = sqs.get_queue_attributes(QueueUrl=spot_watch_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    rules = {"spot-events": SPOT_EVENT_PATTERN, "local-events": LOCAL_EVENT_PATTERN}
    for suffix, pattern in rules.items():
        rule = f"{settings.prefix}-{suffix}"
        events.put_rule(Name=rule, EventPattern=json.dumps(pattern), State="ENABLED")
        events.put_targets(Rule=rule, Targets=[{"Id": "spot-watch", "Arn": queue_arn}])
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "events.amazonaws.com"},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
            }
        ],
    }
    sqs.set_queue_attributes(QueueUrl=spot_watch_url, Attributes={"Policy": json.dumps(policy)})


TASK_SUFFIXES = (".yaml", ".yml")


def _create_task_upload_notifications(settings: Settings, submit_url: str) -> None:
    """A task file put under the bucket's tasks/ prefix -> an S3 event on the submit queue."""
    sqs = aws_client("sqs", settings)
    queue_arn = sqs.get_queue_attributes(QueueUrl=submit_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "s3.amazonaws.com"},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
                "Condition": {"ArnEquals": {"aws:SourceArn": f"arn:aws:s3:::{settings.bucket}"}},
            }
        ],
    }
    sqs.set_queue_attributes(QueueUrl=submit_url, Attributes={"Policy": json.dumps(policy)})
    configurations = [
        {
            "Id": f"tasks-{suffix.lstrip('.')}",
            "QueueArn": queue_arn,
            "Events": ["s3:ObjectCreated:*"],
            "Filter": {
                "Key": {
                    "FilterRules": [
                        {"Name": "prefix", "Value": "tasks/"},
                        {"Name": "suffix", "Value": suffix},
                    ]
                }
            },
        }
        for suffix in TASK_SUFFIXES
    ]
    s3 = aws_client("s3", settings)
    current = (
        s3.get_bucket_notification_configuration(Bucket=settings.bucket).get("QueueConfigurations") or []
    )
    if sorted(c.get("Id", "") for c in current) != sorted(c["Id"] for c in configurations):
        s3.put_bucket_notification_configuration(
            Bucket=settings.bucket, NotificationConfiguration={"QueueConfigurations": configurations}
        )
