"""Shared evidence of spot capacity: a spot launch one job's provision step had refused for capacity is news
for every job planning spot there. The zone cools (its spot candidates go last in other jobs' plans), `status`
says how many launches were refused there, and a deadline job's policy counts it as refused."""

from __future__ import annotations

import json
import sys
from dataclasses import replace

import pytest
from memory_stack import MemoryQueueDriver

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.jobs.deadlines import place_key, with_shared_evidence
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import get_job
from shared.optimizer.plan import Candidate
from shared.states import JobState
from shared.wiring import wiring_for

SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])
ZONE = "aws/us-east-1/us-east-1a"
PINNED = f"name: a\nresources:\n  infra: {ZONE}\n  cpus: 2+\n  use_spot: true\nrun: python a.py\n"
REGION = "name: b\nresources:\n  infra: aws/us-east-1\n  cpus: 2+\n  use_spot: true\nrun: python b.py\n"


@pytest.fixture(autouse=True)
def sleeping_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)


def deliver(queues: MemoryQueueDriver, kind: str) -> None:
    handler = {"optimize": optimize_handler, "provision": provision_handler}[kind]
    assert handler(queues.event(queues.receive(kind)), None) == {"batchItemFailures": []}


def submit(settings: Settings, queues: MemoryQueueDriver, task: str) -> str:
    job_id = submit_job(wiring_for(settings), SubmitJob.from_text(owner="alice", task_text=task)).job_id
    deliver(queues, "optimize")
    deliver(queues, "provision")
    return job_id


def test_a_refused_spot_launch_cools_its_zone_for_every_other_job(stack: Settings, queues: MemoryQueueDriver):
    LocalCloud(stack.home).set_capacity_rules({"no_spot_capacity": [ZONE]})
    first = submit(stack, queues, PINNED)
    assert get_job(wiring_for(stack), first, owner=None).state == JobState.WAITING
    cooling = {c.place: c for c in wiring_for(stack).cooldowns.cooling()}
    assert cooling[ZONE].refusals == 1 and cooling[ZONE].preemptions == 0
    assert "1 refused spot launch(es)" in cooling[ZONE].describe()

    second = submit(stack, queues, REGION)
    view = get_job(wiring_for(stack), second, owner=None)
    assert view.state == JobState.SETTING_UP and view.zone != "us-east-1a"
    candidates = view.plan["tasks"][0]["candidates"]  # type: ignore[index]
    zones = [c["zone"] for c in candidates]
    assert "us-east-1a" in zones and all(z == "us-east-1a" for z in zones[zones.index("us-east-1a") :])
    shown = [c for c in view.cooling if c["place"] == ZONE]
    assert shown and shown[0]["refusals"] == 1  # what `status` prints: "... 1 refused launch(es) ..."


def test_a_deadline_policy_counts_another_jobs_refusal_as_its_own(stack: Settings, queues: MemoryQueueDriver):
    LocalCloud(stack.home).set_capacity_rules({"no_spot_capacity": [ZONE]})
    submit(stack, queues, PINNED)
    cooling = wiring_for(stack).cooldowns.cooling()
    here = Candidate(cloud="aws", region="us-east-1", zone="us-east-1a", instance_type="m5.large",
                     use_spot=True, hourly_price=0.03, num_nodes=1, accelerator=None, accelerator_count=0,
                     vcpus=2, memory_gib=8, estimated_hours=1, estimated_cost=0.03)  # fmt: skip
    there = replace(here, zone="us-east-1b")
    by_key = {place_key("aws", "us-east-1", c.zone, "m5.large"): c for c in (here, there)}
    history = with_shared_evidence({}, by_key, cooling)
    refused = history[place_key("aws", "us-east-1", "us-east-1a", "m5.large")]
    assert refused.last_unavailable is not None and refused.unavailable_at(refused.last_unavailable + 1, 300)
    assert place_key("aws", "us-east-1", "us-east-1b", "m5.large") not in history
