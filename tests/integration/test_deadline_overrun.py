"""A deadline job whose task runs past its `--hours` estimate, through the real handlers against moto's
server and the local cloud: launched with `skyless launch --deadline --hours` and watched with
`skyless status` (typer's CliRunner against the API on a local port), preempted through the agent's report,
its deadline checks delivered late and twice. Past the estimate the rest of the work is unknown: after a
preemption it restarts on on-demand at once (no spot, no wait); on on-demand it stays; its timeline says
so once."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from chalice.test import Client
from conftest import QueueDriver
from test_dashboard_pages import Browser
from typer.testing import CliRunner

from cli.main import app as cli
from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from functions.submit.app import app
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.jobs.agent_reports import AgentReport, report_agent_status
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import JobView, get_job
from shared.states import JobState
from shared.store.jobs import DynamoJobStore
from shared.store.models import JobModel
from shared.wiring import wiring_for

SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])
TASK = """
name: train
resources:
  cloud: aws
  region: us-east-1
  cpus: 2+
  use_spot: true
run: python train.py
"""
OVERHEAD = 4.0
NOTE = "ran its estimated"


@pytest.fixture
def fast(stack: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The stack with a shortened clock: a launch costs 4 s of progress, the control plane acts within 2 s."""
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)
    settings = stack.with_(
        restart_overhead_seconds=int(OVERHEAD), deadline_reaction_seconds=2, deadline_retry_seconds=3
    )
    for name, value in settings.to_env().items():
        monkeypatch.setenv(name, value)
    return settings


def deliver(
    queues: QueueDriver, kind: str, records: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    handler = {"optimize": optimize_handler, "provision": provision_handler}[kind]
    batch = queues.receive(kind) if records is None else records
    assert handler(queues.event(batch), None) == {"batchItemFailures": []}
    return batch


def copies(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**r, "messageId": r["messageId"] + "-copy"} for r in records]


def view(settings: Settings, job_id: str) -> JobView:
    return get_job(wiring_for(settings), job_id, owner=None)


def stored(settings: Settings, job_id: str) -> JobModel:
    job = wiring_for(settings).store.get(job_id)
    assert job is not None
    return job


def notes(settings: Settings, job_id: str) -> list[str]:
    return [e.message for e in wiring_for(settings).store.timeline(job_id) if NOTE in e.message]


def run_past_the_estimate(settings: Settings, job_id: str) -> None:
    job = stored(settings, job_id)
    cluster = wiring_for(settings).store.cluster(job.cluster_id)
    assert cluster is not None
    reached = float(cluster.launched_at) + float(job.restart_overhead) + float(job.work_seconds)
    time.sleep(max(0.0, reached - time.time()) + 0.5)


def live_clusters(settings: Settings, job_id: str) -> set[str]:
    return {n.cluster_id for n in LocalCloud(settings.home).list_job(job_id) if n.state == "running"}


