"""What a move to RECOVERING is told as, on Slack: the task's own failure restarted under
max_restarts_on_errors, a preemption, a node lost at boot. The real optimize/provision/reconcile handlers
move the jobs, their agents report, and the events stream goes through the notify handler to a real local
Slack webhook."""

from __future__ import annotations

import json
import sys
import time

import pytest
from conftest import QueueDriver
from fakes.slack_webhook import SlackWebhook
from test_market_notifications import fields, stream_to_notify, texts

from functions.notify.handler import handler as notify_handler
from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from functions.reconcile.handler import handler as reconcile_handler
from local_runtime.events_stream import EventsStreamReader
from shared.config import Settings
from shared.jobs.agent_reports import AgentReport, report_agent_status
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import JobView, get_job
from shared.notifications.settings import update_user_settings
from shared.states import JobState
from shared.wiring import wiring_for

SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])
TASK = """
name: train
resources:
  cloud: aws
  region: us-east-1
  cpus: 2+
  use_spot: true
  job_recovery:
    max_restarts_on_errors: {restarts}
run: python train.py
"""
SCHEDULED = {"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}}


@pytest.fixture(autouse=True)
def sleeping_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)


def deliver(queues: QueueDriver, kind: str) -> None:
    handler = {"optimize": optimize_handler, "provision": provision_handler}[kind]
    assert handler(queues.event(queues.receive(kind)), None) == {"batchItemFailures": []}


def view(settings: Settings, job_id: str) -> JobView:
    return get_job(wiring_for(settings), job_id, owner=None)


def submit(settings: Settings, queues: QueueDriver, owner: str, restarts: int) -> str:
    task = TASK.format(restarts=restarts)
    job_id = submit_job(wiring_for(settings), SubmitJob.from_text(owner=owner, task_text=task)).job_id
    deliver(queues, "optimize")
    deliver(queues, "provision")
    return job_id


def report(settings: Settings, job_id: str, phase: str, exit_code: int | None = None) -> None:
    node = view(settings, job_id).cluster["nodes"][0]  # type: ignore[index]
    report_agent_status(
        wiring_for(settings), AgentReport(job_id, node["instance_id"], phase, exit_code=exit_code)
    )


def runs(settings: Settings, job_id: str) -> None:
    report(settings, job_id, "running")
    assert view(settings, job_id).state == JobState.RUNNING


def relaunch(queues: QueueDriver) -> None:
    deliver(queues, "provision")  # the old cluster's teardown
    deliver(queues, "optimize")
    deliver(queues, "provision")


def test_a_task_failure_restarted_is_told_as_a_failure_with_its_exit_code_and_restarts_left(
    stack: Settings, queues: QueueDriver, alice_hook: SlackWebhook
) -> None:
    update_user_settings(stack, "alice", slack_webhook=alice_hook.url)
    reader = EventsStreamReader(stack)
    job_id = submit(stack, queues, "alice", restarts=2)
    runs(stack, job_id)
    report(stack, job_id, "failed", exit_code=3)
    assert view(stack, job_id).state == JobState.RECOVERING
    relaunch(queues)
    runs(stack, job_id)
    report(stack, job_id, "setup_failed", exit_code=2)
    relaunch(queues)
    runs(stack, job_id)
    report(stack, job_id, "failed", exit_code=3)
    assert view(stack, job_id).state == JobState.FAILED
    batch = stream_to_notify(reader)
    assert texts(alice_hook) == [
        "skyless: train failed with exit code 3; restarting (restart 1 of 2)",
        "skyless: train restarted and is running again",
        "skyless: train failed in setup with exit code 2; restarting (restart 2 of 2)",
        "skyless: train restarted and is running again",
        "skyless: train failed",
    ]
    first = alice_hook.posts[0]
    assert fields(first)["*Restarts*"] == "1 of 2 (max_restarts_on_errors); 1 left"
    assert "node rank 0 failed with exit code 3 (restart 1)" in str(first["blocks"][1])
    assert "preempted" not in str(alice_hook.posts)
    notify_handler({"Records": batch}, None)  # the same batch again: nothing is sent twice
    assert len(alice_hook.posts) == 5
    sent = [e.detail["topic"] for e in wiring_for(stack).store.timeline(job_id) if e.kind == "notify"]
    assert sent == ["restarting", "restarted", "restarting", "restarted", "failed"]


