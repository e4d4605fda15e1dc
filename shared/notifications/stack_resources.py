"""The notification side of `create_stack`: the events table's stream, the notifications table, and the
SES sender identity. Idempotent."""

from __future__ import annotations

from shared.aws.sessions import aws_client
from shared.config import Settings
from shared.notifications.email import sender_address
from shared.store.notifications import ensure_notifications_table

STREAM_VIEW = "NEW_IMAGE"


def events_stream_arn(settings: Settings) -> str | None:
    table = aws_client("dynamodb", settings).describe_table(TableName=settings.table_name("events"))["Table"]
    spec = table.get("StreamSpecification") or {}
    return table.get("LatestStreamArn") if spec.get("StreamEnabled") else None


def create_notification_resources(settings: Settings) -> None:
    if events_stream_arn(settings) is None:
        aws_client("dynamodb", settings).update_table(
            TableName=settings.table_name("events"),
            StreamSpecification={"StreamEnabled": True, "StreamViewType": STREAM_VIEW},
        )
    ensure_notifications_table(settings)
    aws_client("ses", settings).verify_email_identity(EmailAddress=sender_address())
