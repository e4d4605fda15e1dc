"""Correlated preemptions through the real handlers: a preemption cools its zone (a storm, its region) for
every job planning spot there; recovery goes to the next place, then on-demand where the task allows it,
and back into a cooling zone only when nothing else is left."""

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
from functions.spot_watch.handler import handler as spot_watch_handler
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.jobs.agent_reports import AgentReport, report_agent_status
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import JobView, get_job
from shared.states import JobState
from shared.wiring import wiring_for

SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])
SPOT = "name: train\nresources:\n  cloud: aws\n  cpus: 2+\n  use_spot: true\nrun: python train.py\n"
FAILOVER = SPOT.replace("use_spot: true", "use_spot: true\n  job_recovery: FAILOVER")
SPOT_THEN_ON_DEMAND = """
name: either
resources:
  infra: aws/us-east-1/us-east-1a
  cpus: 2+
  job_recovery: FAILOVER
  any_of:
    - use_spot: true
    - use_spot: false
run: python train.py
"""


@pytest.fixture(autouse=True)
def sleeping_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)


def deliver(queues: QueueDriver, kind: str) -> None:
    handler = {"optimize": optimize_handler, "provision": provision_handler}[kind]
    assert handler(queues.event(queues.receive(kind)), None) == {"batchItemFailures": []}


def launch(settings: Settings, queues: QueueDriver, task: str = SPOT, owner: str = "alice") -> JobView:
    job_id = submit_job(wiring_for(settings), SubmitJob.from_text(owner=owner, task_text=task)).job_id
    deliver(queues, "optimize")
    deliver(queues, "provision")
    view = get_job(wiring_for(settings), job_id, owner=None)
    assert view.state == JobState.SETTING_UP
    return view


def preempt(settings: Settings, job_id: str) -> None:
    event = LocalCloud(settings.home).preempt(job_id, notice_seconds=0.1)
    assert event is not None
    spot_watch_handler(event, None)


def relaunch(settings: Settings, queues: QueueDriver, job_id: str) -> JobView:
    deliver(queues, "provision")  # the old cluster's teardown
    deliver(queues, "optimize")
    deliver(queues, "provision")
    return get_job(wiring_for(settings), job_id, owner=None)


def where(view: JobView) -> str:
    return f"{view.cloud}/{view.region}/{view.zone}"


def test_a_preemption_cools_its_zone_for_a_new_job_planning_spot_there(
    stack: Settings, queues: QueueDriver, tmp_path: Path, cli_api: list[str]
) -> None:
    first = launch(stack, queues)
    preempt(stack, first.job_id)
    task = tmp_path / "spot.yaml"
    task.write_text(SPOT)
    runner = CliRunner()
    launched = runner.invoke(cli, ["launch", str(task), "--detach", *cli_api], env={"COLUMNS": "200"})
    job_id = launched.output.split("Job ", 1)[1].split()[0]
    deliver(queues, "optimize")
    second = get_job(wiring_for(stack), job_id, owner=None)
    assert second.plan is not None
    chosen = second.plan["tasks"][0]["candidates"][0]
    assert f"aws/{chosen['region']}/{chosen['zone']}" != where(first)  # the cheapest zone is cooling
    cooled = [
        c for c in second.plan["tasks"][0]["candidates"] if f"aws/{c['region']}/{c['zone']}" == where(first)
    ]
    assert cooled and all(c["use_spot"] for c in cooled)
    assert second.plan["tasks"][0]["candidates"][-len(cooled) :] == cooled  # still there, tried last
    assert any(where(first) in note and "tried last" in note for note in second.plan["notes"])
    assert [c["place"] for c in second.cooling] == [where(first)]
    status = runner.invoke(cli, ["status", job_id, *cli_api], env={"COLUMNS": "200"})
    assert f"cooling: zone {where(first)} after 1 spot preemption(s)" in status.output


def test_recovery_goes_to_the_next_zone_never_back_into_the_cooling_one(
    stack: Settings, queues: QueueDriver
) -> None:
    first = launch(stack, queues, FAILOVER)  # FAILOVER does not block the region: only cooling steers it
    preempt(stack, first.job_id)
    second = relaunch(stack, queues, first.job_id)
    assert second.state == JobState.SETTING_UP and second.attempt == 1
    assert where(second) != where(first)
    assert second.region == first.region  # the next zone of the plan, same region (FAILOVER)


def test_recovery_falls_back_to_on_demand_before_a_cooling_zones_spot(
    stack: Settings, queues: QueueDriver
) -> None:
    first = launch(stack, queues, SPOT_THEN_ON_DEMAND)
    assert first.use_spot is True
    preempt(stack, first.job_id)
    second = relaunch(stack, queues, first.job_id)
    assert second.state == JobState.SETTING_UP
    assert where(second) == where(first) and second.use_spot is False  # the only other candidate


def test_one_preemption_reported_three_times_counts_once(stack: Settings, queues: QueueDriver) -> None:
    first = launch(stack, queues)
    node = first.cluster["nodes"][0]["instance_id"]  # type: ignore[index]
    report_agent_status(wiring_for(stack), AgentReport(first.job_id, node, "running"))
    report_agent_status(
        wiring_for(stack), AgentReport(first.job_id, node, "preempting")
    )  # the agent's notice
    event = LocalCloud(stack.home).preempt(first.job_id, notice_seconds=0.1)
    assert event is not None
    spot_watch_handler(event, None)  # then the cloud's event, twice
    spot_watch_handler(event, None)
    counted = wiring_for(stack).cooldowns.preemptions()
    assert list(counted) == [where(first)] and len(counted[where(first)]) == 1
    assert counted[where(first)][0].endswith(f"#{first.job_id}-0")


def test_a_storm_over_a_region_cools_the_whole_region(stack: Settings, queues: QueueDriver) -> None:
    jobs = [launch(stack, queues, FAILOVER) for _ in range(3)]
    region = jobs[0].region
    assert {j.region for j in jobs} == {region}
    for job in jobs:
        preempt(stack, job.job_id)
    cooling = {(c.scope, c.place) for c in wiring_for(stack).cooldowns.cooling()}
    assert ("region", f"aws/{region}") in cooling
    fresh = launch(stack, queues, SPOT, owner="bob")
    assert fresh.region != region  # every zone of the region is behind every other region's spot
