"""The shared spot evidence (shared/store/cooldowns.py) over thousands of refused launches and preemptions
from many jobs in many zones, through the real write paths against moto's server: the record stays bounded,
a preempted job still recovers, and a plan's read of the evidence stays small. An old record written before
the bound (past DynamoDB's 400 KB) shrinks at its first read."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import QueueDriver
from pynamodb.exceptions import UpdateError

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from functions.spot_watch.handler import handler as spot_watch_handler
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import JobView, get_job
from shared.states import JobState
from shared.store.cooldowns import (
    KEPT_IN_ALL,
    KEPT_PER_ZONE,
    PRUNE_PAST_PER_ZONE,
    RECORD_KEY,
    REFUSAL_PREFIX,
    WRITE_CAP,
    WRITE_CAP_IN_ALL,
    CooldownStore,
)
from shared.wiring import wiring_for

SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])
SPOT = "name: train\nresources:\n  cloud: aws\n  cpus: 2+\n  use_spot: true\nrun: python train.py\n"
ITEM_LIMIT = 400 * 1024


@pytest.fixture(autouse=True)
def sleeping_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)


@pytest.fixture
def evidence_reads(stack: Settings) -> Iterator[list[tuple[int, int]]]:
    """(entries, response bytes) of every GetItem of the evidence record."""
    reads: list[tuple[int, int]] = []

    def count(http_response: Any, parsed: dict[str, Any], **_: Any) -> None:
        item = parsed.get("Item") or {}
        if item.get("cluster_id", {}).get("S") == RECORD_KEY:
            entries = sum(len(v.get("SS") or []) for v in item.values())
            reads.append((entries, len(http_response.content)))

    events = CooldownStore(stack).model._get_connection().connection.client.meta.events
    events.register("after-call.dynamodb.GetItem", count)
    yield reads
    events.unregister("after-call.dynamodb.GetItem", count)


@pytest.fixture
def evidence_writes(stack: Settings) -> Iterator[list[str]]:
    """The update expression of every UpdateItem of the evidence record."""
    writes: list[str] = []

    def count(params: dict[str, Any], **_: Any) -> None:
        if params.get("Key", {}).get("cluster_id", {}).get("S") == RECORD_KEY:
            writes.append(params["UpdateExpression"])

    events = CooldownStore(stack).model._get_connection().connection.client.meta.events
    events.register("before-parameter-build.dynamodb.UpdateItem", count)
    yield writes
    events.unregister("before-parameter-build.dynamodb.UpdateItem", count)


def _raw_item(store: CooldownStore) -> dict[str, list[str]]:
    answer = store.model._get_connection().get_item(RECORD_KEY, consistent_read=True)
    return {k: v["SS"] for k, v in (answer.get("Item") or {}).items() if "SS" in v}


def _size(item: dict[str, list[str]]) -> int:
    return sum(len(name) + sum(len(e) for e in entries) for name, entries in item.items())


def _deliver(queues: QueueDriver, kind: str) -> None:
    handler = {"optimize": optimize_handler, "provision": provision_handler}[kind]
    assert handler(queues.event(queues.receive(kind)), None) == {"batchItemFailures": []}


def _view(stack: Settings, job_id: str) -> JobView:
    return get_job(wiring_for(stack), job_id, owner=None)


def test_thousands_of_refusals_and_preemptions_leave_recovery_working_and_plans_reading_little(
    stack: Settings, queues: QueueDriver, evidence_reads: list[tuple[int, int]]
) -> None:
    job_id = submit_job(wiring_for(stack), SubmitJob.from_text(owner="alice", task_text=SPOT)).job_id
    _deliver(queues, "optimize")
    _deliver(queues, "provision")
    first = _view(stack, job_id)
    assert first.state == JobState.SETTING_UP and first.region and first.zone
    zones = [("aws", first.region, first.zone)] + [("aws", f"r{k}", f"r{k}a") for k in range(1, 25)]
    cooldowns, now = CooldownStore(stack), time.time()
    for n in range(2_000):  # 1,000 jobs, two refused attempts each, spread over the zones
        cloud, region, zone = zones[n % len(zones)]
        cooldowns.refused(cloud, region, zone, f"job-{n // 2:012x}-{n % 2}", at=now - 3_000 + n)
    for n in range(600):  # and the preemptions of 600 spot clusters
        cloud, region, zone = zones[n % len(zones)]
        cooldowns.preempted(cloud, region, zone, f"job-{n:012x}-0", at=now - 3_000 + 4 * n)

    item = _raw_item(cooldowns)
    assert max(len(entries) for entries in item.values()) <= WRITE_CAP  # without any read in between
    assert sum(len(entries) for entries in item.values()) <= WRITE_CAP_IN_ALL
    assert _size(item) < ITEM_LIMIT / 4, _size(item)

    preemption = LocalCloud(stack.home).preempt(job_id, notice_seconds=0.1)
    assert preemption is not None
    evidence_reads.clear()
    assert spot_watch_handler(preemption, None) == {"outcome": "done"}  # recovered, re-planned, relaunched

    second = _view(stack, job_id)
    assert second.state == JobState.SETTING_UP and second.attempt == 1
    assert JobState.RECOVERING in [event["state"] for event in second.timeline]
    place = f"aws/{first.region}/{first.zone}"
    assert cooldowns.preemptions()[place][0].endswith(f"#{job_id}-0")  # counted, the newest there
    (read, size), *later = evidence_reads  # the re-plan's reads (2,601 entries written, ~105 KB)
    assert read <= WRITE_CAP_IN_ALL and size < 80_000, evidence_reads  # 1,801 entries: 74 KB
    assert later and all(n <= KEPT_IN_ALL for n, _ in later), evidence_reads  # pruned: 1,024, 43 KB


def test_plans_in_a_busy_zone_write_no_prune_until_it_passes_the_margin(
    stack: Settings, queues: QueueDriver, evidence_writes: list[str]
) -> None:
    cooldowns, wiring, now = CooldownStore(stack), wiring_for(stack), time.time()
    zone = "z#aws/us-east-1/us-east-1a"

    def preempted(n: int) -> None:
        cooldowns.preempted("aws", "us-east-1", "us-east-1a", f"job-{n:012x}-0", at=now - 600 + n)

    def plan_a_job() -> None:
        submit_job(wiring, SubmitJob.from_text(owner="alice", task_text=SPOT))
        _deliver(queues, "optimize")

    for n in range(KEPT_PER_ZONE):  # a busy zone, as its last prune left it
        preempted(n)
    evidence_writes.clear()
    for n in range(KEPT_PER_ZONE, PRUNE_PAST_PER_ZONE):  # 16 more preemptions, each followed by a plan
        preempted(n)
        plan_a_job()
    assert len(evidence_writes) == PRUNE_PAST_PER_ZONE - KEPT_PER_ZONE  # the entries' own ADDs, no prune
    assert {w.split(" ", 1)[0] for w in evidence_writes} == {"ADD"}  # (a DELETE after each, before)
    assert len(_raw_item(cooldowns)[zone]) == PRUNE_PAST_PER_ZONE

    evidence_writes.clear()
    preempted(PRUNE_PAST_PER_ZONE)  # 49: past the margin
    plan_a_job()
    plan_a_job()
    assert [w.split(" ", 1)[0] for w in evidence_writes] == ["ADD", "DELETE"]  # the first read prunes, once
    newest = range(PRUNE_PAST_PER_ZONE + 1 - KEPT_PER_ZONE, PRUNE_PAST_PER_ZONE + 1)
    assert {e.split("#", 1)[1] for e in _raw_item(cooldowns)[zone]} == {f"job-{n:012x}-0" for n in newest}


def _seed_old_record(cooldowns: CooldownStore, now: float) -> None:
    """12,000 entries in 12 zones, as the old layout kept them: past 400 KB."""
    client = cooldowns.model._get_connection().connection.client
    for batch in range(24):
        entries = [f"{now - 60 - n:.6f}#job-{batch * 500 + n:012x}-1" for n in range(500)]
        client.update_item(
            TableName=cooldowns.model.Meta.table_name,
            Key={"cluster_id": {"S": RECORD_KEY}},
            UpdateExpression="ADD #z :e",
            ExpressionAttributeNames={"#z": f"{REFUSAL_PREFIX}aws/r{batch % 12}/r{batch % 12}a"},
            ExpressionAttributeValues={":e": {"SS": entries}},
        )
    assert _size(_raw_item(cooldowns)) > ITEM_LIMIT


def test_a_preempted_job_recovers_when_its_evidence_cannot_be_written(
    stack: Settings, queues: QueueDriver
) -> None:
    job_id = submit_job(wiring_for(stack), SubmitJob.from_text(owner="alice", task_text=SPOT)).job_id
    _deliver(queues, "optimize")
    _deliver(queues, "provision")
    first = _view(stack, job_id)
    cooldowns = CooldownStore(stack)
    _seed_old_record(cooldowns, time.time())  # the preemption's ADD now fails: ValidationException
    preemption = LocalCloud(stack.home).preempt(job_id, notice_seconds=0.1)
    assert preemption is not None

    assert spot_watch_handler(preemption, None) == {"outcome": "done"}  # it raised TransactWriteError before

    second = _view(stack, job_id)
    assert second.state == JobState.SETTING_UP and second.attempt == 1
    assert JobState.RECOVERING in [event["state"] for event in second.timeline]
    assert f"aws/{first.region}/{first.zone}" not in cooldowns.preemptions()  # not counted: only logged
    assert _size(_raw_item(cooldowns)) < ITEM_LIMIT / 8  # the re-plan's read pruned the old record


def test_an_old_record_past_the_item_limit_shrinks_at_its_first_read(stack: Settings) -> None:
    cooldowns, now = CooldownStore(stack), time.time()
    _seed_old_record(cooldowns, now)
    with pytest.raises(UpdateError, match="ValidationException"):  # what the old layout came to
        cooldowns.refused("aws", "us-east-1", "us-east-1a", "job-new-0")

    cooling, refusals = cooldowns.evidence(now)  # the first read prunes each zone to its newest entries

    assert sum(len(listed) for listed in refusals.values()) == 12 * KEPT_PER_ZONE
    assert {c.place for c in cooling if c.scope == "zone"} == {f"aws/r{k}/r{k}a" for k in range(12)}
    assert _size(_raw_item(cooldowns)) < 12 * KEPT_PER_ZONE * 48
    cooldowns.refused("aws", "us-east-1", "us-east-1a", "job-new-0")
    assert "aws/us-east-1/us-east-1a" in cooldowns.evidence()[1]
