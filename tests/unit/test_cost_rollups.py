"""Cost rollups (issue 20): an attempt's cost is added to per-day, per-owner, per-cloud rollups by the write
that ends it, once however often it ends; cost reports read the rollups (and the clusters still up), so they
stay exact after the job detail expires and read the same few items at any number of jobs. On the in-memory
store, which counts what DynamoDB would read (tests/unit/test_job_store_contract.py holds both stores to the
rollup write's contract)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.config import Settings
from shared.jobs.cost_report import CostReport, build_report, clusters_of, cost_report, job_record
from shared.jobs.costs import end_cluster
from shared.jobs.outcomes import Outcome
from shared.jobs.provisioning import teardown_cluster
from shared.jobs.submission import SubmitJob, submit_job
from shared.states import JobState
from shared.store.cost_rollups import AttemptFacts, attempt_pieces, month_ranges
from shared.store.memory import MemoryJobStore
from shared.wiring import Wiring, wiring_for

HOUR = 3600.0
PLACES = [
    ("aws", "us-east-1", "us-east-1a", "c6i.2xlarge"),
    ("gcp", "us-central1", "us-central1-a", "n2-standard-8"),
]


@pytest.fixture(autouse=True)
def _no_users_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """User names come from the users table, which the memory stack does not have."""
    import shared.store.users

    monkeypatch.setattr(shared.store.users, "user_names", lambda settings: {"alice": "Alice"})


def _launch(
    wiring: Wiring, job_id: str, owner: str, *, attempt: int, hours_ago: float, spot: bool, place: int
) -> Any:
    """A job (or its next attempt) with a cluster up since `hours_ago`, written as the lifecycle writes it."""
    store = wiring.store
    job = store.get(job_id)
    if job is None:
        task = SubmitJob.from_text(owner=owner, task_text="name: train\nresources:\n  cpus: 8\nrun: echo\n")
        job = store.get(submit_job(wiring, task).job_id)
        assert job is not None and job.state == JobState.PLANNED.value
        job_id = job.job_id
    else:
        assert store.move(job, JobState.RECOVERING, "preempted")
        assert store.move(job, JobState.PLANNED, "re-planned", changes={"attempt": attempt})
    cloud, region, zone, instance = PLACES[place]
    cluster = store.new_cluster(
        cluster_id=f"{job_id}-{attempt}", job_id=job_id, attempt=attempt, provider="local", cloud=cloud,
        region=region, zone=zone, instance_type=instance, use_spot=spot, hourly_price=0.2 if spot else 0.5,
        num_nodes=2, state="UP", nodes={}, launched_at=time.time() - hours_ago * HOUR,
    )  # fmt: skip
    changes = {"cluster_id": cluster.cluster_id, "attempt": attempt}
    assert store.move(job, JobState.SETTING_UP, "launched", changes=changes, also_save=[cluster])
    assert store.move(job, JobState.RUNNING, "running")
    return store.cluster(cluster.cluster_id)


def _finish(wiring: Wiring, job_id: str) -> None:
    job = wiring.store.get(job_id)
    assert job is not None and wiring.store.move(job, JobState.SUCCEEDED, "done")


def _team_history(wiring: Wiring) -> list[str]:
    """Two users' jobs over the last four days on two clouds; some preempted once; two still running."""
    job_ids = []
    for n in range(12):
        owner = ("alice", "bob")[n % 2]
        first = _launch(wiring, "", owner, attempt=0, hours_ago=90 - 7 * n, spot=True, place=n % 2)
        job_id = first.job_id
        job_ids.append(job_id)
        if n % 3 == 0:  # preempted: its first cluster ends, a second attempt runs on-demand elsewhere
            assert teardown_cluster(wiring, job_id, first.cluster_id) == Outcome.DONE
            _launch(wiring, job_id, owner, attempt=1, hours_ago=80 - 7 * n, spot=False, place=(n + 1) % 2)
        if n >= 10:
            continue  # still running
        _finish(wiring, job_id)
        job = wiring.store.get(job_id)
        assert job is not None and job.cluster_id is not None
        assert (
            teardown_cluster(wiring, job_id, job.cluster_id) == Outcome.DONE
        )  # the provision step's teardown
    return job_ids


def _expire_detail(store: MemoryJobStore) -> None:
    """What DynamoDB's TTL does once the retention has passed: every item with `expires_at` is gone."""
    for table in (store._jobs, store._clusters):
        for key in [k for k, item in table.items() if "expires_at" in item]:
            del table[key]
    for partition in store._events.values():
        for key in [k for k, item in partition.items() if "expires_at" in item]:
            del partition[key]


def _totals(report: CostReport) -> list[tuple[str, float, float, float, float, int, int]]:
    return [
        (
            line.key,
            line.cost,
            line.on_demand_cost,
            line.spot_cost,
            round(line.hours, 4),
            line.attempts,
            line.jobs,
        )
        for line in [*report.lines, report.total]
    ]


@pytest.mark.parametrize("by", ["cloud", "user", "day"])
@pytest.mark.parametrize("owner", [None, "alice"])
def test_a_report_after_the_detail_expired_equals_the_report_before(
    stack: Settings, by: str, owner: str | None
) -> None:
    wiring = wiring_for(stack)
    _team_history(wiring)
    now = time.time()
    before = cost_report(stack, owner=owner, days=7, by=by, now=now)
    _expire_detail(wiring.store)  # type: ignore[arg-type]
    after = cost_report(stack, owner=owner, days=7, by=by, now=now)

    assert before.total.cost > 0 and _totals(after) == _totals(before) and after.daily == before.daily
    # the per-job list is detail: the finished jobs go with it, those still running stay
    assert len(before.jobs) > len(after.jobs) and {j.job.state for j in after.jobs} == {"RUNNING"}


