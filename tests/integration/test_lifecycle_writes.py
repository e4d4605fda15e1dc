"""Every write of a job is billed by the whole item's size (twice inside a transaction), so the job item
stays small: the plan, the bulky part, is stored compressed; plans stored as text before still read."""

from __future__ import annotations

import json
import sys

import boto3
import pytest
from conftest import QueueDriver

from functions.optimize.handler import handler as optimize_handler
from shared.config import Settings
from shared.jobs.planning import plan_of
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import get_job
from shared.wiring import wiring_for

SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])
TASK = "name: w\nresources:\n  cpus: 1+\nrun: echo hi\n"


@pytest.fixture(autouse=True)
def sleeping_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)


def stored_bytes(settings: Settings, job_id: str) -> int:
    """The item's size as DynamoDB bills it, near enough: attribute names plus values."""
    dynamodb = boto3.client("dynamodb", endpoint_url=settings.endpoint_url, region_name=settings.region)
    item = dynamodb.get_item(TableName=settings.table_name("jobs"), Key={"job_id": {"S": job_id}})["Item"]
    sizes = {"S": lambda v: len(v.encode()), "B": len, "N": len}
    return sum(len(name) + sizes.get(kind, lambda v: len(json.dumps(v)))(raw)
               for name, value in item.items() for kind, raw in value.items())  # fmt: skip


def test_a_planned_job_item_stays_within_two_write_units(stack: Settings, queues: QueueDriver) -> None:
    job_id = submit_job(wiring_for(stack), SubmitJob.from_text(owner="alice", task_text=TASK)).job_id
    assert optimize_handler(queues.event(queues.receive("optimize")), None) == {"batchItemFailures": []}
    view = get_job(wiring_for(stack), job_id, owner=None)
    assert view.plan is not None
    candidates = view.plan["tasks"][0]["candidates"]
    assert len(json.dumps(view.plan)) > 4096 and len(candidates) >= 10  # a plan worth compressing
    assert stored_bytes(stack, job_id) < 2048


def test_a_plan_stored_as_text_by_an_older_version_still_reads(stack: Settings, queues: QueueDriver) -> None:
    job_id = submit_job(wiring_for(stack), SubmitJob.from_text(owner="alice", task_text=TASK)).job_id
    optimize_handler(queues.event(queues.receive("optimize")), None)
    store = wiring_for(stack).store
    job = store.get(job_id)
    assert job is not None
    plan = plan_of(job)
    assert plan is not None
    job.update(actions=[store.jobs.plan.set(plan.to_json()), store.jobs.plan_z.remove()])
    older = store.get(job_id)
    assert older is not None and older.plan_z is None
    assert plan_of(older) == plan
    assert get_job(wiring_for(stack), job_id, owner=None).plan == plan.as_dict()
