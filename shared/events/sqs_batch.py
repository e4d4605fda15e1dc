"""Decode an SQS batch, call one operation per message body, answer the failed ones.

The answer is Lambda's partial batch response: only the messages listed in `batchItemFailures` come
back (and, after the queue's maxReceiveCount, go to its DLQ); the others are deleted.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("skyless.sqs")


def for_each_sqs_message(event: dict[str, Any], operation: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    failures: list[dict[str, str]] = []
    for record in event.get("Records", []):
        message_id = record.get("messageId", "")
        try:
            body = json.loads(record["body"])
            if not isinstance(body, dict):
                raise ValueError("the message body is not a JSON object")
            outcome = operation(body)
            logger.info("message %s: %s", message_id, outcome)
        except Exception:
            logger.exception("message %s failed; it will be retried, then dead-lettered", message_id)
            failures.append({"itemIdentifier": message_id})
    return {"batchItemFailures": failures}