def test_a_restart_reaches_an_owner_who_only_wants_failures_and_never_another_user(
    stack: Settings, queues: QueueDriver, alice_hook: SlackWebhook, bob_hook: SlackWebhook
) -> None:
    update_user_settings(stack, "alice", slack_webhook=alice_hook.url, topics=["failed"])
    update_user_settings(stack, "bob", slack_webhook=bob_hook.url)
    reader = EventsStreamReader(stack)
    alices = submit(stack, queues, "alice", restarts=1)
    bobs = submit(stack, queues, "bob", restarts=1)
    runs(stack, alices)
    runs(stack, bobs)
    report(stack, alices, "failed", exit_code=3)
    relaunch(queues)
    runs(stack, alices)
    report(stack, bobs, "preempting")  # bob's spot node is taken away: a preemption, not his code's failure
    relaunch(queues)
    runs(stack, bobs)
    stream_to_notify(reader)
    assert texts(alice_hook) == ["skyless: train failed with exit code 3; restarting (restart 1 of 1)"]
    assert texts(bob_hook) == [
        "skyless: train was preempted; recovering",
        "skyless: train recovered and is running again",
    ]
    assert alices in str(alice_hook.posts) and bobs not in str(alice_hook.posts)
    assert alices not in str(bob_hook.posts)


def test_a_node_lost_at_boot_is_told_as_lost_not_preempted(
    stack: Settings, queues: QueueDriver, alice_hook: SlackWebhook, monkeypatch: pytest.MonkeyPatch
) -> None:
    update_user_settings(stack, "alice", slack_webhook=alice_hook.url, topics=["preempted", "recovered"])
    reader = EventsStreamReader(stack)
    job_id = submit(stack, queues, "alice", restarts=0)
    monkeypatch.setenv("SKYLESS_BOOT_GRACE_SECONDS", "0")
    time.sleep(0.2)
    assert reconcile_handler(SCHEDULED, None)["actions"]["recovered"] == [job_id]  # never heard from
    monkeypatch.delenv("SKYLESS_BOOT_GRACE_SECONDS")
    relaunch(queues)
    runs(stack, job_id)
    stream_to_notify(reader)
    assert texts(alice_hook) == [
        "skyless: train lost a node; recovering",
        "skyless: train recovered and is running again",
    ]
    assert "silent since" in str(alice_hook.posts[0]["blocks"][1])


def test_an_exit_code_in_recover_on_exit_codes_restarts_without_spending_a_restart_and_says_so(
    stack: Settings, queues: QueueDriver, alice_hook: SlackWebhook
) -> None:
    """As SkyPilot's `should_restart_on_failure`: a listed exit code recovers without counting toward
    max_restarts_on_errors, so the one restart allowed is still there afterwards."""
    update_user_settings(stack, "alice", slack_webhook=alice_hook.url, topics=["failed"])
    reader = EventsStreamReader(stack)
    task = TASK.format(restarts=1).replace("run:", "    recover_on_exit_codes: [42]\nrun:")
    job_id = submit_job(wiring_for(stack), SubmitJob.from_text(owner="alice", task_text=task)).job_id
    deliver(queues, "optimize")
    deliver(queues, "provision")
    for code in (42, 42, 3):
        runs(stack, job_id)
        report(stack, job_id, "failed", exit_code=code)
        assert view(stack, job_id).state == JobState.RECOVERING
        relaunch(queues)
    runs(stack, job_id)
    report(stack, job_id, "failed", exit_code=3)
    assert view(stack, job_id).state == JobState.FAILED
    stream_to_notify(reader)
    listed = "skyless: train failed with exit code 42; restarting (exit code listed in recover_on_exit_codes)"
    assert texts(alice_hook) == [
        listed,
        listed,
        "skyless: train failed with exit code 3; restarting (restart 1 of 1)",
        "skyless: train failed",
    ]
    not_counted = "not counted: its exit code is in recover_on_exit_codes"
    assert fields(alice_hook.posts[0])["*Restarts*"] == not_counted
