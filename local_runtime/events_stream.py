"""Reads the events table's DynamoDB stream (moto serves the dynamodbstreams API) and hands the
records to the notify handler in Lambda's DynamoDB-stream event shape, as the event source mapping would.

Starts at the stream's start (TRIM_HORIZON) on every start of the runtime: redelivered records send
nothing twice (shared/notifications/dispatch.py claims each send).
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from shared.config import Settings
from shared.stack import aws_client

log = logging.getLogger("skyless.dispatcher")


def _plain(record: dict[str, Any]) -> dict[str, Any]:
    """ApproximateCreationDateTime as Lambda sends it (epoch seconds), not a datetime."""
    stream = dict(record.get("dynamodb") or {})
    created = stream.get("ApproximateCreationDateTime")
    if isinstance(created, dt.datetime):
        stream["ApproximateCreationDateTime"] = created.timestamp()
    return {**record, "dynamodb": stream}


class EventsStreamReader:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.streams = aws_client("dynamodbstreams", settings)
        self.iterators: dict[str, str | None] = {}  # shard id -> next iterator (None: shard closed)
        self.stream_arn: str | None = None

    def _arn(self) -> str | None:
        if self.stream_arn is None:
            found = self.streams.list_streams(TableName=self.settings.table_name("events"))["Streams"]
            self.stream_arn = found[-1]["StreamArn"] if found else None
        return self.stream_arn

    def _refresh_shards(self, arn: str) -> None:
        shards = self.streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
        for shard in shards:
            shard_id = shard["ShardId"]
            if shard_id not in self.iterators:
                self.iterators[shard_id] = self.streams.get_shard_iterator(
                    StreamArn=arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]

    def poll(self) -> list[dict[str, Any]]:
        """New records since the last poll, oldest first."""
        arn = self._arn()
        if arn is None:
            return []
        self._refresh_shards(arn)
        records: list[dict[str, Any]] = []
        for shard_id, iterator in list(self.iterators.items()):
            if iterator is None:
                continue
            answer = self.streams.get_records(ShardIterator=iterator, Limit=1000)
            self.iterators[shard_id] = answer.get("NextShardIterator")
            for record in answer.get("Records") or []:
                records.append({**_plain(record), "eventSourceARN": arn})
        return records
