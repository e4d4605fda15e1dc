"""Deliver queue messages and schedules to the same handlers Lambda runs, in Lambda's event shapes.

One thread per queue long-polls SQS and calls the queue's handler with an SQS batch event; messages the
handler does not name in `batchItemFailures` are deleted, the others are left for SQS to redeliver after
their visibility timeout (delays and redrive to the DLQ are SQS's, not ours). A scheduler thread fires
the scheduled handlers (reconcile, reaper) with EventBridge "Scheduled Event" events.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from local_runtime.events_stream import StreamWorker
from shared.aws.sessions import aws_client
from shared.config import Settings

log = logging.getLogger("skyless.dispatcher")

ACCOUNT_ID = "123456789012"
QUEUE_HANDLERS = {
    "optimize": "functions.optimize.handler",
    "provision": "functions.provision.handler",
    "spot_watch": "functions.spot_watch.handler",
    "submit": "functions.submit.handler",
    "teardown": "functions.provision.handler",  # as in the template: the provision function's second queue
}
# The template's schedule rules, at the same rates. Not the catalog refresh: it fetches prices from the
# clouds' APIs, and the local runtime has no network; it plans from the bundled catalog.
SCHEDULED_HANDLERS = {
    "reconcile": ("functions.reconcile.handler", 60.0),
    "reaper": ("functions.reaper.handler", 300.0),
}
CRON_CHECK_SECONDS = 5.0  # how often the local EventBridge Scheduler looks for due user-schedule firings
BATCH_SIZE = 10
LONG_POLL_SECONDS = 2  # short enough that `local down` stops promptly
STREAM_POLL_SECONDS = 1.0
POLLERS_PER_QUEUE = 2  # Lambda runs batches of one queue concurrently; so do we, a little

Handler = Callable[[dict[str, Any], Any], Any]


@dataclass
class LambdaContext:
    """The attributes of Lambda's context object that handlers may read."""

    function_name: str
    timeout_seconds: int = 900
    memory_limit_in_mb: int = 512
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    started: float = field(default_factory=time.monotonic)

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:{ACCOUNT_ID}:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.timeout_seconds - (time.monotonic() - self.started)) * 1000))


def load_handler(module_name: str) -> Handler:
    return importlib.import_module(module_name).handler


def sqs_event(messages: list[dict[str, Any]], queue_arn: str, region: str) -> dict[str, Any]:
    """An SQS batch event exactly as Lambda's event source mapping builds it from ReceiveMessage output."""
    records = []
    for message in messages:
        attributes = message.get("MessageAttributes") or {}
        records.append(
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": dict(message.get("Attributes") or {}),
                "messageAttributes": {
                    name: {
                        "stringValue": value.get("StringValue"),
                        "binaryValue": value.get("BinaryValue"),
                        "stringListValues": [],
                        "binaryListValues": [],
                        "dataType": value.get("DataType"),
                    }
                    for name, value in attributes.items()
                },
                "md5OfBody": message.get("MD5OfBody") or hashlib.md5(message["Body"].encode()).hexdigest(),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            }
        )
    return {"Records": records}


