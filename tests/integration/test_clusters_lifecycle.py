"""Named clusters through the real pieces: the operations the API calls, the provision handler fed the
queue's real messages, local-cloud nodes running the real agent in cluster mode against the real API over
HTTP. Every verb is also repeated (a duplicated message, a second request) and raced."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import QueueDriver

from functions.provision.handler import handler as provision_handler
from local_runtime.api_server import ApiServer, load_app
from shared.clouds.local import LocalCloud
from shared.clusters import operations, views
from shared.clusters.provisioning import cluster_step
from shared.config import Settings
from shared.errors import ConflictError, UserError
from shared.jobs.reaper import reap_orphans
from shared.store.cluster_records import ClusterStore
from shared.wiring import wiring_for

DEV = """
name: dev
resources:
  cloud: aws
  cpus: 2+
setup: |
  echo setup-ran >> ~/setup-count
run: |
  echo "hello from $SKYPILOT_CLUSTER_INFO rank $SKYPILOT_NODE_RANK"
  echo first > ~/marker
"""
OWNER = "alice"


@pytest.fixture
def api(stack: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = ApiServer(load_app(), "127.0.0.1", port)
    server.start()
    monkeypatch.setenv("SKYLESS_API_URL", server.url)
    monkeypatch.setenv("SKYLESS_LOG_FLUSH_SECONDS", "0.3")
    monkeypatch.setenv("SKYLESS_CLUSTER_POLL_SECONDS", "0.3")
    monkeypatch.setenv("SKYLESS_AUTOSTOP_MINUTE_SECONDS", "1")
    yield Settings.from_env()
    cloud = LocalCloud(stack.home)
    for cluster_id in {node.cluster_id for node in cloud.list_owned()}:
        cloud.terminate(cluster_id)
    server.stop()


def deliver(queues: QueueDriver, wait_seconds: int = 0) -> list[dict[str, Any]]:
    """Every visible provision message through the real handler; answers their bodies."""
    records = queues.receive("provision", wait_seconds=wait_seconds)
    assert provision_handler(queues.event(records), None) == {"batchItemFailures": []}
    return [json.loads(r["body"]) for r in records]


def wait_for(what: Callable[[], Any], timeout: float = 30, every: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting; last value {value!r}")
        time.sleep(every)


def cluster(settings: Settings, name: str = "dev") -> Any:
    return ClusterStore(settings).by_name(OWNER, name)


def job_state(settings: Settings, number: int, name: str = "dev") -> str:
    return views.get_cluster_job(settings, owner=OWNER, name=name, number=number)["state"]


def log_of(settings: Settings, number: int, name: str = "dev") -> str:
    return views.read_cluster_logs(settings, owner=OWNER, name=name, number=number)["text"]


def sandbox(settings: Settings, name: str = "dev") -> Path:
    record = cluster(settings, name)
    return LocalCloud(settings.home).node_home(record.provider_cluster, 0)


def live_nodes(settings: Settings) -> list[Any]:
    return [n for n in LocalCloud(settings.home).list_owned() if n.state == "running"]


def launch_up(settings: Settings, queues: QueueDriver, name: str = "dev", **options: Any) -> Any:
    outcome = operations.launch_on_cluster(settings, owner=OWNER, name=name, task_text=DEV, **options)
    deliver(queues)  # the launch
    wait_for(lambda: cluster(settings, name).state == "UP")
    return outcome


def test_launch_exec_twice_reuses_the_node_and_its_home_and_runs_setup_once(
    api: Settings, queues: QueueDriver
) -> None:
    outcome = launch_up(api, queues)
    assert outcome.action == "created" and outcome.job.number == 1
    wait_for(lambda: job_state(api, 1) == "SUCCEEDED")
    assert "hello from" in wait_for(lambda: log_of(api, 1))
    first = operations.exec_on_cluster(api, owner=OWNER, name="dev", command="cat ~/marker; echo second >> ~/marker")
    wait_for(lambda: job_state(api, first.number) == "SUCCEEDED")
    second = operations.exec_on_cluster(api, owner=OWNER, name="dev", command="cat ~/marker ~/setup-count")
    wait_for(lambda: job_state(api, second.number) == "SUCCEEDED")
    text = wait_for(lambda: log_of(api, second.number))
    assert text.splitlines() == ["first", "second", "setup-ran"]  # the files of job 1 and 2; setup once
    queue = views.cluster_queue(api, owner=OWNER, name="dev")
    assert [(j["job"], j["state"]) for j in queue] == [(3, "SUCCEEDED"), (2, "SUCCEEDED"), (1, "SUCCEEDED")]
    assert [j["with_setup"] for j in queue] == [False, False, True]
    assert len(live_nodes(api)) == 1  # one node all along

    operations.down_cluster(api, owner=OWNER, name="dev")
    deliver(queues)
    assert cluster(api) is None  # the name is free again
    assert live_nodes(api) == []
