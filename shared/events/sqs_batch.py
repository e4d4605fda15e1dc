"""Decode an SQS batch, call one operation per message body, answer the failed ones.

The answer is Lambda's partial batch response: only the messages listed in `batchItemFailures` come
back (and, after the queue's maxReceiveCount, go to its DLQ); the others are deleted. A record that can
never succeed (not JSON, not an object, not the shape its queue carries: `MalformedMessage`) is dropped
with one structured log line instead: retrying it would only fill the DLQ with the same failure.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection
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


def body_text(body: dict[str, Any], name: str, kind: str, choices: Collection[str] = ()) -> str:
    """`body[name]`, a string (one of `choices` when given), or MalformedMessage naming the field."""
    value = body.get(name)
    if not isinstance(value, str) or (choices and value not in choices):
        wanted = " | ".join(choices) if choices else "a string"
        raise MalformedMessage(f"not a {kind}: {name}: {value!r} is not {wanted}")
    return value


def body_int(body: dict[str, Any], name: str, kind: str) -> int:
    """`body[name]` as a whole number, or MalformedMessage naming the field."""
    value = body.get(name)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedMessage(f"not a {kind}: {name}: {value!r} is not a whole number")
    return value


def body_float(body: dict[str, Any], name: str, kind: str) -> float | None:
    """`body[name]` as a number, None when absent, or MalformedMessage."""
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise MalformedMessage(f"not a {kind}: {name}: {value!r} is not a number")
    return float(value)
