"""AWS calls counted as the control plane makes them (benchmarks/control_plane.py, clusters.py): per service
and operation through botocore's events, items per call, and the DynamoDB write units those items are billed
(an item's size by DynamoDB's rules)."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import botocore.session

DYNAMODB_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
DYNAMODB_READS = {"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"}
S3_PUTS = {"PutObject", "CopyObject", "ListObjectsV2", "ListObjects", "CreateMultipartUpload", "UploadPart"}
DISPATCHER_OPERATIONS = {("sqs", "ReceiveMessage"), ("sqs", "DeleteMessageBatch"), ("sqs", "DeleteMessage")}


def value_size(value: dict[str, Any]) -> int:
    """Bytes of one DynamoDB-JSON attribute value, by DynamoDB's item size rules."""
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(raw.encode())
    if kind == "N":
        digits = raw.lstrip("-").replace(".", "").lstrip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if kind == "B":
        return len(raw)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS", "BS"):
        return sum(value_size({kind[0]: v}) for v in raw)
    if kind == "M":
        return 3 + sum(len(k.encode()) + value_size(v) + 1 for k, v in raw.items())
    if kind == "L":
        return 3 + sum(value_size(v) + 1 for v in raw)
    return len(json.dumps(raw))


def item_size(item: dict[str, Any]) -> int:
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def billed_units(size: int, transactional: bool) -> int:
    return max(1, -(-size // 1024)) * (2 if transactional else 1)


class CallCounter:
    """Counts AWS API calls per (service, operation), items per call where one call carries many, and the
    DynamoDB write units those items are billed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: Counter[tuple[str, str]] = Counter()
        self.units: Counter[tuple[str, str]] = Counter()
        self.write_units = 0
        self.heartbeat_items = 0  # UpdateItems that set only a node's heartbeat_at (an agent's sign of life)
        self.local = threading.local()
        # reads a stored item (DynamoDB JSON) for its size; set once the stack is up
        self.sizer: Callable[[str, dict[str, Any]], dict[str, Any] | None] | None = None

    @contextmanager
    def ignored(self) -> Iterator[None]:
        """The benchmark's own calls (watching queue depths, emitting events) are not the control plane's."""
        self.local.ignored = True
        try:
            yield
        finally:
            self.local.ignored = False

    def install(self) -> None:
        """Register on every botocore client created from now on (boto3 and pynamodb both go through here)."""
        original = botocore.session.Session.create_client
        counter = self

        def create_client(session: Any, *args: Any, **kwargs: Any) -> Any:
            client = original(session, *args, **kwargs)
            client.meta.events.register("before-call", counter.on_call)
            client.meta.events.register("before-parameter-build", counter.on_parameters)
            return client

        botocore.session.Session.create_client = create_client  # type: ignore[method-assign]

    def on_call(self, model: Any, **_: Any) -> None:
        if getattr(self.local, "ignored", False):
            return
        with self.lock:
            self.calls[(model.service_model.service_name, model.name)] += 1

    def on_parameters(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        """Items per call, from the API parameters (before-call only sees the serialized request)."""
        if getattr(self.local, "ignored", False):
            return
        key = (model.service_model.service_name, model.name)
        items = 1
        if key == ("dynamodb", "BatchWriteItem"):
            items = sum(len(v) for v in params.get("RequestItems", {}).values())
        elif key == ("dynamodb", "TransactWriteItems"):
            items = len(params.get("TransactItems", []))
        elif key == ("sqs", "SendMessageBatch"):
            items = len(params.get("Entries", []))
        units = self.dynamodb_write_units(model.name, params) if key[0] == "dynamodb" else 0
        heartbeat = key == ("dynamodb", "UpdateItem") and is_heartbeat_write(params)
        with self.lock:
            self.units[key] += items
            self.write_units += units
            self.heartbeat_items += heartbeat

    def dynamodb_write_units(self, operation: str, params: dict[str, Any]) -> int:
        if operation == "TransactWriteItems":
            writes = [
                (kind, body) for entry in params.get("TransactItems", []) for kind, body in entry.items()
            ]
            return sum(billed_units(self.written_size(kind, body), True) for kind, body in writes)
        if operation == "BatchWriteItem":
            return sum(
                billed_units(self.written_size(kind, {"TableName": table, **body}), False)
                for table, requests in params.get("RequestItems", {}).items()
                for request in requests
                for kind, body in request.items()
            )
        kinds = {"PutItem": "Put", "UpdateItem": "Update", "DeleteItem": "Delete"}
        return billed_units(self.written_size(kinds[operation], params), False) if operation in kinds else 0

    def written_size(self, kind: str, body: dict[str, Any]) -> int:
        if kind in ("Put", "PutRequest"):
            return item_size(body["Item"])
        stored = self.stored_size(body["TableName"], body["Key"])
        if kind == "Update":
            return stored + sum(value_size(v) for v in body.get("ExpressionAttributeValues", {}).values())
        return stored  # Delete, DeleteRequest, ConditionCheck

    def stored_size(self, table: str, key: dict[str, Any]) -> int:
        if self.sizer is None:
            return item_size(key)
        return item_size(self.sizer(table, key) or key)

    def snapshot(self) -> tuple[Counter[tuple[str, str]], Counter[tuple[str, str]], int, int]:
        with self.lock:
            return Counter(self.calls), Counter(self.units), self.write_units, self.heartbeat_items


def stored_item_reader(runtime: Any) -> Callable[[str, dict[str, Any]], dict[str, Any] | None]:
    """Reads an item from moto's store in this process, in the turn the endpoint gives DynamoDB calls: the
    size of what a write replaces is then counted without an HTTP call on the handler's thread (which the
    latencies measured here would include)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    backend = dynamodb_backends[DEFAULT_ACCOUNT_ID][runtime.settings.region]
    lock = runtime.moto.dynamodb_lock

    def read(table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        with lock:
            item = backend.get_item(table, key)
            return None if item is None else dict(item.to_json()["Attributes"])

    return read


def is_heartbeat_write(params: dict[str, Any]) -> bool:
    """An UpdateItem of a cluster record that sets a node's heartbeat_at and nothing else."""
    names = list(params.get("ExpressionAttributeNames", {}).values())
    sets_one = str(params.get("UpdateExpression", "")).count("=") == 1
    return len(names) == 3 and {"nodes", "heartbeat_at"} <= set(names) and sets_one
