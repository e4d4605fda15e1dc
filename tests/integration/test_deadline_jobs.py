"""Deadline jobs through the real handlers, against moto's server and the local cloud: the deadline
checked at submit, launches chosen by the spot policy, capacity errors and preemptions fed back to it,
and its next moment of truth scheduled as a delayed provision message (chained past SQS's 900 s)."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import pytest
from conftest import QueueDriver

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.errors import UserError
from shared.jobs import make_before_break
from shared.jobs.agent_reports import AgentReport, report_agent_status
from shared.jobs.deadlines import deadline_fields, parse_deadline
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import JobView, get_job
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
ZONES = ["aws/us-east-1/us-east-1a", "aws/us-east-1/us-east-1b", "aws/us-east-1/us-east-1c"]


@pytest.fixture
def fast(stack: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The stack with a shortened clock: a launch costs 4 s of progress, the control plane acts within 2 s."""
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)
    settings = stack.with_(restart_overhead_seconds=4, deadline_reaction_seconds=2, deadline_retry_seconds=3)
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


def record(body: dict[str, Any], suffix: str = "") -> dict[str, Any]:
    return {"messageId": f"m-{body['job_id']}-{body['action']}{suffix}", "body": json.dumps(body)}


def view(settings: Settings, job_id: str) -> JobView:
    return get_job(wiring_for(settings), job_id, owner=None)


def submit(settings: Settings, queues: QueueDriver, *, deadline: str, hours: float) -> str:
    job_id = submit_job(
        wiring_for(settings),
        SubmitJob.from_text(owner="alice", task_text=TASK, deadline=deadline, hours=hours),
    ).job_id
    deliver(queues, "optimize")
    deliver(queues, "provision")
    return job_id


def preempt_and_replan(settings: Settings, queues: QueueDriver, job_id: str) -> None:
    node = view(settings, job_id).cluster["nodes"][0]  # type: ignore[index]
    report_agent_status(wiring_for(settings), AgentReport(job_id, node["instance_id"], "preempting"))
    deliver(queues, "optimize")
    deliver(queues, "provision")  # the teardown of the old cluster and the policy's launch


def test_a_deadline_is_a_time_with_a_zone_or_a_duration() -> None:
    assert parse_deadline("36h", 1000.0) == 1000.0 + 36 * 3600
    assert parse_deadline("90m", 0.0) == 5400.0 and parse_deadline("2d", 0.0) == 172800.0
    assert parse_deadline("2026-12-01T09:00Z", 0.0) == parse_deadline("2026-12-01T10:00+01:00", 0.0)
    for bad, words in (("tomorrow", "neither a time nor a duration"), ("2026-12-01T09:00", "no time zone")):
        with pytest.raises(UserError, match=words) as caught:
            parse_deadline(bad, 0.0)
        assert caught.value.field == "deadline"


def test_a_deadline_even_on_demand_cannot_meet_is_refused_with_the_arithmetic() -> None:
    settings = Settings(restart_overhead_seconds=600)
    with pytest.raises(UserError) as caught:
        deadline_fields(settings, "10h", 12.0, now=0.0)
    message = str(caught.value)
    assert caught.value.field == "deadline"
    assert "cannot be met even on on-demand" in message and "10.0 h away" in message
    assert "10 min to start plus 12 h of compute" in message and "2.2 h late" in message
    with pytest.raises(UserError) as missing:
        deadline_fields(settings, "10h", None, now=0.0)
    assert missing.value.field == "hours"
    fields = deadline_fields(settings, "10h", 9.0, now=0.0)
    assert fields == {
        "deadline_at": 36000.0,
        "work_seconds": 32400.0,
        "restart_overhead": 600.0,
        "work_done": 0,
    }


def test_a_refused_deadline_records_nothing(fast: Settings, queues: QueueDriver) -> None:
    with pytest.raises(UserError, match="cannot be met"):
        submit_job(
            wiring_for(fast), SubmitJob.from_text(owner="alice", task_text=TASK, deadline="1h", hours=2.0)
        )
    assert queues.receive("optimize") == []


def test_a_deadline_job_starts_on_spot_and_status_shows_its_deadline(fast: Settings, queues: QueueDriver):
    job_id = submit(fast, queues, deadline="2h", hours=1.0)
    job = view(fast, job_id)
    assert job.state == JobState.SETTING_UP and job.use_spot is True
    assert job.deadline is not None
    assert job.deadline["market"] == "spot" and job.deadline["hours"] == 1.0
    assert 0.99 < job.deadline["slack_hours"] < 1.0  # 2 h - 1 h of work, less what the start has cost
    assert job.deadline["why"].startswith("spot")


