"""The work queues (SQS): a small port and its adapter. Bodies are JSON objects."""

from __future__ import annotations

import json
from functools import cached_property
from typing import Any, Protocol

from shared.aws.sessions import aws_client
from shared.config import Settings

MAX_DELAY_SECONDS = 900  # SQS's limit on DelaySeconds


class Queue(Protocol):
    def send(self, body: dict[str, Any], delay_seconds: int = 0) -> None: ...


class SqsQueue:
    """One SQS queue, found by name on first use (no call at import or construction)."""

    def __init__(self, settings: Settings, kind: str) -> None:
        self.settings = settings
        self.name = settings.queue_name(kind)

    @cached_property
    def _client(self) -> Any:
        return aws_client("sqs", self.settings)

    @cached_property
    def url(self) -> str:
        return self._client.get_queue_url(QueueName=self.name)["QueueUrl"]

    def send(self, body: dict[str, Any], delay_seconds: int = 0) -> None:
        delay = max(0, min(int(delay_seconds), MAX_DELAY_SECONDS))
        self._client.send_message(QueueUrl=self.url, MessageBody=json.dumps(body), DelaySeconds=delay)


class Queues:
    """The control plane's queues by purpose."""

    def __init__(self, settings: Settings) -> None:
        self.optimize: Queue = SqsQueue(settings, "optimize")
        self.provision: Queue = SqsQueue(settings, "provision")
        self.spot_watch: Queue = SqsQueue(settings, "spot_watch")
        self.teardown: Queue = SqsQueue(settings, "teardown")  # its own queue: never behind launches
