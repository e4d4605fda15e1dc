"""Where a planted secret value must not be: any item of any of a stack's tables, any object of its bucket
(but the one place a job's secrets are kept by design), text a user or a log was shown."""

from __future__ import annotations

import base64
import contextlib
import json
import zlib
from typing import Any

import boto3


def encodings(value: str) -> list[str]:
    """The value raw, JSON-escaped, and inside base64 at each of the three alignments."""
    raw = value.encode()
    shifted = [base64.b64encode(b"x" * shift + raw)[4:-4].decode() for shift in range(3)]
    return [value, json.dumps(value)[1:-1], *shifted]


def holds(text: str, value: str) -> bool:
    return any(needle in text for needle in encodings(value))


def _readable(blob: bytes) -> str:
    """A binary attribute as text: inflated when it is zlib data (compressed plans), else as it is."""
    with contextlib.suppress(zlib.error):
        blob = zlib.decompress(blob)
    return blob.decode("utf-8", "replace")


def table_items_holding(endpoint_url: str, region: str, prefix: str, value: str) -> list[str]:
    """`table: item` for every item of every `<prefix>-*` table that holds the value; also how many tables
    were scanned, so that a scan of nothing cannot pass."""
    dynamodb = boto3.client("dynamodb", endpoint_url=endpoint_url, region_name=region)
    pages = dynamodb.get_paginator("list_tables").paginate()  # one endpoint holds many tests' stacks
    names = [n for page in pages for n in page["TableNames"] if n.startswith(f"{prefix}-")]
    assert len(names) >= 4, names  # jobs, clusters, events, schedules, users, ...
    found = []
    for name in names:
        for page in dynamodb.get_paginator("scan").paginate(TableName=name):
            for item in page["Items"]:
                if holds(json.dumps(item, default=_readable), value):
                    found.append(f"{name}: {json.dumps(item, default=_readable)[:200]}")
    return found


def objects_holding(s3: Any, bucket: str, value: str, *, allowed_suffix: str = "/secrets.json") -> list[str]:
    """Keys of the bucket's objects holding the value, but `runs/<job>/secrets.json` (the job's own)."""
    found = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for entry in page.get("Contents", []):
            key = entry["Key"]
            body = s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode("utf-8", "replace")
            if holds(body, value) and not (key.startswith("runs/") and key.endswith(allowed_suffix)):
                found.append(key)
    return found
