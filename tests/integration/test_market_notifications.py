"""A deadline job's market changes told on Slack: the real provision/optimize handlers move the job (a launch
after a preemption, make before break), its agent reports running, and the events stream goes through the
notify handler to a real local Slack webhook."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import pytest
from conftest import QueueDriver, sent_mail
from fakes.slack_webhook import SlackWebhook

from functions.notify.handler import handler as notify_handler
from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from local_runtime.events_stream import EventsStreamReader
from shared.clouds.local import LocalCloud
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
run: python train.py
"""


@pytest.fixture
def fast(stack: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """As in test_deadline_jobs.py: a launch costs 4 s of progress, the control plane acts in 2 s."""
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)
    monkeypatch.setenv("SKYLESS_SPOT_REFUSALS_PER_HOUR", "0")
    settings = stack.with_(restart_overhead_seconds=4, deadline_reaction_seconds=2, deadline_retry_seconds=3)
    for name, value in settings.to_env().items():
        monkeypatch.setenv(name, value)
    return settings


def deliver(queues: QueueDriver, kind: str, records: list[dict[str, Any]] | None = None) -> None:
    handler = {"optimize": optimize_handler, "provision": provision_handler}[kind]
    batch = queues.receive(kind) if records is None else records
    assert handler(queues.event(batch), None) == {"batchItemFailures": []}


def view(settings: Settings, job_id: str) -> JobView:
    return get_job(wiring_for(settings), job_id, owner=None)


def submit(
    settings: Settings, queues: QueueDriver, owner: str, *, deadline: str | None, hours: float | None
) -> str:
    job_id = submit_job(
        wiring_for(settings),
        SubmitJob.from_text(owner=owner, task_text=TASK, deadline=deadline, hours=hours),
    ).job_id
    deliver(queues, "optimize")
    deliver(queues, "provision")
    return job_id


def agent_reports(settings: Settings, job_id: str, phase: str) -> None:
    node = view(settings, job_id).cluster["nodes"][0]  # type: ignore[index]
    report_agent_status(wiring_for(settings), AgentReport(job_id, node["instance_id"], phase))


def runs(settings: Settings, job_id: str) -> None:
    agent_reports(settings, job_id, "running")
    assert view(settings, job_id).state == JobState.RUNNING


def preempt_and_replan(settings: Settings, queues: QueueDriver, job_id: str) -> None:
    agent_reports(settings, job_id, "preempting")
    deliver(queues, "optimize")
    deliver(queues, "provision")  # the teardown of the old cluster and the policy's launch


def check_when_due(settings: Settings, queues: QueueDriver, job_id: str) -> None:
    """The deadline check the job scheduled, delivered at its time (as the delayed SQS message would be)."""
    job = wiring_for(settings).store.get(job_id)
    assert job is not None and job.next_check_at is not None
    at = float(job.next_check_at)
    body = {"job_id": job_id, "attempt": int(job.attempt), "action": "deadline_check", "not_before": at}
    time.sleep(max(0.0, at - time.time()))
    deliver(queues, "provision", [{"messageId": f"m-check-{job_id}-{at}", "body": json.dumps(body)}])


def stream_to_notify(reader: EventsStreamReader) -> list[dict[str, Any]]:
    records = reader.poll()
    assert notify_handler({"Records": records}, None) == {"batchItemFailures": []}
    return records


def texts(hook: SlackWebhook) -> list[str]:
    return [post["text"] for post in hook.posts]


def fields(post: dict[str, Any]) -> dict[str, str]:
    section = next(b for b in post["blocks"] if b["type"] == "section" and "fields" in b)
    return dict(f["text"].split("\n", 1) for f in section["fields"])