def test_spot_refused_in_the_first_zones_is_recorded_and_the_next_zone_used(
    fast: Settings, queues: QueueDriver
):
    LocalCloud(fast.home).set_capacity_rules({"no_spot_capacity": ZONES[:2]})
    job_id = submit(fast, queues, deadline="2h", hours=1.0)
    job = view(fast, job_id)
    assert job.state == JobState.SETTING_UP and job.zone == "us-east-1c" and job.use_spot is True
    stored = wiring_for(fast).store.get(job_id)
    assert stored is not None
    history = json.loads(stored.spot_history)
    refused = {place.split(" ")[0] for place, h in history.items() if h["last_unavailable"] is not None}
    assert refused == set(ZONES[:2])
    assert json.loads(stored.blocklist) == []  # a refusal is the policy's to weigh, not a block


def test_with_no_spot_anywhere_and_little_slack_the_job_runs_on_demand(fast: Settings, queues: QueueDriver):
    LocalCloud(fast.home).set_capacity_rules({"no_spot_capacity": ["*"]})
    job_id = submit(fast, queues, deadline="100s", hours=90 / 3600)
    job = view(fast, job_id)
    assert job.state == JobState.SETTING_UP and job.use_spot is False
    assert job.deadline is not None and job.deadline["market"] == "on_demand"


def test_with_no_spot_anywhere_and_ample_slack_the_job_waits_for_a_delayed_launch(
    fast: Settings, queues: QueueDriver
):
    LocalCloud(fast.home).set_capacity_rules({"no_spot_capacity": ["*"]})
    job_id = submit(fast, queues, deadline="3h", hours=0.5)
    job = view(fast, job_id)
    assert job.state == JobState.WAITING and job.deadline is not None
    assert "waiting" in (job.deadline["why"] or "")
    assert queues.delayed_count("provision") == 1
    # the launch comes back when due: too early, it is sent on (its not_before kept) and nothing moves
    body = {"job_id": job_id, "attempt": 0, "action": "launch", "not_before": time.time() + 2000}
    deliver(queues, "provision", [record(body, "-early")])
    assert view(fast, job_id).state == JobState.WAITING
    assert queues.delayed_count("provision") == 2


def test_preemptions_are_fed_back_and_the_safety_net_moves_the_job_to_on_demand_in_time(
    fast: Settings, queues: QueueDriver
):
    job_id = submit(fast, queues, deadline="40s", hours=10 / 3600)  # 30 s of slack; the net is 6 s
    markets = [view(fast, job_id).deadline["market"]]  # type: ignore[index]
    while markets[-1] == "spot":
        time.sleep(2)  # spot keeps being taken away before it makes progress
        preempt_and_replan(fast, queues, job_id)
        markets.append(view(fast, job_id).deadline["market"])  # type: ignore[index]
    job = view(fast, job_id)
    assert job.state == JobState.SETTING_UP and job.use_spot is False and len(markets) >= 3
    stored = wiring_for(fast).store.get(job_id)
    assert stored is not None and float(stored.deadline_at) - time.time() >= 10 + 4  # work + one launch
    history = json.loads(stored.spot_history)
    assert sum(h["interruptions"] for h in history.values()) == len(markets) - 1


def test_a_check_on_on_demand_tries_spot_again_and_duplicate_checks_do_nothing(
    fast: Settings, queues: QueueDriver
):
    rules = LocalCloud(fast.home)
    rules.set_capacity_rules({"no_spot_capacity": ["*"]})
    job_id = submit(fast, queues, deadline="600s", hours=500 / 3600)  # spot is gone: on-demand
    assert view(fast, job_id).use_spot is False
    store = wiring_for(fast).store
    job = store.get(job_id)
    assert job is not None and job.next_check_at is not None  # on-demand asks to try spot again
    rules.set_capacity_rules({})
    check = {
        "job_id": job_id,
        "attempt": 0,
        "action": "deadline_check",
        "not_before": float(job.next_check_at),
    }
    stale = dict(check, not_before=float(job.next_check_at) - 60)
    time.sleep(max(0.0, float(job.next_check_at) - time.time()))
    deliver(queues, "provision", [record(check), record(check, "-dup"), record(stale, "-stale")])
    moved = view(fast, job_id)  # made before break: spot obtained, on-demand fenced, in the check's step
    assert moved.state == JobState.SETTING_UP and moved.attempt == 1 and moved.use_spot is True
    assert live_clusters(fast, job_id) == {f"{job_id}-1"}  # once, for the two copies


def live_clusters(settings: Settings, job_id: str) -> set[str]:
    return {n.cluster_id for n in LocalCloud(settings.home).list_job(job_id) if n.state == "running"}


