"""Heartbeats are written only when the recorded one is getting old: fewer writes, and a live node is
still never judged silent."""

from __future__ import annotations

import json
import sys
import time

import pytest
from conftest import QueueDriver

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from shared.config import Settings
from shared.jobs.agent_reports import HEARTBEAT_WRITE_SHARE, AgentReport, report_agent_status
from shared.jobs.nodes import nodes_of
from shared.jobs.reconcile import reconcile
from shared.jobs.submission import SubmitJob, submit_job
from shared.states import JobState
from shared.wiring import wiring_for

SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])
TASK = "name: hb\nresources:\n  cloud: aws\n  cpus: 2+\nrun: echo hi\n"


@pytest.fixture(autouse=True)
def sleeping_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)


def running_job(settings: Settings, queues: QueueDriver) -> tuple[str, str]:
    job_id = submit_job(wiring_for(settings), SubmitJob.from_text(owner="alice", task_text=TASK)).job_id
    for handler, kind in ((optimize_handler, "optimize"), (provision_handler, "provision")):
        assert handler(queues.event(queues.receive(kind)), None) == {"batchItemFailures": []}
    store = wiring_for(settings).store
    cluster = store.cluster(store.get(job_id).cluster_id)  # type: ignore[union-attr]
    (instance_id,) = nodes_of(cluster)  # type: ignore[arg-type]
    for phase in ("setting_up", "running"):
        report_agent_status(wiring_for(settings), AgentReport(job_id, instance_id, phase))
    return job_id, instance_id


def recorded_heartbeat(settings: Settings, job_id: str, instance_id: str) -> float:
    store = wiring_for(settings).store
    cluster = store.cluster(store.get(job_id).cluster_id)  # type: ignore[union-attr]
    return float(nodes_of(cluster)[instance_id]["heartbeat_at"])  # type: ignore[arg-type]


def test_a_heartbeat_soon_after_the_last_write_writes_nothing(stack: Settings, queues: QueueDriver) -> None:
    job_id, instance_id = running_job(stack, queues)
    before = recorded_heartbeat(stack, job_id, instance_id)
    status = report_agent_status(wiring_for(stack), AgentReport(job_id, instance_id, "heartbeat"))
    assert status.state == JobState.RUNNING and not status.cancel
    assert recorded_heartbeat(stack, job_id, instance_id) == before


def test_a_heartbeat_once_the_record_is_old_is_written_and_keeps_the_node_alive(
    stack: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id, instance_id = running_job(stack, queues)
    before = recorded_heartbeat(stack, job_id, instance_id)
    later = before + stack.silent_after_seconds * HEARTBEAT_WRITE_SHARE + 1
    monkeypatch.setattr(time, "time", lambda: later)
    report_agent_status(wiring_for(stack), AgentReport(job_id, instance_id, "heartbeat"))
    assert recorded_heartbeat(stack, job_id, instance_id) == later
    # The worst a live node's record can lag is the write share plus one heartbeat: still not silent.
    worst = later + stack.silent_after_seconds * HEARTBEAT_WRITE_SHARE + stack.heartbeat_seconds
    assert reconcile(now=worst, wiring=wiring_for(stack)) == {}