def test_a_deadline_job_moved_to_on_demand_and_back_to_spot_is_told_each_way_once(
    fast: Settings, queues: QueueDriver, alice_hook: SlackWebhook, moto_endpoint: str
) -> None:
    address = f"alice-{fast.prefix}@example.com"
    update_user_settings(fast, "alice", slack_webhook=alice_hook.url, email=address)
    reader = EventsStreamReader(fast)
    cloud = LocalCloud(fast.home)
    job_id = submit(fast, queues, "alice", deadline="600s", hours=500 / 3600)
    assert view(fast, job_id).use_spot is True  # a deadline job starting on spot: nothing to tell
    runs(fast, job_id)
    cloud.set_capacity_rules({"no_spot_capacity": ["*"]})
    preempt_and_replan(fast, queues, job_id)  # spot is gone everywhere: the policy launches on-demand
    assert view(fast, job_id).use_spot is False
    runs(fast, job_id)
    batch = stream_to_notify(reader)
    assert texts(alice_hook) == [
        "skyless: train was preempted; recovering",
        "skyless: train recovered and is running again",
        "skyless: train moved from spot to on-demand",
    ]
    to_on_demand = alice_hook.posts[2]
    told = str(to_on_demand["blocks"][1]["text"]["text"])
    assert told.startswith("The deadline policy moved it from spot on aws/us-east-1/us-east-1")
    assert "to on-demand on aws/us-east-1/us-east-1" in told
    facts = fields(to_on_demand)
    assert facts["*Market*"] == "spot -> on-demand"
    on_demand_price, spot_price = (float(p) for p in _prices(facts["*Price now*"]))  # now, and before
    assert on_demand_price > 2 * spot_price > 0  # the catalog's prices: on-demand costs ~3x
    stored = wiring_for(fast).store.get(job_id)
    assert stored is not None and stored.policy_reason
    assert facts["*Why*"] == stored.policy_reason and told.endswith(f": {stored.policy_reason}.")

    mails = [m for m in sent_mail(moto_endpoint) if address in m["destinations"]["ToAddresses"]]
    assert [m["subject"] for m in mails] == texts(alice_hook)
    assert (
        "Market: spot -> on-demand" in mails[2]["body"] and f"Why: {stored.policy_reason}" in mails[2]["body"]
    )

    notify_handler({"Records": batch}, None)  # the same stream batch delivered again: nothing sent twice
    assert len(alice_hook.posts) == 3
    assert len([m for m in sent_mail(moto_endpoint) if address in m["destinations"]["ToAddresses"]]) == 3

    cloud.set_capacity_rules({})  # spot is back: the policy's check moves the job, making before breaking
    check_when_due(fast, queues, job_id)
    moved = view(fast, job_id)
    assert moved.use_spot is True and moved.attempt == 2
    runs(fast, job_id)
    stream_to_notify(reader)
    assert texts(alice_hook)[3:] == ["skyless: train moved from on-demand to spot"]  # not "preempted"
    facts = fields(alice_hook.posts[3])
    assert facts["*Market*"] == "on-demand -> spot"
    assert _prices(facts["*Price now*"]) == [f"{spot_price:.4f}", f"{on_demand_price:.4f}"]
    stream_to_notify(reader)  # the notify events themselves come round on the stream: they tell nothing
    assert len(alice_hook.posts) == 4
    sent = [e for e in wiring_for(fast).store.timeline(job_id) if e.kind == "notify"]
    recorded = [(e.detail["topic"], e.detail["channel"]) for e in sent]
    assert recorded == [
        (t, c) for t in ("preempted", "recovered", "market", "market") for c in ("slack", "email")
    ]


def _prices(text: str) -> list[str]:
    """ "$0.1234/h (was $0.0412/h)" -> ["0.1234", "0.0412"]"""
    return [part.split("/h")[0] for part in text.split("$")[1:]]


def test_a_first_launch_on_demand_is_told_to_its_owner_only_and_a_plain_spot_job_never(
    fast: Settings, queues: QueueDriver, alice_hook: SlackWebhook, bob_hook: SlackWebhook
) -> None:
    update_user_settings(fast, "alice", slack_webhook=alice_hook.url)
    update_user_settings(fast, "bob", slack_webhook=bob_hook.url)
    reader = EventsStreamReader(fast)
    LocalCloud(fast.home).set_capacity_rules({"no_spot_capacity": ["*"]})
    alices = submit(fast, queues, "alice", deadline="100s", hours=90 / 3600)  # little slack: on-demand
    assert view(fast, alices).use_spot is False
    runs(fast, alices)
    LocalCloud(fast.home).set_capacity_rules({})
    bobs = submit(fast, queues, "bob", deadline=None, hours=None)  # a plain spot job
    runs(fast, bobs)
    preempt_and_replan(fast, queues, bobs)
    runs(fast, bobs)
    stream_to_notify(reader)
    assert texts(alice_hook) == ["skyless: train started on on-demand"]
    assert fields(alice_hook.posts[0])["*Market*"] == "on-demand"
    assert alices in str(alice_hook.posts[0]) and bobs not in str(alice_hook.posts)
    assert texts(bob_hook) == [  # bob's recovery told once each way, and none of alice's market
        "skyless: train was preempted; recovering",
        "skyless: train recovered and is running again",
    ]
    assert alices not in str(bob_hook.posts)


def test_the_market_topic_is_chosen_like_any_other(
    fast: Settings, queues: QueueDriver, alice_hook: SlackWebhook, bob_hook: SlackWebhook
) -> None:
    update_user_settings(fast, "alice", slack_webhook=alice_hook.url, topics=["market"])
    update_user_settings(fast, "bob", slack_webhook=bob_hook.url, topics=["preempted", "recovered"])
    reader = EventsStreamReader(fast)
    cloud = LocalCloud(fast.home)
    jobs = {
        owner: submit(fast, queues, owner, deadline="600s", hours=500 / 3600) for owner in ["alice", "bob"]
    }
    cloud.set_capacity_rules({"no_spot_capacity": ["*"]})
    for job_id in jobs.values():
        runs(fast, job_id)
        preempt_and_replan(fast, queues, job_id)
        runs(fast, job_id)
    stream_to_notify(reader)
    assert texts(alice_hook) == ["skyless: train moved from spot to on-demand"]
    assert jobs["alice"] in str(alice_hook.posts) and jobs["bob"] not in str(alice_hook.posts)
    assert texts(bob_hook) == [
        "skyless: train was preempted; recovering",
        "skyless: train recovered and is running again",
    ]
    assert jobs["alice"] not in str(bob_hook.posts)
