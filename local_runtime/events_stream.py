"""Reads the events table's DynamoDB stream (moto serves the dynamodbstreams API) and hands the
records to the notify handler in Lambda's DynamoDB-stream event shape, as the event source mapping would.

Starts at the stream's start (TRIM_HORIZON) on every start of the runtime: redelivered records send
nothing twice (shared/notifications/dispatch.py claims each send).
"""

from __future__ import annotations

import datetime as dt
import importlib
import logging
from typing import Any

from shared.aws.sessions import aws_client
from shared.config import Settings

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
        self.last_sequence: dict[str, str | None] = {}  # shard id -> last record read (None: none yet)
        self.stream_arn: str | None = None

    def _arn(self) -> str | None:
        if self.stream_arn is None:
            found = self.streams.list_streams(TableName=self.settings.table_name("events"))["Streams"]
            self.stream_arn = found[-1]["StreamArn"] if found else None
        return self.stream_arn

    def _iterator(self, arn: str, shard_id: str) -> str:
        # A fresh iterator from the last sequence number read, on every poll, rather than following
        # NextShardIterator: moto swaps in a copy of a table's stream shard whenever a transaction fails,
        # stranding older iterators on the dead copy (and real iterators expire after 15 minutes).
        last = self.last_sequence.get(shard_id)
        position = (
            {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": last}
            if last
            else {"ShardIteratorType": "TRIM_HORIZON"}
        )
        return str(
            self.streams.get_shard_iterator(StreamArn=arn, ShardId=shard_id, **position)["ShardIterator"]
        )

    def poll(self) -> list[dict[str, Any]]:
        """New records since the last poll, oldest first."""
        arn = self._arn()
        if arn is None:
            return []
        records: list[dict[str, Any]] = []
        for shard in self.streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
            shard_id = shard["ShardId"]
            answer = self.streams.get_records(ShardIterator=self._iterator(arn, shard_id), Limit=1000)
            for record in answer.get("Records") or []:
                records.append({**_plain(record), "eventSourceARN": arn})
                self.last_sequence[shard_id] = record["dynamodb"]["SequenceNumber"]
        return records


NOTIFY_HANDLER = "functions.notify.handler"
MAX_TRIES = 3  # a record whose handler reported it failed is handed over again, then dropped (logged)


class StreamWorker:
    """Polls the stream and calls the notify handler with each batch, as Lambda's stream mapping would."""

    def __init__(self, settings: Settings, handler: Any = None) -> None:
        self.settings = settings
        self.reader = EventsStreamReader(settings)
        self._handler = handler
        self.retrying: list[tuple[dict[str, Any], int]] = []
        self.delivered = 0

    def handler(self) -> Any:
        if self._handler is None:
            self._handler = importlib.import_module(NOTIFY_HANDLER).handler
        return self._handler

    def poll_once(self) -> int:
        """Hand over new records (and earlier failures); answers how many were handed over."""
        batch = [(record, tries) for record, tries in self.retrying] + [(r, 0) for r in self.reader.poll()]
        self.retrying = []
        if not batch:
            return 0
        try:
            result = self.handler()({"Records": [record for record, _ in batch]}, None)
            failed = {str(item["itemIdentifier"]) for item in (result or {}).get("batchItemFailures") or []}
        except Exception:
            log.exception("notify handler raised; its batch will be handed over again")
            failed = {str(record["dynamodb"].get("SequenceNumber")) for record, _ in batch}
        for record, tries in batch:
            if str(record["dynamodb"].get("SequenceNumber")) not in failed:
                self.delivered += 1
            elif tries + 1 < MAX_TRIES:
                self.retrying.append((record, tries + 1))
            else:
                log.warning("notify gave up on a stream record after %d tries", MAX_TRIES)
        return len(batch)
