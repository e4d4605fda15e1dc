"""Preemptions never fail a job (SkyPilot's managed jobs recover from them without limit): a spot job
preempted far more often than any limit finishes, driven through the handlers AWS calls (spot_watch with the
EC2 spot warning, provision, reconcile on its schedule). What does fail a job is a crash loop that is not a
preemption: attempts lost before their task started, too many in a row, with the reason in the timeline."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import QueueDriver

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from functions.reconcile.handler import handler as reconcile_handler
from functions.spot_watch.handler import handler as spot_watch_handler
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.jobs.agent_reports import AgentReport, report_agent_status
from shared.jobs.nodes import nodes_of
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import JobView, get_job
from shared.states import JobState
from shared.wiring import wiring_for

EVENTS = Path(__file__).resolve().parents[1] / "events"
SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])
SPOT = "name: train\nresources:\n  cloud: aws\n  cpus: 2+\n  use_spot: true\nrun: python train.py\n"
PREEMPTIONS = 25


@pytest.fixture
def settings(stack: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The stack with nodes that sleep (they never report: the test reports for them) and a boot
    grace and a silence limit of 0 s, so the scheduled sweep judges a node that stopped reporting at once."""
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)
    changed = stack.with_(boot_grace_seconds=0, silent_after_seconds=0, crash_loop_limit=3)
    for name, value in changed.to_env().items():
        monkeypatch.setenv(name, value)
    return changed


def deliver(queues: QueueDriver, kind: str) -> None:
    handler = {"optimize": optimize_handler, "provision": provision_handler}[kind]
    assert handler(queues.event(queues.receive(kind)), None) == {"batchItemFailures": []}


def view(settings: Settings, job_id: str) -> JobView:
    return get_job(wiring_for(settings), job_id, owner=None)


def spot_warning(instance_id: str) -> dict[str, Any]:
    """The EventBridge event EC2 sends two minutes before it reclaims a spot VM, for this instance."""
    event: dict[str, Any] = json.loads((EVENTS / "ec2_spot_interruption_warning.json").read_text())
    event["detail"]["instance-id"] = instance_id
    event["resources"] = [f"arn:aws:ec2:us-east-1:123456789012:instance/{instance_id}"]
    return event


def report(settings: Settings, job_id: str, phase: str) -> None:
    for node in view(settings, job_id).cluster["nodes"]:  # type: ignore[index]
        report_agent_status(wiring_for(settings), AgentReport(job_id, node["instance_id"], phase))


def live_clusters(settings: Settings, job_id: str) -> set[str]:
    return {n.cluster_id for n in LocalCloud(settings.home).list_job(job_id) if n.state == "running"}


def launch(settings: Settings, queues: QueueDriver) -> str:
    job_id = submit_job(wiring_for(settings), SubmitJob.from_text(owner="alice", task_text=SPOT)).job_id
    deliver(queues, "optimize")
    deliver(queues, "provision")
    assert view(settings, job_id).state == JobState.SETTING_UP
    return job_id


def relaunch(settings: Settings, queues: QueueDriver, job_id: str) -> JobView:
    """After a recovery: the teardown and the re-plan go through the queues; then the job is up again."""
    deliver(queues, "provision")
    deliver(queues, "optimize")
    deliver(queues, "provision")
    return view(settings, job_id)


def test_a_spot_job_preempted_25_times_through_the_handlers_finishes(settings: Settings, queues: QueueDriver):
    job_id = launch(settings, queues)
    for round_ in range(PREEMPTIONS):
        before = view(settings, job_id)
        assert before.state in (JobState.SETTING_UP, JobState.RUNNING) and before.use_spot is True
        current = before.cluster["cluster_id"]  # type: ignore[index]
        assert live_clusters(settings, job_id) == {current}  # never two clusters
        if round_ % 2:
            report(settings, job_id, "running")  # half of the attempts got as far as the task
        node = before.cluster["nodes"][0]  # type: ignore[index]
        if round_ % 5 == 4:  # the warning was lost: the sweep finds the node gone
            assert LocalCloud(settings.home).preempt(job_id, notice_seconds=0.05) is not None
            actions = reconcile_handler(json.loads((EVENTS / "scheduled_event.json").read_text()), None)
            assert job_id in actions["actions"]["recovered"]
        else:
            LocalCloud(settings.home).preempt(job_id, notice_seconds=0.05)
            assert spot_watch_handler(spot_warning(node["instance_id"]), None) == {"outcome": "done"}
        after = relaunch(settings, queues, job_id)
        assert after.attempt == before.attempt + 1 and after.recoveries == round_ + 1
        assert after.state == JobState.SETTING_UP, after.reason
    report(settings, job_id, "running")
    report(settings, job_id, "succeeded")
    done = view(settings, job_id)
    assert done.state == JobState.SUCCEEDED and done.recoveries == PREEMPTIONS
    deliver(queues, "provision")  # the last cluster's teardown
    assert live_clusters(settings, job_id) == set()


