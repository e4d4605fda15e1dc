"""The local runtime's reader of the events table's stream (what Lambda's stream mapping does in AWS)."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError

from local_runtime.events_stream import EventsStreamReader
from shared.config import Settings


def _put_event(table: str, job_id: str, at: str) -> None:
    item = {"job_id": {"S": job_id}, "at": {"S": at}, "kind": {"S": "note"}, "message": {"S": "hi"}}
    boto3.client("dynamodb").put_item(TableName=table, Item=item)


def test_the_reader_keeps_following_the_stream_after_a_failed_transaction(stack: Settings) -> None:
    table = stack.table_name("events")
    reader = EventsStreamReader(stack)
    _put_event(table, "job-1", "1#a")
    assert [r["dynamodb"]["NewImage"]["at"]["S"] for r in reader.poll()] == ["1#a"]

    # Failed conditional transactions are routine (duplicate deliveries); none may blind the reader.
    with pytest.raises(ClientError):
        boto3.client("dynamodb").transact_write_items(
            TransactItems=[
                {
                    "Put": {
                        "TableName": table,
                        "Item": {"job_id": {"S": "job-1"}, "at": {"S": "1#a"}},
                        "ConditionExpression": "attribute_not_exists(job_id)",
                    }
                }
            ]
        )
    _put_event(table, "job-1", "2#b")
    assert [r["dynamodb"]["NewImage"]["at"]["S"] for r in reader.poll()] == ["2#b"]
    assert reader.poll() == []
