"""Teardown never waits behind launches (issue 20): a job's teardown goes to its own queue, which the
provision function reads through its own event source (infra/template.yaml; the local dispatcher polls it
apart), so a finished job's VMs are terminated while a thousand launch messages wait behind it."""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from test_reaper import local_spec, running

from functions.provision.handler import handler as provision_handler
from local_runtime.dispatcher import QUEUE_HANDLERS, Dispatcher
from shared.aws.sessions import aws_client
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.jobs.messages import cluster_id_for, send_teardown
from shared.wiring import wiring_for

LAUNCHES = 1000
SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])


@pytest.fixture(autouse=True)
def sleeping_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)


def waiting(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


def test_a_teardown_is_handled_while_a_thousand_launches_wait(stack: Settings) -> None:
    sqs = aws_client("sqs", stack)
    provision_url = sqs.get_queue_url(QueueName=stack.queue_name("provision"))["QueueUrl"]

    def burst(start: int) -> None:
        entries = [
            {"Id": str(n), "MessageBody": json.dumps({"job_id": f"job-burst{start + n:07d}", "attempt": 0})}
            for n in range(10)
        ]
        sqs.send_message_batch(QueueUrl=provision_url, Entries=entries)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(burst, range(0, LAUNCHES, 10)))
    finished = local_spec("job-00000finished")
    LocalCloud(stack.home, api_url=stack.api_url).launch(finished)
    assert finished.cluster_id in running(stack)

    def launching(event: dict[str, Any], context: Any) -> Any:  # a launch takes seconds on a real cloud
        time.sleep(0.5)
        return provision_handler(event, context)

    dispatcher = Dispatcher(
        stack,
        schedules={},
        handlers={"provision": launching, "teardown": provision_handler},
        pollers_per_queue=1,
        notify_stream=False,
    )
    dispatcher.start()
    try:
        sent = time.monotonic()
        send_teardown(wiring_for(stack), finished.job_id, 0, cluster_id_for(finished.job_id, 0))
        while finished.cluster_id in running(stack) and time.monotonic() - sent < 30:
            time.sleep(0.2)
        took = time.monotonic() - sent
        still_waiting = waiting(sqs, provision_url)
    finally:
        dispatcher.stop()
    assert finished.cluster_id not in running(stack), "the teardown waited behind the launches"
    assert took < 10
    assert still_waiting > LAUNCHES // 2
    assert QUEUE_HANDLERS["teardown"] == QUEUE_HANDLERS["provision"]  # one function, two event sources