def test_attempts_lost_at_boot_in_a_row_fail_the_job_as_a_crash_loop_with_the_reason(
    settings: Settings, queues: QueueDriver
):
    job_id = launch(settings, queues)
    sweep = json.loads((EVENTS / "scheduled_event.json").read_text())
    for _ in range(settings.crash_loop_limit):  # each attempt's node never says a word: a boot failure
        assert job_id in reconcile_handler(sweep, None)["actions"]["recovered"]
        assert relaunch(settings, queues, job_id).state == JobState.SETTING_UP
    node = view(settings, job_id).cluster["nodes"][0]  # type: ignore[index]
    LocalCloud(settings.home).preempt(job_id, notice_seconds=0.05)  # a preemption between: not counted
    spot_watch_handler(spot_warning(node["instance_id"]), None)
    assert relaunch(settings, queues, job_id).state == JobState.SETTING_UP
    reconcile_handler(sweep, None)  # one more attempt lost at boot: past the limit
    failed = view(settings, job_id)
    assert failed.state == JobState.FAILED and failed.reason is not None
    assert "crash loop: 4 attempts in a row were lost before their task started" in failed.reason
    assert "SKYLESS_CRASH_LOOP_LIMIT=3" in failed.reason
    deliver(queues, "provision")  # the teardown
    assert live_clusters(settings, job_id) == set()


def test_an_attempt_whose_task_started_resets_the_crash_loop_count(settings: Settings, queues: QueueDriver):
    job_id = launch(settings, queues)
    sweep = json.loads((EVENTS / "scheduled_event.json").read_text())
    for round_ in range(3 * settings.crash_loop_limit):
        if round_ % settings.crash_loop_limit == 0:
            report(settings, job_id, "running")  # then falls silent: lost, but it had started
        assert job_id in reconcile_handler(sweep, None)["actions"]["recovered"]
        assert relaunch(settings, queues, job_id).state == JobState.SETTING_UP
    job = wiring_for(settings).store.get(job_id)
    assert job is not None and int(job.lost_in_a_row) == settings.crash_loop_limit - 1


def test_a_running_jobs_last_node_is_started_by_the_jobs_state_not_by_a_write_of_its_own(
    settings: Settings, queues: QueueDriver
):
    """The move to RUNNING writes the job and its event, not the last node's phase (one item less a job):
    the view, the crash-loop count and the sweep's boot grace take the job's state for it."""
    job_id = launch(settings, queues)
    report(settings, job_id, "running")
    shown = view(settings, job_id)
    cluster = wiring_for(settings).store.cluster(shown.cluster["cluster_id"])  # type: ignore[index]
    assert cluster is not None and shown.state == JobState.RUNNING
    assert [n["phase"] for n in nodes_of(cluster).values()] == ["launched"]
    assert [n["phase"] for n in shown.cluster["nodes"]] == ["running"]  # type: ignore[index]
    reconcile_handler(json.loads((EVENTS / "scheduled_event.json").read_text()), None)  # then it fell silent
    store = wiring_for(settings).store
    job = store.get(job_id)
    assert job is not None and job.state == JobState.RECOVERING and int(job.lost_in_a_row) == 0
    recovering = [e for e in store.timeline(job_id) if e.state == JobState.RECOVERING][-1]
    assert "silent since" in recovering.message and recovering.detail["preempted"] is True  # not lost at boot
