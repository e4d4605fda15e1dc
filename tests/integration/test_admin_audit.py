"""The admin audit log over a store seeded with thousands of entries: `skyless admin audit` reads what it
shows and no more, newest first. (That no role may rewrite it is tests/unit/test_template_iam.py's.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from shared.config import Settings
from shared.store.audit import PARTITION, append_audit, audit_model, read_audit

SEEDED = 2_000


@pytest.fixture
def items_read(stack: Settings) -> Iterator[list[int]]:
    """ScannedCount of every Query made on the audit table: the items read (and paid for)."""
    counts: list[int] = []

    def count(parsed: dict[str, Any], **_: Any) -> None:
        counts.append(int(parsed.get("ScannedCount", 0)))

    events = audit_model(stack)._get_connection().connection.client.meta.events
    events.register("after-call.dynamodb.Query", count)
    yield counts
    events.unregister("after-call.dynamodb.Query", count)


def _seed(stack: Settings, entries: int) -> None:
    table = boto3.resource("dynamodb", endpoint_url=stack.endpoint_url, region_name=stack.region).Table(
        stack.table_name("audit")
    )
    with table.batch_writer() as batch:
        for n in range(entries):
            batch.put_item(Item={"pk": PARTITION, "sk": f"{1_000_000 + n:015d}#seed", "at": 1_000 + n,
                                 "actor": "u-old", "action": "teams.add", "target": f"t{n}"})  # fmt: skip


def test_reading_the_newest_entries_reads_only_those_whatever_the_logs_size(
    stack: Settings, items_read: list[int]
) -> None:
    _seed(stack, SEEDED)
    append_audit(stack, actor="u-admin", action="buckets.grant", target="lab-data", detail={"write": False})

    newest = read_audit(stack, limit=10)

    assert [e.action for e in newest[:2]] == ["buckets.grant", "teams.add"]
    assert newest[1].target == f"t{SEEDED - 1}"
    assert len(newest) == 10 and sum(items_read) == 10, items_read  # 10 of 2,001 items read
