"""The unit tier's `stack` and `queues` (tests/conftest.py answers these for a test under tests/unit): the
same fixtures with every adapter in memory (the job store: shared/store/memory.py, held to DynamoDB's
contract by tests/unit/test_job_store_contract.py; schedules, notification settings and the reaper's marks:
shared/store/memory_records.py, likewise; queues; bucket; the local cloud's processes as ever), so
lifecycle tests written against a stack run there unchanged and without an endpoint. Any AWS call that
slips past the wiring goes to a port where nothing listens, and fails.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chaos.memory_objects import MemoryObjects

from shared.budgets.records import MemoryBudgets
from shared.clouds.local import LocalCloud
from shared.clouds.registry import ProviderRegistry
from shared.config import Settings
from shared.store.contract_records import MemoryContractRecords
from shared.store.memory import MemoryJobStore
from shared.store.memory_records import MemoryNotificationStore, MemoryReaperMarks, MemoryScheduleStore
from shared.wiring import Wiring, install_wiring, uninstall_wiring

NOWHERE = "http://127.0.0.1:9"
KINDS = ("optimize", "provision", "spot_watch", "teardown")


class MemoryQueue:
    """One queue: messages become visible after their delay, as SQS's DelaySeconds."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.messages: list[tuple[float, dict[str, Any]]] = []

    def send(self, body: dict[str, Any], delay_seconds: int = 0) -> None:
        self.messages.append((time.monotonic() + max(0, delay_seconds), json.loads(json.dumps(body))))


class MemoryQueues:
    def __init__(self) -> None:
        self.optimize = MemoryQueue("optimize")
        self.provision = MemoryQueue("provision")
        self.spot_watch = MemoryQueue("spot_watch")
        self.teardown = MemoryQueue("teardown")

    def of(self, kind: str) -> MemoryQueue:
        queue: MemoryQueue = getattr(self, kind)
        return queue


class MemoryQueueDriver:
    """tests/conftest.py's QueueDriver over the memory queues: visible messages as SQS event records."""

    def __init__(self, settings: Settings, queues: MemoryQueues) -> None:
        self.settings = settings
        self.queues = queues

    def receive(self, kind: str, wait_seconds: int = 0) -> list[dict[str, Any]]:
        """As tests/conftest.py's QueueDriver: "provision" delivers the teardown queue's messages too."""
        if kind == "provision":
            return self._receive("teardown") + self._receive("provision")
        return self._receive(kind)

    def _receive(self, kind: str) -> list[dict[str, Any]]:
        queue = self.queues.of(kind)
        now = time.monotonic()
        visible = [body for at, body in queue.messages if at <= now]
        queue.messages = [(at, body) for at, body in queue.messages if at > now]
        return [
            {
                "messageId": str(uuid.uuid4()),
                "receiptHandle": uuid.uuid4().hex,
                "body": json.dumps(body),
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "eventSource": "aws:sqs",
                "eventSourceARN": f"arn:aws:sqs:{self.settings.region}:123456789012:{kind}",
                "awsRegion": self.settings.region,
            }
            for body in visible
        ]

    def bodies(self, kind: str) -> list[dict[str, Any]]:
        return [json.loads(r["body"]) for r in self.receive(kind)]

    def delayed_count(self, kind: str) -> int:
        now = time.monotonic()
        return sum(1 for at, _ in self.queues.of(kind).messages if at > now)

    @staticmethod
    def event(records: list[dict[str, Any]]) -> dict[str, Any]:
        return {"Records": records}


@contextlib.contextmanager
def memory_stack(home: Path, monkeypatch: pytest.MonkeyPatch, queues: MemoryQueues) -> Iterator[Settings]:
    """Settings whose adapters are all in memory (installed for every entry point); the environment is set
    so handlers see them. At the end, every local-cloud node the test started is terminated."""
    settings = Settings(
        prefix=f"u{uuid.uuid4().hex[:10]}",
        region="us-east-1",
        endpoint_url=NOWHERE,
        home=home,
        providers="*=local",
        api_url=NOWHERE,
        allow_loopback_webhooks=True,
    )
    settings.home.mkdir(parents=True, exist_ok=True)
    for name, value in {"AWS_ACCESS_KEY_ID": "unit", "AWS_SECRET_ACCESS_KEY": "unit"}.items():
        monkeypatch.setenv(name, value)
    for name, value in settings.to_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SKYLESS_AGENT_SECRET", "test-agent-secret")
    assert Settings.from_env() == settings  # handlers find the memory wiring from their environment
    store = MemoryJobStore()
    objects = MemoryObjects()
    wiring = Wiring(
        settings, store, queues, objects, ProviderRegistry(settings), store.cooldowns,  # type: ignore[arg-type]
        schedule_records=MemoryScheduleStore(), notification_records=MemoryNotificationStore(),
        reaper_mark_records=MemoryReaperMarks(), budget_records=MemoryBudgets(),
        contract_records=MemoryContractRecords(),
    )  # fmt: skip
    install_wiring(wiring)
    try:
        yield settings
    finally:
        uninstall_wiring(settings)
        cloud = LocalCloud(settings.home)
        for cluster_id in {node.cluster_id for node in cloud.list_owned()}:
            cloud.terminate(cluster_id)
