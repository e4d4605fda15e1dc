"""The local runtime's reader of the events table's stream (what Lambda's stream mapping does in AWS)."""

from __future__ import annotations

import threading
import time
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto.dynamodb.models import DynamoDBBackend

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


def test_a_poll_during_a_failing_transaction_never_sees_its_rolled_back_event(
    stack: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = stack.table_name("events")
    reader = EventsStreamReader(stack)
    assert reader.poll() == []
    written = threading.Event()
    put_item = DynamoDBBackend.put_item

    def slow_put(
        self: DynamoDBBackend, table_name: str, item: dict[str, Any], *args: Any, **kwargs: Any
    ) -> Any:
        result = put_item(self, table_name, item, *args, **kwargs)
        if item.get("at", {}).get("S") == "1#rolled-back":  # written, not yet rolled back: stay here a while
            written.set()
            time.sleep(1.0)
        return result

    monkeypatch.setattr(DynamoDBBackend, "put_item", slow_put)
    errors: list[Exception] = []

    def failing_transaction() -> None:
        event = {"job_id": {"S": "job-1"}, "at": {"S": "1#rolled-back"}, "kind": {"S": "note"}}
        check = {"TableName": table, "Key": {"job_id": {"S": "job-1"}, "at": {"S": "0#absent"}},
                 "ConditionExpression": "attribute_exists(job_id)"}  # fmt: skip
        try:
            boto3.client("dynamodb").transact_write_items(
                TransactItems=[{"Put": {"TableName": table, "Item": event}}, {"ConditionCheck": check}]
            )
        except ClientError as error:
            errors.append(error)

    writer = threading.Thread(target=failing_transaction)
    writer.start()
    assert written.wait(10)
    during = reader.poll()
    writer.join(10)
    assert len(errors) == 1  # the transaction was cancelled
    _put_event(table, "job-1", "2#kept")
    assert [r["dynamodb"]["NewImage"]["at"]["S"] for r in during + reader.poll()] == ["2#kept"]
