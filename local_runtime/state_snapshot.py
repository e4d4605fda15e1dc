"""Saving and restoring the local control plane's state across `skyless local down` / `up`.

Why not moto's recorder: it records every request, reads included, so a day of dispatcher long-polls
and agent heartbeats would replay for minutes, and replayed ReceiveMessage calls would consume the very
messages they should restore. Instead the daemon saves what the state *is*: every item of the stack's
tables, every object of its bucket, every message waiting in its queues (with the delay it has left) and
every Secrets Manager value under the stack's prefix, periodically and at shutdown, into one file written
atomically and readable by its owner only. The state is sealed with the key beside it
(local_runtime/snapshot_cipher.py says why all of it): `{"version": 2, "prefix", "taken_at", "sealed"}`.
Restoring writes it back into a freshly created stack (a version 1 snapshot, in clear, is still read).
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from local_runtime.private_files import write_private
from local_runtime.snapshot_cipher import SnapshotKeyError, seal, snapshot_key, unseal
from shared.aws.sessions import aws_client
from shared.config import QUEUE_KINDS, Settings

log = logging.getLogger("skyless.local")
SNAPSHOT_VERSION = 2
CLEAR_SNAPSHOT_VERSION = 1  # before snapshots were sealed
NOTHING = {"items": 0, "objects": 0, "messages": 0, "secrets": 0}


def _encode(value: Any) -> Any:
    """DynamoDB JSON with binary values made JSON-safe."""
    if isinstance(value, bytes):
        return {"__b64__": base64.b64encode(value).decode()}
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, set):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__b64__"}:
            return base64.b64decode(value["__b64__"])
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def _stack_tables(settings: Settings, dynamodb: Any) -> list[str]:
    names: list[str] = []
    for page in dynamodb.get_paginator("list_tables").paginate():
        names.extend(n for n in page["TableNames"] if n.startswith(f"{settings.prefix}-"))
    return names


def _queue_messages(settings: Settings) -> dict[str, list[dict[str, Any]]]:
    """Messages waiting in the stack's queues, read from the in-process moto backend without receiving them.

    A ReceiveMessage would hide them and count a receive; reading moto's own queue objects does neither.
    """
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.sqs.models import sqs_backends

    backend = sqs_backends[DEFAULT_ACCOUNT_ID][settings.region]
    now_ms = time.time() * 1000
    saved: dict[str, list[dict[str, Any]]] = {}
    for kind in QUEUE_KINDS:
        queue = backend.queues.get(settings.queue_name(kind))
        if queue is None:
            continue
        saved[kind] = []
        for message in list(queue._messages):
            hidden_ms = max(0.0, message.delayed_until - now_ms, message.visible_at - now_ms)
            saved[kind].append({"body": message.body, "delay_seconds": int(hidden_ms) // 1000})
    return saved


def _stack_secrets(settings: Settings) -> dict[str, str]:
    """Every Secrets Manager value named `<prefix>/...` (the webhook URLs): name -> value."""
    client = aws_client("secretsmanager", settings)
    values: dict[str, str] = {}
    for page in client.get_paginator("list_secrets").paginate():
        for entry in page.get("SecretList", []):
            name = entry["Name"]
            if name.startswith(f"{settings.prefix}/"):
                values[name] = client.get_secret_value(SecretId=name)["SecretString"]
    return values


def take_snapshot(settings: Settings) -> dict[str, Any]:
    dynamodb = aws_client("dynamodb", settings)
    tables: dict[str, list[dict[str, Any]]] = {}
    for name in _stack_tables(settings, dynamodb):
        items: list[dict[str, Any]] = []
        for page in dynamodb.get_paginator("scan").paginate(TableName=name):
            items.extend(page["Items"])
        tables[name] = items
    s3 = aws_client("s3", settings)
    return {
        "version": SNAPSHOT_VERSION,
        "taken_at": time.time(),
        "prefix": settings.prefix,
        "tables": _encode(tables),
        "objects": _bucket_objects(s3, settings.bucket),
        "task_buckets": {name: _bucket_objects(s3, name) for name in _task_buckets(tables, settings)},
        "queues": _queue_messages(settings),
        "secrets": _stack_secrets(settings),
    }


def _bucket_objects(s3: Any, bucket: str) -> dict[str, str]:
    objects: dict[str, str] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
            objects[item["Key"]] = base64.b64encode(body).decode()
    return objects


def _task_buckets(tables: dict[str, list[dict[str, Any]]], settings: Settings) -> list[str]:
    """The buckets tasks mount: those the registry holds as live (shared.storage.registry) and those an admin
    granted (shared.store.tenancy). On the local runtime they live in the embedded endpoint too, so a
    checkpoint, or a dataset put there with an S3 client, outlives `local down`."""
    items = tables.get(settings.table_name("buckets"), [])
    live = {i["bucket"]["S"] for i in items if i.get("state", {}).get("S") == "ACTIVE"}
    grants = tables.get(settings.table_name("tenancy"), [])
    granted = {i["pk"]["S"].removeprefix("bucket#") for i in grants if i["pk"]["S"].startswith("bucket#")}
    return sorted(live | granted)


def save_snapshot(settings: Settings, path: Path) -> None:
    """Seal the state and write it to `path` atomically (a crash mid-write leaves the previous snapshot),
    0600, with the key in `snapshot.key` beside it (made on first use, 0600)."""
    snapshot = take_snapshot(settings)
    sealed = seal(json.dumps(snapshot).encode("utf-8"), snapshot_key(path.parent))
    envelope = {
        "version": SNAPSHOT_VERSION,
        "prefix": settings.prefix,
        "taken_at": snapshot["taken_at"],
        "sealed": sealed,
    }
    write_private(path, json.dumps(envelope))


def read_snapshot(settings: Settings, path: Path) -> dict[str, Any] | None:
    """The saved state for this stack, or None (no snapshot, another stack's, or one that cannot be opened:
    that one is moved aside to `<name>.unreadable`, so the next save does not overwrite it)."""
    if not path.exists():
        return None
    envelope = json.loads(path.read_text())
    if envelope.get("prefix") != settings.prefix:
        return None
    if envelope.get("version") == CLEAR_SNAPSHOT_VERSION:
        return dict(envelope)
    if envelope.get("version") != SNAPSHOT_VERSION:
        return None
    try:
        return dict(json.loads(unseal(envelope["sealed"], snapshot_key(path.parent, create=False))))
    except SnapshotKeyError as error:
        aside = path.with_name(path.name + ".unreadable")
        os.replace(path, aside)
        log.warning("the snapshot %s cannot be opened (%s); kept as %s, starting empty", path, error, aside)
        return None


def restore_snapshot(settings: Settings, path: Path) -> dict[str, int]:
    """Write a saved state back into a freshly created stack. Answers counts of what was restored."""
    snapshot = read_snapshot(settings, path)
    if snapshot is None:
        return dict(NOTHING)
    dynamodb = aws_client("dynamodb", settings)
    existing = set(_stack_tables(settings, dynamodb))
    item_count = 0
    for table, items in _decode(snapshot["tables"]).items():
        if table not in existing:
            continue
        for start in range(0, len(items), 25):
            batch = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
            pending: dict[str, Any] = {table: batch}
            while pending:
                pending = dynamodb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
            item_count += len(batch)
    s3 = aws_client("s3", settings)
    for key, body in snapshot["objects"].items():
        s3.put_object(Bucket=settings.bucket, Key=key, Body=base64.b64decode(body))
    for bucket, objects in snapshot.get("task_buckets", {}).items():
        with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
            s3.create_bucket(Bucket=bucket)
        for key, body in objects.items():
            s3.put_object(Bucket=bucket, Key=key, Body=base64.b64decode(body))
    sqs = aws_client("sqs", settings)
    message_count = 0
    for kind, messages in snapshot["queues"].items():
        url = sqs.get_queue_url(QueueName=settings.queue_name(kind))["QueueUrl"]
        for message in messages:
            sqs.send_message(
                QueueUrl=url, MessageBody=message["body"], DelaySeconds=min(900, message["delay_seconds"])
            )
            message_count += 1
    secrets = snapshot.get("secrets") or {}
    _restore_secrets(settings, secrets)
    return {
        "items": item_count,
        "objects": len(snapshot["objects"]),
        "messages": message_count,
        "secrets": len(secrets),
    }


def _restore_secrets(settings: Settings, secrets: dict[str, str]) -> None:
    from botocore.exceptions import ClientError

    client = aws_client("secretsmanager", settings)
    for name, value in secrets.items():
        try:
            client.create_secret(Name=name, SecretString=value)
        except ClientError as error:
            if error.response["Error"]["Code"] != "ResourceExistsException":
                raise
            client.put_secret_value(SecretId=name, SecretString=value)
