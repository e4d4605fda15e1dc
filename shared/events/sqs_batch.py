"""Decode an SQS batch, call one operation per message body, answer the failed ones.

The answer is Lambda's partial batch response: only the messages listed in `batchItemFailures` come
back (and, after the queue's maxReceiveCount, go to its DLQ); the others are deleted. A record that can
never succeed (not JSON, not an object, not the shape its queue carries: `MalformedMessage`) is dropped
with one structured log line instead: retrying it would only fill the DLQ with the same failure.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("skyless.sqs")


class MalformedMessage(ValueError):
    """This record can never succeed, however often it is retried: the operation refuses its shape."""


def for_each_sqs_message(event: dict[str, Any], operation: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    failures: list[dict[str, str]] = []
    for record in event.get("Records", []):
        message_id = record.get("messageId", "")
        try:
            outcome = operation(message_body(record))
            logger.info("message %s: %s", message_id, outcome)
        except MalformedMessage as exc:
            logger.warning(
                json.dumps(
                    {
                        "event": "malformed_message_dropped",
                        "message_id": message_id,
                        "queue": str(record.get("eventSourceARN", "")).rsplit(":", 1)[-1],
                        "reason": str(exc)[:300],
                    }
                )
            )
        except Exception:
            logger.exception("message %s failed; it will be retried, then dead-lettered", message_id)
            failures.append({"itemIdentifier": message_id})
    return {"batchItemFailures": failures}


def message_body(record: dict[str, Any]) -> dict[str, Any]:
    """The record's body as a JSON object, or MalformedMessage."""
    raw = record.get("body")
    if not isinstance(raw, str):
        raise MalformedMessage("the record has no text body")
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, too many digits, too deep
        raise MalformedMessage(f"the body is not JSON ({type(exc).__name__})") from None
    if not isinstance(body, dict):
        raise MalformedMessage(f"the body is a JSON {type(body).__name__}, not an object")
    return body
