"""A deadline check that answers "wait" while the job's cluster is still booting, through the real provision
and optimize handlers against moto's server and the local cloud (whose agent never reports: the job stays
SETTING_UP). skyless's own policy never waits from a running cluster it could keep; the peers that
`benchmarks/spot_policy.py --control-plane --policy` runs through the same handlers do, so the check's wait
is driven by Uniform Progress (on on-demand and ahead of even progress, with no spot to move to), swapped
in as that benchmark swaps it. The check comes late, twice, and once more from a Lambda that read the job
before the first copy wrote."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import pytest
from conftest import QueueDriver
from test_deadline_overrun import copies, deliver, stored

from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.jobs import deadline_launch
from shared.jobs.submission import SubmitJob, submit_job
from shared.spot_policy import decide_uniform_progress
from shared.states import JobState
from shared.store.jobs import DynamoJobStore
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
RETRY = 3.0
WAITED = "deadline policy: uniform progress: ahead; waiting for spot"


@pytest.fixture
def fast(stack: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """A launch costs 4 s of progress, a retry is 3 s, and a job may cause 3 refused spot launches an hour:
    its first walk over the plan's three zones spends them, so no check of the test finds spot to try."""
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)
    settings = stack.with_(
        restart_overhead_seconds=int(OVERHEAD), deadline_reaction_seconds=2,
        deadline_retry_seconds=int(RETRY), spot_refusals_per_hour=3,
    )  # fmt: skip
    for name, value in settings.to_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(deadline_launch, "decide", decide_uniform_progress)
    return settings


def nodes(settings: Settings, job_id: str) -> dict[str, set[str]]:
    """cluster -> the states of its nodes, as the cloud lists them."""
    out: dict[str, set[str]] = {}
    for node in LocalCloud(settings.home).list_job(job_id):
        out.setdefault(node.cluster_id, set()).add(node.state)
    return out


def states(settings: Settings, job_id: str) -> list[tuple[str, str]]:
    return [
        (str(e.state), e.message) for e in wiring_for(settings).store.timeline(job_id) if e.kind == "state"
    ]


def test_a_check_that_waits_while_the_cluster_boots_tears_it_down_once_and_retries_when_the_policy_said(
    fast: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
):
    LocalCloud(fast.home).set_capacity_rules({"no_spot_capacity": ["*"]})
    job_id = submit_job(
        wiring_for(fast), SubmitJob.from_text(owner="alice", task_text=TASK, deadline="2h", hours=0.01)
    ).job_id
    deliver(queues, "optimize")
    deliver(queues, "provision")  # spot refused in every zone (the hour's 3 refusals), behind: on-demand
    job = stored(fast, job_id)
    assert job.state == JobState.SETTING_UP and job.market == "on_demand" and job.next_check_at is not None
    assert nodes(fast, job_id) == {f"{job_id}-0": {"running"}}
    [check] = queues.receive("provision", wait_seconds=int(RETRY) + 2)  # delayed until its time
    assert json.loads(check["body"]) == {
        "job_id": job_id, "attempt": 0, "action": "deadline_check", "not_before": float(job.next_check_at)
    }  # fmt: skip

    # Late: past the booting cluster's restart overhead, when the work it is counted ahead of even progress
    cluster = wiring_for(fast).store.cluster(job.cluster_id)
    assert cluster is not None
    time.sleep(max(0.0, float(cluster.launched_at) + OVERHEAD + RETRY - time.time()))
    before = stored(fast, job_id)  # what a second Lambda, given a copy at the same moment, read
    asked = time.time()
    deliver(queues, "provision", [check, *copies([check])])  # twice in one batch
    moved: list[bool] = []
    move = DynamoJobStore.move

    def moving(self: DynamoJobStore, *args: Any, **kwargs: Any) -> bool:
        moved.append(move(self, *args, **kwargs))
        return moved[-1]

    with monkeypatch.context() as patch:  # the concurrent copy: it read the job before the first wrote
        patch.setattr(DynamoJobStore, "get", lambda self, job_id: before)
        patch.setattr(DynamoJobStore, "move", moving)
        deliver(queues, "provision", copies(copies([check])))
    assert moved == [False]  # it decided to wait too, reached the conditional move, and lost it

    recovering = stored(fast, job_id)
    assert recovering.state == JobState.RECOVERING and int(recovering.attempt) == 1
    assert recovering.cluster_id is None and recovering.next_check_at is None
    assert int(recovering.restarts) == 0 and int(recovering.recoveries) == 0  # the policy's stop is no loss
    assert int(recovering.lost_in_a_row or 0) == 0  # nor a crash-loop step, though its task never started
    assert float(recovering.work_done) > 0  # its run past the overhead is counted, as any cluster's

    replan = deliver(queues, "optimize")
    assert [json.loads(r["body"])["attempt"] for r in replan] == [1]  # one re-plan for the three copies
    work = deliver(queues, "provision")  # the booting cluster's teardown and the new attempt's launch
    assert sorted(json.loads(r["body"]).get("action", "teardown") for r in work) == ["launch", "teardown"]
    deliver(queues, "optimize", copies(replan))  # every message again, late
    deliver(queues, "provision", copies(work))
    deliver(queues, "provision", copies(copies(copies([check]))))

    waiting = stored(fast, job_id)
    assert waiting.state == JobState.WAITING and int(waiting.attempt) == 1 and waiting.cluster_id is None
    assert nodes(fast, job_id) == {f"{job_id}-0": {"terminated"}}  # not leaked, and no second cluster
    timeline = states(fast, job_id)
    assert [s for s, _ in timeline] == ["PLANNED", "SETTING_UP", "RECOVERING", "PLANNED", "WAITING"]
    assert timeline[2][1] == WAITED and timeline[4][1] == WAITED  # each step said once
    [event] = [e for e in wiring_for(fast).store.timeline(job_id) if e.state == "RECOVERING"]
    detail = event.detail.as_dict()
    assert detail["policy_wait"] is True and detail["preempted"] is False
    assert detail["cluster"] == f"{job_id}-0"

    [retry] = queues.receive("provision", wait_seconds=int(RETRY) + 2)  # one launch, when the policy said
    body = json.loads(retry["body"])
    assert body["action"] == "launch" and body["attempt"] == 1
    assert body["not_before"] == float(waiting.next_check_at)
    assert asked < body["not_before"] <= time.time() + 1 and body["not_before"] <= asked + 2 * RETRY
    deliver(queues, "provision", [retry, *copies([retry])])  # the retry wakes the job once
    woken = stored(fast, job_id)
    assert woken.state == JobState.WAITING and int(woken.attempt) == 1  # still ahead, still no spot to try
    assert float(woken.next_check_at) > body["not_before"]
    assert nodes(fast, job_id) == {f"{job_id}-0": {"terminated"}}
    time.sleep(1)
    assert queues.receive("provision") == [] and queues.delayed_count("provision") == 1  # one next retry