def test_a_check_whose_spot_launch_is_refused_leaves_the_on_demand_cluster_running(
    fast: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("SKYLESS_SPOT_REFUSALS_PER_HOUR", "0")  # no hourly limit: every check probes spot
    LocalCloud(fast.home).set_capacity_rules({"no_spot_capacity": ["*"]})
    job_id = submit(fast, queues, deadline="600s", hours=500 / 3600)
    before = view(fast, job_id)
    assert before.use_spot is False and live_clusters(fast, job_id) == {f"{job_id}-0"}
    store = wiring_for(fast).store
    for _ in range(2):  # the policy asks for spot again and again; the cloud keeps refusing
        job = store.get(job_id)
        assert job is not None and job.next_check_at is not None
        check = {"job_id": job_id, "attempt": 0, "action": "deadline_check", "not_before": job.next_check_at}
        time.sleep(max(0.0, float(job.next_check_at) - time.time()))
        deliver(queues, "provision", [record(check)])
        after = view(fast, job_id)
        assert after.state == before.state and after.attempt == 0 and after.use_spot is False
        assert live_clusters(fast, job_id) == {f"{job_id}-0"}  # untouched, and no spot cluster left over
        assert after.deadline is not None and "stayed on" in (after.deadline["why"] or "")
    stored = store.get(job_id)
    assert stored is not None and stored.next_check_at is not None and stored.next_check_at > time.time()
    refused = json.loads(stored.spot_history)  # the refusals are the policy's evidence
    assert any(h["last_unavailable"] is not None for h in refused.values()), refused


def test_a_deadline_job_keeps_spot_through_more_preemptions_than_any_limit(
    fast: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
):
    strict = fast.with_(crash_loop_limit=1)  # the crash-loop guard never counts a preemption
    for name, value in strict.to_env().items():
        monkeypatch.setenv(name, value)
    job_id = submit(strict, queues, deadline="2h", hours=1.0)
    for _ in range(12):
        assert view(strict, job_id).use_spot is True
        preempt_and_replan(strict, queues, job_id)
    job = view(strict, job_id)
    assert job.state == JobState.SETTING_UP and job.use_spot is True and job.recoveries == 12


def test_copies_of_a_waiting_jobs_launch_wake_it_once(fast: Settings, queues: QueueDriver):
    LocalCloud(fast.home).set_capacity_rules({"no_spot_capacity": ["*"]})
    job_id = submit(fast, queues, deadline="3h", hours=0.5)
    job = wiring_for(fast).store.get(job_id)
    assert job is not None and job.state == JobState.WAITING and job.next_check_at is not None
    due = float(job.next_check_at)
    body = {"job_id": job_id, "attempt": 0, "action": "launch", "not_before": due}
    queues.receive("provision")  # the wait's own message, delivered below as two copies
    time.sleep(max(0.0, due - time.time()))
    deliver(queues, "provision", [record(body, "-a"), record(body, "-b")])
    again = wiring_for(fast).store.get(job_id)
    assert again is not None and again.state == JobState.WAITING and float(again.next_check_at) > due
    assert queues.delayed_count("provision") == 1  # one walk, one new wait: copies do not multiply
    deliver(queues, "provision", [record(body, "-late")])  # the old wait's copy, late
    assert queues.delayed_count("provision") == 1


def test_the_fallback_launch_of_a_step_that_already_waited_leaves_the_wait_alone(
    fast: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
):
    """A recovery re-plans and launches in one call and sends a launch message, 20 s later, as its fallback
    (shared/jobs/continuation.py). When that call's policy waited for spot, the fallback must not walk the
    zones again: it probed them twice, and moved the job's next probe 20 s past the policy's moment."""
    slow = fast.with_(deadline_retry_seconds=300)  # the wait's own launch is minutes ahead
    for name, value in slow.to_env().items():
        monkeypatch.setenv(name, value)
    LocalCloud(slow.home).set_capacity_rules({"no_spot_capacity": ["*"]})
    job_id = submit(slow, queues, deadline="3h", hours=0.5)
    job = wiring_for(slow).store.get(job_id)
    assert job is not None and job.state == JobState.WAITING and job.next_check_at is not None
    _, refused = wiring_for(slow).cooldowns.evidence()
    fallback = {"job_id": job_id, "attempt": 0, "action": "launch"}  # as plan_read_job sends it
    deliver(queues, "provision", [record(fallback, "-fallback")])
    again = wiring_for(slow).store.get(job_id)
    assert again is not None and again.state == JobState.WAITING
    assert float(again.next_check_at) == float(job.next_check_at) and again.version == job.version
    assert wiring_for(slow).cooldowns.evidence()[1] == refused  # no zone probed again
    assert queues.delayed_count("provision") == 1  # the wait's own launch, still the one pending


class LambdaDied(BaseException):
    """The step's process ended here (no `except Exception` in the code under test catches it)."""


def test_a_move_whose_step_dies_after_the_job_moved_is_finished_by_the_follow_up_it_sent_first(
    fast: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
):
    """Found by the chaos run at 1,000 jobs: the check is stale once the job is on the next attempt, so a
    step that died between the move and the fence left both clusters up until reconcile's redrive."""
    rules = LocalCloud(fast.home)
    rules.set_capacity_rules({"no_spot_capacity": ["*"]})
    job_id = submit(fast, queues, deadline="600s", hours=500 / 3600)  # spot is gone: on-demand
    store = wiring_for(fast).store
    job = store.get(job_id)
    assert job is not None and job.next_check_at is not None
    rules.set_capacity_rules({})
    at = float(job.next_check_at)
    check = {"job_id": job_id, "attempt": 0, "action": "deadline_check", "not_before": at}
    time.sleep(max(0.0, at - time.time()))

    def dies(*args: Any, **kwargs: Any) -> None:
        raise LambdaDied

    with monkeypatch.context() as patch:
        patch.setattr(make_before_break, "fence_earlier_attempts", dies)
        with pytest.raises(LambdaDied):
            provision_handler(queues.event([record(check)]), None)
    moved = store.get(job_id)
    assert moved is not None and moved.state == JobState.RECOVERING and moved.attempt == 1
    assert live_clusters(fast, job_id) == {f"{job_id}-0", f"{job_id}-1"}  # the extra, and the old one
    deliver(queues, "provision", [record(check, "-again")])  # the check's redelivery: stale now
    assert store.get(job_id).state == JobState.RECOVERING  # type: ignore[union-attr]
    follow_up = queues.receive("optimize", wait_seconds=make_before_break.FOLLOW_UP_SECONDS + 5)
    assert [json.loads(r["body"]) for r in follow_up] == [{"job_id": job_id, "attempt": 1}]
    deliver(queues, "optimize", follow_up)
    deliver(queues, "provision")  # the launch: fences attempt 0, finds the obtained nodes again
    done = view(fast, job_id)
    assert done.state == JobState.SETTING_UP and done.attempt == 1 and done.use_spot is True
    assert live_clusters(fast, job_id) == {f"{job_id}-1"}


@pytest.mark.parametrize("dies_at", ["launch_candidate", "send_optimize", "move"])
def test_a_move_whose_step_dies_before_the_job_moved_and_whose_job_then_ends_leaves_no_cluster(
    fast: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch, dies_at: str
):
    """Found by the chaos test (its config replayed: seed 103, and seed 15 at 8 jobs, where the cluster was
    still up after the run's last reconcile): the check obtained the spot cluster and died (just after the
    launch, after sending the follow-up, or before the move's write), the job's task then succeeded on the
    on-demand one, and the check's redelivery found the job over and returned: the spot cluster, recorded
    nowhere, ran on past reconcile until the orphan reaper's grace was out. The redelivery ends it now."""
    rules = LocalCloud(fast.home)
    rules.set_capacity_rules({"no_spot_capacity": ["*"]})
    job_id = submit(fast, queues, deadline="600s", hours=500 / 3600)  # spot is gone: on-demand
    store = wiring_for(fast).store
    job = store.get(job_id)
    assert job is not None and job.next_check_at is not None
    rules.set_capacity_rules({})
    check = {"job_id": job_id, "attempt": 0, "action": "deadline_check", "not_before": job.next_check_at}
    time.sleep(max(0.0, float(job.next_check_at) - time.time()))
    target: Any = type(store) if dies_at == "move" else make_before_break  # the store's move: dies before it
    real = getattr(target, dies_at)

    def dies(*args: Any, **kwargs: Any) -> None:
        if dies_at != "move":
            real(*args, **kwargs)
        raise LambdaDied

    with monkeypatch.context() as patch:
        patch.setattr(target, dies_at, dies)
        with pytest.raises(LambdaDied):
            provision_handler(queues.event([record(check)]), None)
    assert live_clusters(fast, job_id) == {f"{job_id}-0", f"{job_id}-1"}  # obtained, the job not moved
    node = view(fast, job_id).cluster["nodes"][0]  # type: ignore[index]
    report_agent_status(wiring_for(fast), AgentReport(job_id, node["instance_id"], "succeeded", exit_code=0))
    assert view(fast, job_id).state == JobState.SUCCEEDED
    delivered = deliver(queues, "provision")  # the job's teardown, and the check's message come back
    assert {json.loads(r["body"])["action"] for r in delivered} == {"teardown", "deadline_check"}
    assert live_clusters(fast, job_id) == set()
    deliver(queues, "provision", [record(check, "-again"), record(check, "-and-again")])  # more copies
    notes = [e.message for e in store.timeline(job_id) if f"{job_id}-1 terminated" in e.message]
    assert notes == [f"cluster {job_id}-1 terminated: the job was over before it moved onto it"]
