"""The lifecycle with the real node agent: local-cloud nodes run `python -m node_agent.agent`, which
fetches its config from the real API (the Chalice app served over HTTP) and reports back. Queue
messages are delivered to the real handlers by the test, as the dispatcher would."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import QueueDriver

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from functions.spot_watch.handler import handler as spot_watch_handler
from local_runtime.api_server import ApiServer, load_app
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.jobs.cancellation import cancel_job
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import JobView, ReadLogs, get_job, read_logs
from shared.states import JobState, is_terminal
from shared.wiring import wiring_for

COUNTER = """
name: counter
resources:
  cloud: aws
  cpus: 2+
  use_spot: true
run: |
  for i in $(seq 1 {steps}); do
    echo "step $i on rank $SKYPILOT_NODE_RANK of $SKYPILOT_NUM_NODES"; sleep 1
  done
"""


@pytest.fixture
def api(stack: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = ApiServer(load_app(), "127.0.0.1", port)
    server.start()
    monkeypatch.setenv("SKYLESS_API_URL", server.url)
    monkeypatch.setenv("SKYLESS_LOG_FLUSH_SECONDS", "0.5")
    monkeypatch.setenv("SKYLESS_HEARTBEAT_SECONDS", "2")
    yield Settings.from_env()
    cloud = LocalCloud(stack.home)
    for cluster_id in {node.cluster_id for node in cloud.list_owned()}:
        cloud.terminate(cluster_id)
    server.stop()


def deliver(queues: QueueDriver, kind: str) -> None:
    handler = {"optimize": optimize_handler, "provision": provision_handler}[kind]
    assert handler(queues.event(queues.receive(kind)), None) == {"batchItemFailures": []}


def tear_down(settings: Settings, queues: QueueDriver, timeout: float = 30) -> None:
    """Deliver the provision function's messages until no node of the stack is left running: the last
    node's report reaches the API over HTTP, which ends the job and only then queues its teardown."""
    deadline = time.monotonic() + timeout
    deliver(queues, "provision")
    while live_nodes(settings) and time.monotonic() < deadline:
        time.sleep(0.3)
        deliver(queues, "provision")


def wait_for(
    settings: Settings, job_id: str, condition: Callable[[JobView], bool], timeout: float = 60
) -> JobView:
    deadline = time.monotonic() + timeout
    view = get_job(wiring_for(settings), job_id, owner=None)
    while not condition(view) and time.monotonic() < deadline:
        time.sleep(0.3)
        view = get_job(wiring_for(settings), job_id, owner=None)
    assert condition(view), f"{view.state}: {[e['message'] for e in view.timeline]}"
    return view


def log_text(settings: Settings, job_id: str, rank: int = 0) -> str:
    return read_logs(wiring_for(settings), ReadLogs(job_id, None, rank=rank)).text


def live_nodes(settings: Settings) -> list[Any]:
    return [n for n in LocalCloud(settings.home).list_owned() if n.state == "running"]


def test_real_agents_run_a_two_node_task_to_success_and_nothing_is_left(
    api: Settings, queues: QueueDriver
) -> None:
    task = COUNTER.format(steps=3).replace("name: counter", "name: counter\nnum_nodes: 2")
    job_id = submit_job(wiring_for(api), SubmitJob.from_text(owner="alice", task_text=task)).job_id
    deliver(queues, "optimize")
    deliver(queues, "provision")
    running = wait_for(api, job_id, lambda v: v.state == JobState.RUNNING)
    assert running.cluster is not None and len(running.cluster["nodes"]) == 2
    done = wait_for(api, job_id, lambda v: is_terminal(v.state))
    assert done.state == JobState.SUCCEEDED, done.reason
    wait_for(api, job_id, lambda v: "step 3 on rank 1 of 2" in log_text(api, job_id, 1), timeout=10)
    assert "step 3 on rank 0 of 2" in log_text(api, job_id, 0)
    tear_down(api, queues)
    assert live_nodes(api) == []


def test_real_agent_job_preempted_while_running_recovers_in_another_region(
    api: Settings, queues: QueueDriver
) -> None:
    job_id = submit_job(
        wiring_for(api), SubmitJob.from_text(owner="alice", task_text=COUNTER.format(steps=120))
    ).job_id
    deliver(queues, "optimize")
    deliver(queues, "provision")
    started = lambda v: v.state == JobState.RUNNING and "step 1 " in log_text(api, job_id)  # noqa: E731
    first = wait_for(api, job_id, started)
    event = LocalCloud(api.home).preempt(job_id)
    assert event is not None
    spot_watch_handler(event, None)
    assert get_job(wiring_for(api), job_id, owner=None).state == JobState.RECOVERING
    deliver(queues, "provision")  # teardown of the preempted cluster
    deliver(queues, "optimize")
    deliver(queues, "provision")
    second = wait_for(api, job_id, lambda v: v.state == JobState.RUNNING and v.attempt == 1)
    assert second.region != first.region
    assert len(live_nodes(api)) == 1
    cancel_job(wiring_for(api), job_id, owner="alice")
    deliver(queues, "provision")
    assert live_nodes(api) == []
