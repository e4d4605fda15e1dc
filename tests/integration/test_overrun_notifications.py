"""A deadline job run past its `--hours` estimate is told to its owner once, on Slack and by email: the real
provision and optimize handlers launch it, the check the launch scheduled for the estimate's end (or the
relaunch after a preemption, whichever sees it first) writes the overrun event, and the events stream goes
through the notify handler to real local Slack webhooks and SES (moto). Checks and stream records come twice,
late, and from a Lambda that read the job before the first copy wrote."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from conftest import QueueDriver, sent_mail
from fakes.slack_webhook import SlackWebhook
from test_market_notifications import (
    agent_reports,
    deliver,
    fast,  # noqa: F401  (the fixture: a launch costs 4 s of progress, the control plane acts in 2 s)
    fields,
    preempt_and_replan,
    runs,
    stream_to_notify,
    submit,
    texts,
    view,
)

from functions.notify.handler import handler as notify_handler
from local_runtime.events_stream import EventsStreamReader
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.notifications.settings import update_user_settings
from shared.states import JobState
from shared.store.jobs import DynamoJobStore
from shared.wiring import wiring_for

HOURS = 0.002  # 7.2 s of compute, in 2 h: within it the policy keeps spot
TOLD = "skyless: train ran past its 0.002 h estimate"


def overrun_events(settings: Settings, job_id: str) -> list[Any]:
    return [e for e in wiring_for(settings).store.timeline(job_id) if e.kind == "overrun"]


def mails_to(endpoint: str, address: str) -> list[dict[str, Any]]:
    return [m for m in sent_mail(endpoint) if address in m["destinations"]["ToAddresses"]]


def test_the_overrun_is_told_once_when_it_happens_to_its_owner_only(
    fast: Settings,  # noqa: F811
    queues: QueueDriver,
    alice_hook: SlackWebhook,
    bob_hook: SlackWebhook,
    moto_endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    addresses = {owner: f"{owner}-{fast.prefix}@example.com" for owner in ("alice", "bob")}
    update_user_settings(fast, "alice", slack_webhook=alice_hook.url, email=addresses["alice"])
    update_user_settings(fast, "bob", slack_webhook=bob_hook.url, email=addresses["bob"])
    reader = EventsStreamReader(fast)
    jobs = {owner: submit(fast, queues, owner, deadline="2h", hours=HOURS) for owner in ("alice", "bob")}
    store = wiring_for(fast).store
    due = 0.0
    for job_id in jobs.values():
        runs(fast, job_id)
        job = store.get(job_id)
        assert job is not None and job.next_check_at is not None and view(fast, job_id).use_spot is True
        cluster = store.cluster(job.cluster_id)
        assert cluster is not None
        reached = float(cluster.launched_at) + 4 + HOURS * 3600  # its overhead, then the estimate
        assert reached < float(job.next_check_at) <= reached + 2  # checked then, the reaction (2 s) later
        due = max(due, float(job.next_check_at))

    # bob's job is preempted past its estimate before its check comes: the relaunch sees it first
    time.sleep(max(0.0, due - time.time()) + 1.5)  # both checks visible (SQS delays are whole seconds)
    LocalCloud(fast.home).set_capacity_rules({"no_spot_capacity": ["*"]})
    agent_reports(fast, jobs["bob"], "preempting")
    deliver(queues, "optimize")
    checks = queues.receive("provision")  # alice's check, bob's stale one, bob's teardown and launch
    actions = sorted(json.loads(r["body"]).get("action", "teardown") for r in checks)
    assert actions == ["deadline_check", "deadline_check", "launch", "teardown"]
    alices = next(r for r in checks if f'"{jobs["alice"]}"' in r["body"])
    before = store.get(jobs["alice"])  # what a second Lambda, given a copy of alice's check, read
    deliver(queues, "provision", checks)
    deliver(queues, "provision", [{**r, "messageId": r["messageId"] + "-again"} for r in checks])  # late
    writes: list[bool] = []
    save = DynamoJobStore.save_progress

    def saving(self: DynamoJobStore, *args: Any, **kwargs: Any) -> bool:
        writes.append(save(self, *args, **kwargs))
        return writes[-1]

    with monkeypatch.context() as patch:  # the concurrent copy: it read the job before the first wrote
        patch.setattr(DynamoJobStore, "get", lambda self, job_id: before)
        patch.setattr(DynamoJobStore, "save_progress", saving)
        deliver(queues, "provision", [{**alices, "messageId": "concurrent"}])
    assert writes == [False]  # it reached the conditional write of the overrun event, and lost it
    runs(fast, jobs["bob"])

    alice, bob = store.get(jobs["alice"]), store.get(jobs["bob"])
    assert alice is not None and alice.overran_at is not None and alice.next_check_at is None
    assert view(fast, jobs["alice"]).use_spot is True  # the running spot cluster is kept
    assert bob is not None and bob.overran_at is not None and view(fast, jobs["bob"]).use_spot is False
    [alices_event], [bobs_event] = overrun_events(fast, jobs["alice"]), overrun_events(fast, jobs["bob"])
    assert alices_event.detail["running"]["market"] == "spot" and "running" not in bobs_event.detail

    batch = stream_to_notify(reader)
    assert texts(alice_hook) == [TOLD]
    told = str(alice_hook.posts[0]["blocks"][1]["text"]["text"])
    assert "keeps the spot cluster on aws/us-east-1/us-east-1" in told
    assert "after a preemption it restarts on on-demand at once, on aws/us-east-1/us-east-1" in told
    facts = fields(alice_hook.posts[0])
    assert facts["*Estimate*"] == "0.002 h" and facts["*Now*"].startswith("spot kept ($")
    assert float(facts["*Work counted*"].removesuffix(" h")) >= HOURS
    assert facts["*Deadline*"].endswith("h away") and "x the spot price" in facts["*After a preemption*"]
    assert jobs["alice"] in str(alice_hook.posts) and jobs["bob"] not in str(alice_hook.posts)

    assert texts(bob_hook) == [  # his relaunch went straight to on-demand: told as that, once each
        "skyless: train was preempted; recovering",
        TOLD,
        "skyless: train recovered and is running again",
        "skyless: train moved from spot to on-demand",
    ]
    assert fields(bob_hook.posts[1])["*Now*"].startswith("restarting on on-demand on aws/us-east-1/")
    assert jobs["alice"] not in str(bob_hook.posts)
    assert [m["subject"] for m in mails_to(moto_endpoint, addresses["alice"])] == [TOLD]
    assert [m["subject"] for m in mails_to(moto_endpoint, addresses["bob"])] == texts(bob_hook)

    notify_handler({"Records": batch}, None)  # the same stream batch again: nothing sent twice
    preempt_and_replan(fast, queues, jobs["alice"])  # past it already: on-demand, no second overrun
    runs(fast, jobs["alice"])
    stream_to_notify(reader)
    assert texts(alice_hook) == [
        TOLD,
        "skyless: train was preempted; recovering",
        "skyless: train recovered and is running again",
        "skyless: train moved from spot to on-demand",
    ]
    assert len(overrun_events(fast, jobs["alice"])) == 1 and len(texts(bob_hook)) == 4
    assert view(fast, jobs["alice"]).state == JobState.RUNNING
