"""Failover decisions on cloud errors, restarts on exit codes, preemption notices and pipelines."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from conftest import QueueDriver

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.jobs.agent_reports import AgentReport, agent_config, report_agent_status
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import JobView, get_job
from shared.states import JobState
from shared.wiring import wiring_for

SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])
TASK = """
name: train
resources:
  cloud: aws
  cpus: 2+
  use_spot: true
  job_recovery:
    recover_on_exit_codes: [42]
run: python train.py
"""
PIPELINE = """
name: chain
---
name: prep
resources:
  cloud: aws
  cpus: 2+
run: echo prep
---
name: train
resources:
  cloud: aws
  cpus: 4+
run: echo train
"""


@pytest.fixture(autouse=True)
def sleeping_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)


def deliver(queues: QueueDriver, kind: str, records: list[dict[str, Any]] | None = None) -> None:
    handler = {"optimize": optimize_handler, "provision": provision_handler}[kind]
    batch = queues.receive(kind) if records is None else records
    assert handler(queues.event(batch), None) == {"batchItemFailures": []}


def launch_record(job_id: str, attempt: int) -> dict[str, Any]:
    body = json.dumps({"job_id": job_id, "attempt": attempt, "action": "launch"})
    return {"messageId": f"delayed-{job_id}-{attempt}", "body": body}


def view(settings: Settings, job_id: str) -> JobView:
    return get_job(wiring_for(settings), job_id, owner=None)


def report_all(settings: Settings, job_id: str, phase: str, exit_code: int | None = None) -> None:
    cluster = view(settings, job_id).cluster
    assert cluster is not None
    for node in cluster["nodes"]:
        instance_id = node["instance_id"]
        report_agent_status(
            wiring_for(settings), AgentReport(job_id, instance_id, phase, exit_code=exit_code)
        )


def test_transient_errors_retry_the_same_candidate_later_then_move_on(stack: Settings, queues: QueueDriver):
    LocalCloud(stack.home).set_capacity_rules({"transient": ["aws/us-east-1/us-east-1a"]})
    job_id = submit_job(wiring_for(stack), SubmitJob.from_text(owner="alice", task_text=TASK)).job_id
    deliver(queues, "optimize")
    deliver(queues, "provision")
    assert view(stack, job_id).state == JobState.PROVISIONING
    assert queues.delayed_count("provision") == 1
    for _ in range(stack.max_transient_retries):
        deliver(queues, "provision", [launch_record(job_id, 0)])
    landed = view(stack, job_id)
    assert landed.state == JobState.SETTING_UP and landed.zone == "us-east-1b"
    job = wiring_for(stack).store.get(job_id)
    assert job is not None and int(job.transient_retries) == stack.max_transient_retries


def test_an_invalid_launch_fails_the_job_with_the_clouds_message(stack: Settings, queues: QueueDriver):
    LocalCloud(stack.home).set_capacity_rules({"invalid": ["aws"]})
    job_id = submit_job(wiring_for(stack), SubmitJob.from_text(owner="alice", task_text=TASK)).job_id
    deliver(queues, "optimize")
    deliver(queues, "provision")
    failed = view(stack, job_id)
    assert failed.state == JobState.FAILED
    assert failed.reason is not None and "local cloud: invalid in aws/us-east-1/us-east-1a" in failed.reason


def test_an_exit_code_listed_in_recover_on_exit_codes_relaunches(stack: Settings, queues: QueueDriver):
    job_id = submit_job(wiring_for(stack), SubmitJob.from_text(owner="alice", task_text=TASK)).job_id
    deliver(queues, "optimize")
    deliver(queues, "provision")
    report_all(stack, job_id, "running")
    report_all(stack, job_id, "failed", exit_code=42)
    assert view(stack, job_id).state == JobState.RECOVERING
    deliver(queues, "provision")
    deliver(queues, "optimize")
    deliver(queues, "provision")
    assert view(stack, job_id).state == JobState.SETTING_UP
    report_all(stack, job_id, "failed", exit_code=1)  # not listed, no restarts allowed
    assert view(stack, job_id).state == JobState.FAILED


def test_a_preemption_notice_from_the_agent_starts_recovery_once(stack: Settings, queues: QueueDriver):
    job_id = submit_job(wiring_for(stack), SubmitJob.from_text(owner="alice", task_text=TASK)).job_id
    deliver(queues, "optimize")
    deliver(queues, "provision")
    report_all(stack, job_id, "running")
    node = view(stack, job_id).cluster["nodes"][0]  # type: ignore[index]
    for _ in range(2):
        report_agent_status(wiring_for(stack), AgentReport(job_id, node["instance_id"], "preempting"))
    recovering = view(stack, job_id)
    assert recovering.state == JobState.RECOVERING and recovering.recoveries == 1 and recovering.attempt == 1


def test_a_serial_pipeline_runs_its_tasks_one_after_another(stack: Settings, queues: QueueDriver):
    job_id = submit_job(wiring_for(stack), SubmitJob.from_text(owner="alice", task_text=PIPELINE)).job_id
    deliver(queues, "optimize")
    deliver(queues, "provision")
    first = view(stack, job_id)
    config = agent_config(wiring_for(stack), job_id, first.cluster["nodes"][0]["instance_id"])  # type: ignore[index]
    assert config is not None and config.run == "echo prep"
    report_all(stack, job_id, "succeeded", exit_code=0)
    assert view(stack, job_id).state == JobState.PLANNED
    deliver(queues, "provision")  # teardown of the first task's cluster, and the second launch
    second = view(stack, job_id)
    assert second.state == JobState.SETTING_UP and second.attempt == 1
    config = agent_config(wiring_for(stack), job_id, second.cluster["nodes"][0]["instance_id"])  # type: ignore[index]
    assert config is not None and config.run == "echo train"
    report_all(stack, job_id, "succeeded", exit_code=0)
    assert view(stack, job_id).state == JobState.SUCCEEDED
    deliver(queues, "provision")
    assert [n for n in LocalCloud(stack.home).list_owned() if n.state == "running"] == []


def test_a_failure_report_that_loses_a_race_is_applied_on_a_fresh_read(
    stack: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = submit_job(wiring_for(stack), SubmitJob.from_text(owner="alice", task_text=TASK)).job_id
    deliver(queues, "optimize")
    deliver(queues, "provision")
    report_all(stack, job_id, "running")
    store_class = type(wiring_for(stack).store)
    real_move = store_class.move
    lost = []

    def move_losing_once(self: Any, job: Any, to: JobState, *args: Any, **kwargs: Any) -> bool:
        if to == JobState.FAILED and not lost:
            lost.append(to)
            return False  # as if another report had moved the job first
        return real_move(self, job, to, *args, **kwargs)

    monkeypatch.setattr(store_class, "move", move_losing_once)
    report_all(stack, job_id, "failed", exit_code=1)
    assert lost and view(stack, job_id).state == JobState.FAILED


def test_the_launch_carries_the_tasks_image_disk_ports_and_labels(
    stack: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    specs: list[Any] = []
    real_launch = LocalCloud.launch

    def recording_launch(self: LocalCloud, spec: Any) -> Any:
        specs.append(spec)
        return real_launch(self, spec)

    monkeypatch.setattr(LocalCloud, "launch", recording_launch)
    extra = (
        "use_spot: true\n  image_id: ami-0123\n  disk_size: 100\n  ports: [8080, 10000-10010]\n"
        "  labels:\n    team: ml"
    )
    job_id = submit_job(
        wiring_for(stack), SubmitJob.from_text(owner="alice", task_text=TASK.replace("use_spot: true", extra))
    ).job_id
    deliver(queues, "optimize")
    deliver(queues, "provision")
    [spec] = specs
    assert (spec.image_id, spec.disk_size_gb, spec.ports) == ("ami-0123", 100, ("8080", "10000-10010"))
    assert spec.labels == {"team": "ml"} and spec.job_id == job_id


def test_the_plan_only_names_clouds_a_provider_serves(
    stack: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKYLESS_PROVIDERS", "gcp=local")
    task = TASK.replace("  cloud: aws\n", "")
    job_id = submit_job(
        wiring_for(stack.with_(providers="gcp=local")), SubmitJob.from_text(owner="alice", task_text=task)
    ).job_id
    deliver(queues, "optimize")
    planned = view(stack, job_id)
    assert planned.plan is not None
    assert {c["cloud"] for c in planned.plan["tasks"][0]["candidates"]} == {"gcp"}
