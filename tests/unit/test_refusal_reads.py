"""A deadline job refused hundreds of times (12 an hour for days, `SKYLESS_SPOT_REFUSALS_PER_HOUR`): its
refusals are noted beside its timeline, so `status`, `logs` and the dashboard (the job view) read and show
the same items as with none, and the provider report reads each refusal once, and the refused launches of
only the jobs that have some among thousands. On the in-memory store, which counts what DynamoDB would
read."""

from __future__ import annotations

from typing import Any

import pytest
from history import seed_memory

from shared.clouds.errors import (
    CloudAuthError,
    InvalidLaunchError,
    NoCapacityError,
    QuotaError,
    TransientCloudError,
)
from shared.config import Settings
from shared.jobs.failover import note_refused_launch, refusals_partition
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import get_job
from shared.optimizer.plan import Candidate
from shared.reports.provider_reads import provider_scorecard
from shared.store.memory import MemoryJobStore
from shared.wiring import Wiring, wiring_for

TASK = "name: train\nresources:\n  cloud: aws\n  region: us-east-1\n  cpus: 2+\n  use_spot: true\nrun: echo\n"
SPOT = Candidate(
    cloud="aws", region="us-east-1", zone="us-east-1a", instance_type="m5.large", accelerator=None,
    accelerator_count=0, vcpus=2, memory_gib=8, use_spot=True, hourly_price=0.03, num_nodes=1,
    estimated_hours=2, estimated_cost=0.06,
)  # fmt: skip


def _reads(stack: Settings, owner: str, refusals: int) -> tuple[int, int, int]:
    """(items the job view reads, its timeline's length, items the owner's report reads)."""
    wiring = wiring_for(stack)
    store = wiring.store
    assert isinstance(store, MemoryJobStore)
    submitted = SubmitJob.from_text(owner=owner, task_text=TASK, deadline="3d", hours=2.0)
    job = store.get(submit_job(wiring, submitted).job_id)
    assert job is not None
    for _ in range(refusals):
        note_refused_launch(wiring, job, SPOT, NoCapacityError("no spot capacity in us-east-1a"))
    before = store.items_read
    view = get_job(wiring, job.job_id, owner=owner)
    status = store.items_read - before
    before = store.items_read
    card = provider_scorecard(wiring, owner=owner, days=1)
    report = store.items_read - before
    assert sum(line.capacity_refusals for line in card.lines) == refusals
    return status, len(view.timeline), report


def test_hundreds_of_refusals_leave_the_job_view_as_cheap_and_the_report_reads_each_once(
    stack: Settings,
) -> None:
    quiet = _reads(stack, "alice", 0)
    refused = _reads(stack, "bob", 500)

    assert refused[:2] == quiet[:2]  # the same items read, the same timeline shown
    assert refused[2] == quiet[2] + 500


def test_each_kind_of_refusal_is_noted_with_the_kind_a_block_names_and_an_invalid_request_is_not(
    stack: Settings,
) -> None:
    wiring = wiring_for(stack)
    job = wiring.store.get(submit_job(wiring, SubmitJob.from_text(owner="carol", task_text=TASK)).job_id)
    assert job is not None
    errors = (
        NoCapacityError("none"),
        QuotaError("over"),
        CloudAuthError("bad key"),
        TransientCloudError("throttled"),
        InvalidLaunchError("no such image"),
    )
    for error in errors:
        note_refused_launch(wiring, job, SPOT, error)

    (line,) = provider_scorecard(wiring, owner="carol", days=1).lines
    assert (line.launch_requests, line.capacity_refusals, line.other_refusals) == (4, 1, 3)


def _refused_job(wiring: Wiring, owner: str, refusals: int) -> str:
    job = wiring.store.get(submit_job(wiring, SubmitJob.from_text(owner=owner, task_text=TASK)).job_id)
    assert job is not None
    for _ in range(refusals):
        note_refused_launch(wiring, job, SPOT, NoCapacityError("no spot capacity in us-east-1a"))
    return job.job_id


def _old_refused_job(store: MemoryJobStore, owner: str) -> str:
    """A finished job stored before `refusals_noted` was kept, with one refusal noted beside its timeline."""
    job_id = f"hist-{owner}-old"
    item = dict(next(i for k, i in store._jobs.items() if k.startswith(f"hist-{owner}-")))
    del item["refusals_noted"]
    store._jobs[job_id] = {**item, "job_id": {"S": job_id}}
    store.note(refusals_partition(job_id), "refused", "aws/us-east-1 m5.large: no capacity", {
        "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "instance_type": "m5.large",
        "use_spot": True, "error": "no capacity",
    })  # fmt: skip
    return job_id


def _report_reads(
    wiring: Wiring, owner: str | None, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, int, set[str]]:
    """(the scorecard, its requests, the refused-launch partitions it read)."""
    store = wiring.store
    assert isinstance(store, MemoryJobStore)
    partitions: set[str] = set()
    timeline = store.timeline

    def read(partition: str) -> Any:
        if partition.startswith(refusals_partition("")):
            partitions.add(partition)
        return timeline(partition)

    monkeypatch.setattr(store, "timeline", read)
    before = store.requests
    card = provider_scorecard(wiring, owner=owner, days=30)
    monkeypatch.undo()
    return card, store.requests - before, partitions


def test_the_report_reads_the_refused_launches_only_of_jobs_that_have_some_among_thousands(
    stack: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    wiring = wiring_for(stack)
    store = wiring.store
    assert isinstance(store, MemoryJobStore)
    seed_memory(store, 1_498, owner="alice")  # finished, never refused
    seed_memory(store, 499, owner="bob")
    alices = {_refused_job(wiring, "alice", 3), _old_refused_job(store, "alice")}
    bobs = {_refused_job(wiring, "bob", 2)}

    mine, requests, read = _report_reads(wiring, "alice", monkeypatch)
    assert mine.jobs_read == 1_500 and read == {refusals_partition(j) for j in alices}
    assert sum(line.capacity_refusals for line in mine.lines) == 4  # the old job's refusal still counts
    # 1 Query of her jobs, 15 BatchGetItems of their clusters, a timeline Query a job and 2 of refusals:
    # 1,518 requests, where every job's refusals were read before (3,016)
    assert requests == 1 + 15 + 1_500 + 2

    everyone, requests, read = _report_reads(wiring, None, monkeypatch)
    assert everyone.jobs_read == 2_000 and read == {refusals_partition(j) for j in alices | bobs}
    assert sum(line.capacity_refusals for line in everyone.lines) == 6
    assert requests == 31 + 20 + 2_000 + 3  # a Query of each of the 31 days (was 4,051)
