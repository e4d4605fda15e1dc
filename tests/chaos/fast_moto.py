"""moto in this process, made fast enough for a chaos run of many jobs, its DynamoDB logic unchanged.

Two costs made a 100-job wave take many minutes, neither of them DynamoDB's semantics:
- TransactWriteItems deep-copies every table it names before it writes (its rollback); the local runtime's
  moto already backs up only the items a transaction touches (local_runtime/moto_transactions.py), and so
  does this run now. The chaos run is single-threaded, which that patch requires.
- moto 5 builds every response by walking the operation's output shape member by member (about 0.15 ms
  per attribute value, most of a run's time). The item operations' results are already DynamoDB's wire
  JSON (attribute values as {"S": ...}), so they are dumped as they are (a binary value base64, as on the
  wire). Any other result JSON cannot dump (datetimes) takes moto's own path. `verify()` builds both for
  a share of the responses and counts the ones whose parsed bodies differ (tests/integration/test_chaos.py
  asserts none).
"""

from __future__ import annotations

import base64
import json
import threading
from typing import Any

from moto.core import responses

from local_runtime import moto_transactions

ITEM_OPERATIONS = frozenset({
    "GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem", "BatchWriteItem",
    "TransactWriteItems", "TransactGetItems",
})  # fmt: skip
CONTENT_TYPE = "application/x-amz-json-1.0"

_lock = threading.Lock()
_installed = False
checked = {"fast": 0, "verified": 0, "different": 0}
_verify_every = 0
_verified_operations: set[str] = set()
differences: list[tuple[str, str, str]] = []  # (operation, moto's body, this one's)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _wire(value: Any) -> str:
    if isinstance(value, bytes):  # only binary attribute values ("B", "BS") hold bytes
        return base64.b64encode(value).decode()
    raise TypeError(f"{type(value).__name__} is not wire JSON")


def install() -> None:
    """Patch moto for this process (once)."""
    global _installed
    with _lock:
        if _installed:
            return
        moto_transactions.install()
        original = responses.ActionResult.execute_result

        def execute_result(self: Any, context: Any) -> Any:
            result = self.result
            if (
                isinstance(self, (responses.PaginatedResult, responses.EmptyResult))
                or context.service_model.service_name != "dynamodb"
                or context.operation_model.name not in ITEM_OPERATIONS
                or not isinstance(result, dict)
            ):
                return original(self, context)
            members = context.operation_model.output_shape.members  # moto's walk drops any other key
            try:
                body = json.dumps(
                    _without_nulls({k: v for k, v in result.items() if k in members}), default=_wire
                )
            except TypeError:
                return original(self, context)
            checked["fast"] += 1
            operation = context.operation_model.name
            sampled = _verify_every and checked["fast"] % _verify_every == 0
            if sampled or (_verify_every and operation not in _verified_operations):
                _verified_operations.add(operation)
                checked["verified"] += 1
                status, headers, slow = original(self, context)
                if json.loads(slow) != json.loads(body):
                    checked["different"] += 1
                    differences.append((operation, slow, body))
                return status, headers, body
            return 200, {"Content-Type": CONTENT_TYPE}, body

        responses.ActionResult.execute_result = execute_result  # type: ignore[method-assign]
        _installed = True


def verify(every: int = 1) -> None:
    """Build every `every`-th fast response (and each operation's first) moto's way too, and count the
    ones whose parsed bodies differ in `checked`; 0: none."""
    global _verify_every
    _verify_every = every
    for key in checked:
        checked[key] = 0
    _verified_operations.clear()
    differences.clear()