def status(cli_api: list[str], job_id: str) -> str:
    result = CliRunner().invoke(cli, ["status", job_id, *cli_api], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("spot_after", ["spot still offered", "spot gone"])
def test_preempted_past_its_estimate_the_job_restarts_on_demand_at_once_and_says_so_once(
    fast: Settings, queues: QueueDriver, cli_api: list[str], tmp_path: Path, spot_after: str
):
    path = tmp_path / "train.yaml"
    path.write_text(TASK)
    launched = CliRunner().invoke(
        cli, ["launch", str(path), "--deadline", "2h", "--hours", "0.002", "-d", *cli_api]
    )  # 7.2 s of compute, 2 h of slack: within its estimate the policy takes spot
    assert launched.exit_code == 0, launched.output
    assert "after any preemption once it runs past its --hours" in " ".join(launched.output.split())
    job_id = launched.output.split("Job ", 1)[1].split()[0]
    deliver(queues, "optimize")
    deliver(queues, "provision")
    within = view(fast, job_id)
    assert within.state == JobState.SETTING_UP and within.use_spot is True
    assert within.deadline is not None and within.deadline["past_estimate"] is False
    assert "work done: 0.00 of 0.002 h" in status(cli_api, job_id)

    run_past_the_estimate(fast, job_id)
    running = status(cli_api, job_id)
    assert "past its 0.002 h estimate (the rest is unknown)" in running and "market: spot" in running
    assert notes(fast, job_id) == []  # a running spot cluster is kept: nothing decided yet

    if spot_after == "spot gone":  # within its estimate, 2 h of slack would wait for spot
        LocalCloud(fast.home).set_capacity_rules({"no_spot_capacity": ["*"]})
    node = view(fast, job_id).cluster["nodes"][0]  # type: ignore[index]
    report_agent_status(wiring_for(fast), AgentReport(job_id, node["instance_id"], "preempting"))
    replan = deliver(queues, "optimize")
    launch = deliver(queues, "provision")  # the old cluster's teardown and the launch
    deliver(queues, "optimize", copies(replan))  # every message again, late
    deliver(queues, "provision", copies(launch))

    job = view(fast, job_id)
    assert job.state == JobState.SETTING_UP and job.attempt == 1 and job.use_spot is False
    assert (
        job.deadline is not None and job.deadline["market"] == "on_demand" and job.deadline["past_estimate"]
    )
    assert job.deadline["why"].startswith("past its 7 s estimate: on-demand")
    assert live_clusters(fast, job_id) == {f"{job_id}-1"}
    record = stored(fast, job_id)
    assert record.next_check_at is None and record.overran_at is not None  # on on-demand it stays
    assert float(record.work_done) > float(record.work_seconds)  # the work counted, not capped
    history = json.loads(record.spot_history)
    assert all(h["last_unavailable"] is None or h["interruptions"] for h in history.values())  # no probe
    [note] = notes(fast, job_id)
    assert "ran its estimated 7 s of compute" in note and "on-demand at once" in note
    shown = status(cli_api, job_id)
    assert "past its 0.002 h estimate" in shown and "market: on-demand" in shown and NOTE in shown
    with Client(app) as client:  # the dashboard's job page, signed in as the job's owner
        browser = Browser(client)
        browser.sign_in(cli_api[cli_api.index("--api-key") + 1])
        page = browser.get(f"/dashboard/jobs/{job_id}")
    assert page.status_code == 200 and "past its 0.002 h estimate: the rest is unknown" in page.body.decode()


def test_on_demand_past_its_estimate_stays_and_a_late_check_delivered_twice_notes_it_once(
    fast: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
):
    LocalCloud(fast.home).set_capacity_rules({"no_spot_capacity": ["*"]})
    job_id = submit_job(
        wiring_for(fast),
        SubmitJob.from_text(owner="alice", task_text=TASK, deadline="24s", hours=8 / 3600),
    ).job_id
    deliver(queues, "optimize")
    deliver(queues, "provision")
    job = stored(fast, job_id)  # no spot and little slack: on-demand, asking to try spot again soon
    assert job.state == JobState.SETTING_UP and job.market == "on_demand" and job.next_check_at is not None
    LocalCloud(fast.home).set_capacity_rules({})  # spot is back: within its estimate the check would take it
    run_past_the_estimate(fast, job_id)  # the check arrives late, past the estimate
    [check] = queues.receive("provision")
    assert json.loads(check["body"])["action"] == "deadline_check"
    assert json.loads(check["body"])["not_before"] == float(job.next_check_at)
    before = stored(fast, job_id)  # what a second Lambda, given a copy at the same moment, read
    deliver(queues, "provision", [check, *copies([check])])
    deliver(queues, "provision", copies(copies([check])))  # and once more, later
    writes: list[bool] = []
    save = DynamoJobStore.save_progress

    def saving(self: DynamoJobStore, *args: Any, **kwargs: Any) -> bool:
        writes.append(save(self, *args, **kwargs))
        return writes[-1]

    with monkeypatch.context() as patch:  # the concurrent copy: it read the job before the first wrote
        patch.setattr(DynamoJobStore, "get", lambda self, job_id: before)
        patch.setattr(DynamoJobStore, "save_progress", saving)
        deliver(queues, "provision", copies(copies(copies([check]))))
    assert writes == [False]  # it reached the conditional write, and lost it

    after = stored(fast, job_id)
    assert after.state == JobState.SETTING_UP and int(after.attempt) == 0 and after.market == "on_demand"
    assert live_clusters(fast, job_id) == {f"{job_id}-0"}  # kept: no spot cluster made, none moved
    assert after.next_check_at is None and after.overran_at is not None
    assert (after.policy_reason or "").startswith("past its 8 s estimate: the running cluster is kept")
    assert len(notes(fast, job_id)) == 1
    assert queues.receive("provision") == []  # no check sent on: it does not leave on-demand
