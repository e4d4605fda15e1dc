"""Notify: the events table's DynamoDB stream (NEW_IMAGE) → Slack and email (shared.notifications).

Answers a partial batch response: records that raised are retried (then go to the on-failure destination).
"""

from __future__ import annotations

from typing import Any

from shared.config import Settings
from shared.notifications.dispatch import notify_stream_records


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    failed = notify_stream_records(Settings.from_env(), event.get("Records") or [])
    return {"batchItemFailures": [{"itemIdentifier": sequence} for sequence in failed]}
