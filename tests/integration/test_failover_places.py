"""Failover over every feasible place: the kept list spans clouds, and when it is used up the job is
re-planned with what failed blocked; it waits only when nothing feasible is left. `launch` and `status`
say which places were tried and why each failed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import QueueDriver
from typer.testing import CliRunner

from cli.main import app as cli
from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.jobs.planning import plan_of
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import get_job
from shared.optimizer import plan_pipeline
from shared.states import JobState
from shared.task.loader import load_pipeline
from shared.wiring import wiring_for

SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])
NO_CLOUD = "name: anywhere\nresources:\n  cpus: 1+\nrun: echo hi\n"
AWS_ONLY = "name: aws-only\nresources:\n  cloud: aws\n  cpus: 2+\nrun: echo hi\n"


@pytest.fixture(autouse=True)
def sleeping_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)


def deliver(queues: QueueDriver, kind: str) -> None:
    handler = {"optimize": optimize_handler, "provision": provision_handler}[kind]
    assert handler(queues.event(queues.receive(kind)), None) == {"batchItemFailures": []}


def test_with_every_place_of_the_cheapest_cloud_out_of_capacity_a_task_naming_no_cloud_launches_elsewhere(
    stack: Settings, queues: QueueDriver, tmp_path: Path, cli_api: list[str]
) -> None:
    LocalCloud(stack.home).set_capacity_rules({"no_capacity": ["aws/*"]})
    task = tmp_path / "anywhere.yaml"
    task.write_text(NO_CLOUD)
    runner = CliRunner()
    launched = runner.invoke(cli, ["launch", str(task), "--detach", *cli_api], env={"COLUMNS": "200"})
    assert launched.exit_code == 0, launched.output
    job_id = launched.output.split("Job ", 1)[1].split()[0]
    deliver(queues, "optimize")
    job = wiring_for(stack).store.get(job_id)
    plan = plan_of(job) if job else None
    assert plan is not None and plan.tasks[0].chosen.cloud == "aws"  # aws is the cheapest ...
    deliver(queues, "provision")
    view = get_job(wiring_for(stack), job_id, owner=None)
    assert view.state == JobState.SETTING_UP and view.cloud != "aws"  # ... and the job runs elsewhere
    states = [e["state"] for e in view.timeline if e["kind"] == "state"]
    assert "WAITING" not in states
    assert queues.delayed_count("provision") == 0
    launched_event = next(e for e in view.timeline if e["state"] == "SETTING_UP")
    assert "place(s) failed" in launched_event["message"] and "aws/" in launched_event["message"]
    assert all(t.startswith("aws/") for t in launched_event["detail"]["tried"])
    assert view.tried and all(
        t["place"].startswith("aws") and "no capacity" in t["reason"] for t in view.tried
    )
    status = runner.invoke(cli, ["status", job_id, *cli_api], env={"COLUMNS": "200"})
    assert status.exit_code == 0, status.output
    tried_lines = [line for line in status.output.splitlines() if line.strip().startswith("tried: aws")]
    assert tried_lines and all("no capacity" in line for line in tried_lines)


def test_a_job_whose_kept_list_fails_is_replanned_past_it_and_reaches_a_deeper_place(
    stack: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("shared.jobs.planning.KEPT_PER_TASK", 3)  # a short list, so that it runs out
    every = plan_pipeline(load_pipeline(AWS_ONLY), wiring_for(stack).catalog, max_candidates=None)
    zones = list(dict.fromkeys(f"aws/{c.region}/{c.zone}" for c in every.tasks[0].candidates))
    job_id = submit_job(wiring_for(stack), SubmitJob.from_text(owner="alice", task_text=AWS_ONLY)).job_id
    deliver(queues, "optimize")
    job = wiring_for(stack).store.get(job_id)
    kept = plan_of(job).tasks[0].candidates if job else []  # type: ignore[union-attr]
    kept_zones = {f"aws/{c.region}/{c.zone}" for c in kept}
    deeper = next(z for z in reversed(zones) if z not in kept_zones)
    LocalCloud(stack.home).set_capacity_rules({"no_capacity": [z for z in zones if z != deeper]})
    deliver(queues, "provision")
    view = get_job(wiring_for(stack), job_id, owner=None)
    assert view.state == JobState.SETTING_UP, view.timeline[-1]["message"]
    assert f"aws/{view.region}/{view.zone}" == deeper
    assert len(view.tried) < len(zones) - 1  # zones of a region that all failed are kept as one block


def test_when_nothing_feasible_is_left_the_job_waits_and_says_what_it_tried(
    stack: Settings, queues: QueueDriver
) -> None:
    LocalCloud(stack.home).set_capacity_rules({"no_capacity": ["aws/*"]})
    job_id = submit_job(wiring_for(stack), SubmitJob.from_text(owner="alice", task_text=AWS_ONLY)).job_id
    deliver(queues, "optimize")
    deliver(queues, "provision")
    view = get_job(wiring_for(stack), job_id, owner=None)
    assert view.state == JobState.WAITING
    assert queues.delayed_count("provision") == 1
    assert [t["place"] for t in view.tried] == ["aws"]  # every region of the cloud failed: one block
    waiting = view.timeline[-1]
    assert waiting["state"] == "WAITING" and waiting["detail"]["tried"]