@pytest.mark.parametrize("by", ["cloud", "user"])
def test_the_rollups_add_up_to_what_the_job_detail_says(stack: Settings, by: str) -> None:
    wiring = wiring_for(stack)
    job_ids = _team_history(wiring)
    now = time.time()
    rolled = cost_report(stack, owner=None, days=7, by=by, now=now)
    jobs = [job_record(j) for j in map(wiring.store.get, job_ids) if j is not None]
    detail = build_report(jobs, clusters_of(stack, jobs), wiring.catalog, by=by, since=0, now=now, days=7)

    # a job counts once, in the cloud its first cluster ran (the detail counts a job that moved in both)
    jobs_of = (lambda line: line.jobs) if by == "user" else (lambda line: None)
    assert [(line.key, jobs_of(line), line.attempts) for line in rolled.lines] == [
        (line.key, jobs_of(line), line.attempts) for line in detail.lines
    ]
    totals = (detail.total.jobs, detail.total.attempts)
    assert (rolled.total.jobs, rolled.total.attempts) == totals == (12, 16)
    for mine, theirs in zip([*rolled.lines, rolled.total], [*detail.lines, detail.total], strict=True):
        assert mine.cost == pytest.approx(theirs.cost, abs=1e-4)
        assert mine.on_demand_cost == pytest.approx(theirs.on_demand_cost, abs=1e-4)
        assert mine.spot_cost == pytest.approx(theirs.spot_cost, abs=1e-4)


def test_an_attempt_ended_again_late_or_by_the_sweep_counts_once(stack: Settings) -> None:
    wiring = wiring_for(stack)
    cluster = _launch(wiring, "", "alice", attempt=0, hours_ago=5, spot=True, place=0)
    _finish(wiring, cluster.job_id)
    assert teardown_cluster(wiring, cluster.job_id, cluster.cluster_id) == Outcome.DONE
    again = teardown_cluster(wiring, cluster.job_id, cluster.cluster_id)  # a duplicate message
    assert again == Outcome.ALREADY_DONE
    assert not end_cluster(wiring, cluster)  # the stale record a late sweep holds

    report = cost_report(stack, owner="alice", days=7, by="cloud")
    assert (report.total.jobs, report.total.attempts) == (1, 1)
    assert report.total.cost == pytest.approx(0.2 * 2 * 5, abs=0.01)


def test_a_report_past_5000_jobs_counts_every_one_and_reads_what_it_did_at_50(stack: Settings) -> None:
    wiring = wiring_for(stack)
    store: MemoryJobStore = wiring.store  # type: ignore[assignment]

    def seed(count: int, start: int) -> None:
        for n in range(start, start + count):
            job_id = f"job-{n:012d}"
            job = store.new_job(job_id=job_id, owner="alice", state="PENDING", version=0, token_hash="h")
            assert store.create(job, "submitted")
            cluster = store.new_cluster(
                cluster_id=f"{job_id}-0", job_id=job_id, attempt=0, provider="local", cloud="aws",
                region="us-east-1", zone="us-east-1a", instance_type="c6i.2xlarge", use_spot=False,
                hourly_price=1.0, num_nodes=1, state="UP", nodes={}, launched_at=time.time() - HOUR,
            )  # fmt: skip
            store._clusters[cluster.cluster_id] = cluster.serialize()
            assert end_cluster(wiring, cluster, "alice")

    def reads(days: int) -> tuple[CostReport, int]:
        items = store.items_read
        report = cost_report(stack, owner=None, days=days, by="cloud")
        return report, store.items_read - items

    seed(50, 0)
    small, small_reads = reads(90)
    seed(5100, 50)
    large, large_reads = reads(90)

    assert (small.total.jobs, large.total.jobs) == (50, 5150)
    assert large.total.cost == pytest.approx(5150.0, abs=0.5)
    # the rollups (two days' items at most) and the newest 200 jobs listed, with their clusters
    assert small_reads <= 2 + 2 * 50 and large_reads <= 2 + 2 * 200


@given(start=st.floats(0, 4e9), hours=st.floats(0, 24 * 120))
def test_an_attempts_pieces_keep_every_cent_and_hour(start: float, hours: float) -> None:
    facts = AttemptFacts(owner="a", on_demand_hourly=3.0, first_of_job=True)
    pieces = attempt_pieces(
        cloud="aws", use_spot=True, hourly_price=1.0, num_nodes=2, launched_at=start,
        ended_at=start + hours * HOUR, facts=facts,
    )  # fmt: skip
    assert sum(p.cost for p in pieces) == pytest.approx(2 * hours, abs=1e-6)
    assert sum(p.on_demand_cost for p in pieces) == pytest.approx(6 * hours, abs=1e-6)
    assert (sum(p.attempts for p in pieces), sum(p.jobs for p in pieces)) == (1, 1)
    assert [p.day for p in pieces] == sorted({p.day for p in pieces})


def test_month_ranges_cover_the_days_asked_once() -> None:
    assert month_ranges("2025-12-30", "2026-02-02") == [
        ("2025-12", "2025-12-30", "2025-12-31"),
        ("2026-01", "2026-01-01", "2026-01-31"),
        ("2026-02", "2026-02-01", "2026-02-02"),
    ]
