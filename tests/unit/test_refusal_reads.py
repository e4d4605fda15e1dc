"""A deadline job refused hundreds of times (12 an hour for days, `SKYLESS_SPOT_REFUSALS_PER_HOUR`): its
refusals are noted beside its timeline, so `status`, `logs` and the dashboard (the job view) read and show
the same items as with none, and the provider report reads each refusal once. On the in-memory store,
which counts what DynamoDB would read."""

from __future__ import annotations

from shared.clouds.errors import (
    CloudAuthError,
    InvalidLaunchError,
    NoCapacityError,
    QuotaError,
    TransientCloudError,
)
from shared.config import Settings
from shared.jobs.failover import note_refused_launch
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import get_job
from shared.optimizer.plan import Candidate
from shared.reports.provider_reads import provider_scorecard
from shared.store.memory import MemoryJobStore
from shared.wiring import wiring_for

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