def scheduled_event(rule_name: str, region: str, when: datetime) -> dict[str, Any]:
    """An EventBridge "Scheduled Event" as a schedule rule delivers it."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": ACCOUNT_ID,
        "time": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [f"arn:aws:events:{region}:{ACCOUNT_ID}:rule/{rule_name}"],
        "detail": {},
    }


def failed_message_ids(result: Any) -> set[str] | None:
    """The ids a handler reported as failed; None means "the whole batch failed" (a malformed answer)."""
    if result is None:
        return set()
    if not isinstance(result, dict):
        return None
    failures = result.get("batchItemFailures") or []
    try:
        return {str(item["itemIdentifier"]) for item in failures}
    except (KeyError, TypeError):
        return None


class QueueWorker:
    """Long-polls one queue and hands each batch to its handler."""

    def __init__(self, settings: Settings, kind: str, handler: Handler | None = None) -> None:
        self.settings = settings
        self.kind = kind
        self.module = QUEUE_HANDLERS[kind]
        self._handler = handler
        self.sqs = aws_client("sqs", settings)
        self.url = self.sqs.get_queue_url(QueueName=settings.queue_name(kind))["QueueUrl"]
        attributes = self.sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=["QueueArn"])
        self.arn = attributes["Attributes"]["QueueArn"]
        self.delivered = 0
        self.failed = 0
        self._count_lock = threading.Lock()

    def handler(self) -> Handler:
        if self._handler is None:
            self._handler = load_handler(self.module)
        return self._handler

    def poll_once(self, wait_seconds: int = LONG_POLL_SECONDS) -> int:
        """Receive up to one batch and deliver it. Answers how many messages were received."""
        answer = self.sqs.receive_message(
            QueueUrl=self.url,
            MaxNumberOfMessages=BATCH_SIZE,
            WaitTimeSeconds=wait_seconds,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        messages = answer.get("Messages") or []
        if messages:
            self.deliver(messages)
        return len(messages)

    def deliver(self, messages: list[dict[str, Any]]) -> None:
        event = sqs_event(messages, self.arn, self.settings.region)
        try:
            result = self.handler()(event, LambdaContext(function_name=f"{self.settings.prefix}-{self.kind}"))
            failed = failed_message_ids(result)
        except Exception:
            log.exception("%s handler raised; the batch will be redelivered", self.kind)
            failed = None
        if failed is None:
            failed = {m["MessageId"] for m in messages}
        done = [m for m in messages if m["MessageId"] not in failed]
        with self._count_lock:
            self.failed += len(messages) - len(done)
            self.delivered += len(done)
        for start in range(0, len(done), 10):
            batch = done[start : start + 10]
            entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)]
            self.sqs.delete_message_batch(QueueUrl=self.url, Entries=entries)


class Dispatcher:
    """The queue workers and the scheduler, each on its own thread, until `stop()`."""

    def __init__(
        self,
        settings: Settings,
        *,
        schedules: dict[str, tuple[str, float]] | None = None,
        handlers: dict[str, Handler] | None = None,
        pollers_per_queue: int = POLLERS_PER_QUEUE,
        notify_stream: bool = True,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock or (lambda: datetime.now(UTC))
        self.workers = [QueueWorker(settings, kind, (handlers or {}).get(kind)) for kind in QUEUE_HANDLERS]
        self.schedules = SCHEDULED_HANDLERS if schedules is None else schedules
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.schedule_runs: dict[str, int] = dict.fromkeys(self.schedules, 0)
        self.pollers_per_queue = pollers_per_queue
        self.stream_worker = StreamWorker(settings, (handlers or {}).get("notify")) if notify_stream else None
        # runs/<job>/status.json when a job ends: the submit function's second event source in the template
        self.status_worker = (
            StreamWorker(settings, (handlers or {}).get("submit") or load_handler(QUEUE_HANDLERS["submit"]))
            if notify_stream
            else None
        )

    def start(self) -> None:
        for worker in self.workers:
            for n in range(self.pollers_per_queue):
                name = f"queue-{worker.kind}-{n}"
                self.threads.append(threading.Thread(target=self._poll, args=(worker,), name=name))
        for name, (module, every) in self.schedules.items():
            self.threads.append(
                threading.Thread(target=self._schedule, args=(name, module, every), name=f"schedule-{name}")
            )
        if self.stream_worker is not None:
            self.threads.append(threading.Thread(target=self._stream, name="stream-notify"))
        if self.status_worker is not None:
            self.threads.append(
                threading.Thread(target=self._stream, args=(self.status_worker,), name="stream-run-status")
            )
        self.threads.append(threading.Thread(target=self._cron, name="schedule-firings"))
        for thread in self.threads:
            thread.daemon = True
            thread.start()

    def stop(self, timeout: float = 15.0) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout)

    def _poll(self, worker: QueueWorker) -> None:
        while not self.stopping.is_set():
            try:
                worker.poll_once()
            except Exception:
                if self.stopping.is_set():
                    return
                log.exception("polling %s failed; retrying", worker.kind)
                self.stopping.wait(1.0)

    def _stream(self, worker: StreamWorker | None = None) -> None:
        worker = worker or self.stream_worker
        assert worker is not None
        while not self.stopping.wait(STREAM_POLL_SECONDS):
            try:
                worker.poll_once()
            except Exception:
                if self.stopping.is_set():
                    return
                log.exception("reading the events stream failed; retrying")

    def _schedule(self, name: str, module: str, every: float) -> None:
        while not self.stopping.wait(every):
            self.fire(name, module)

    def _cron(self) -> None:
        while not self.stopping.wait(CRON_CHECK_SECONDS):
            try:
                self.fire_schedules()
            except Exception:
                log.exception("firing due schedules failed; retrying")

    def fire_schedules(self) -> list[Any]:
        """Send the submit queue every user schedule's firing due by `clock()` (what EventBridge
        Scheduler does in AWS; moto stores schedules but never fires them)."""
        from shared.schedules.operations import fire_due_schedules

        return fire_due_schedules(self.settings, self.clock())

    def fire(self, name: str, module: str) -> None:
        """Run one scheduled handler now (what the schedule rule does at each tick)."""
        try:
            handler = load_handler(module)
        except ImportError:
            log.warning("scheduled handler %s is not available", module)
            return
        event = scheduled_event(f"{self.settings.prefix}-{name}", self.settings.region, datetime.now(UTC))
        try:
            handler(event, LambdaContext(function_name=f"{self.settings.prefix}-{name}"))
            self.schedule_runs[name] += 1
        except Exception:
            log.exception("scheduled handler %s raised", name)
