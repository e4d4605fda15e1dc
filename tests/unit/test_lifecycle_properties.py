"""Random delivery schedules: every message may arrive twice, late, and in any order. Whatever the
schedule, each job launches exactly one cluster, ends SUCCEEDED, and leaves nothing running."""

from __future__ import annotations

import json
import random
import sys
from typing import Any

import pytest
from conftest import QueueDriver
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from functions.spot_watch.handler import handler as spot_watch_handler
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.jobs.agent_reports import AgentReport, report_agent_status
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import get_job
from shared.states import JobState
from shared.wiring import wiring_for

SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])
TASK = "name: p\nresources:\n  cloud: aws\n  cpus: 2+\n  use_spot: true\nrun: echo hi\n"
HANDLERS = {"optimize": optimize_handler, "provision": provision_handler, "spot_watch": spot_watch_handler}


@pytest.fixture(autouse=True)
def sleeping_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)


def report_progress(stack: Settings, job_ids: list[str], rng: random.Random) -> bool:
    """Nodes of jobs that are up report running then succeeded, sometimes twice. True if any reported."""
    reported = False
    for job_id in rng.sample(job_ids, len(job_ids)):
        view = get_job(wiring_for(stack), job_id, owner=None)
        if view.state not in (JobState.SETTING_UP, JobState.RUNNING) or view.cluster is None:
            continue
        phase = "running" if view.state == JobState.SETTING_UP else "succeeded"
        for node in view.cluster["nodes"]:
            for _ in range(rng.choice((1, 2))):
                report_agent_status(
                    wiring_for(stack), AgentReport(job_id, node["instance_id"], phase, exit_code=0)
                )
        reported = True
    return reported


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_any_delivery_schedule_runs_each_job_once_and_loses_none(
    stack: Settings, queues: QueueDriver, seed: int
) -> None:
    rng = random.Random(seed)
    job_ids = [
        submit_job(wiring_for(stack), SubmitJob.from_text(owner="alice", task_text=TASK)).job_id
        for _ in range(3)
    ]
    delivered: list[tuple[str, dict[str, Any]]] = []
    for _ in range(60):
        pool = [(kind, record) for kind in HANDLERS for record in queues.receive(kind)]
        if not pool and not report_progress(stack, job_ids, rng):
            break
        pool += [item for item in pool if rng.random() < 0.5]  # duplicates
        pool += [rng.choice(delivered) for _ in range(min(len(delivered), rng.randint(0, 3)))]  # late ones
        rng.shuffle(pool)
        for kind, record in pool:
            answer = HANDLERS[kind](queues.event([record]), None)
            assert answer == {"batchItemFailures": []}
        delivered += pool
    states = {job_id: get_job(wiring_for(stack), job_id, owner=None).state for job_id in job_ids}
    assert set(states.values()) == {JobState.SUCCEEDED}, states
    nodes = [n for n in LocalCloud(stack.home).list_owned() if n.job_id in job_ids]
    assert sorted(n.job_id for n in nodes) == sorted(job_ids)  # one node per job, launched once
    assert all(n.state == "terminated" for n in nodes)
