"""A month's budget spend read from the cost rollups (ended attempts) and the current clusters (running), not
from the owner's history: the scheduled reconcile sweep reads the same items over 100 or 3,000 finished
jobs per member but the rollups' days, an attempt that crosses midnight at a month's start counts each
month's share in its month, and a recovered job's earlier attempt is counted once. On the in-memory store,
which counts what DynamoDB would read."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from history import seed_memory
from memory_stack import MemoryQueues, memory_stack

from functions.submit.budget_views import budget_of
from shared.budgets.limits import month_start
from shared.budgets.records import Budget, MemoryBudgets, team_scope, user_scope
from shared.config import Settings
from shared.errors import UserError
from shared.jobs.budget_checks import month_spend
from shared.jobs.costs import end_cluster
from shared.jobs.reconcile import reconcile_event
from shared.jobs.submission import SubmitJob, submit_job
from shared.states import JobState
from shared.store.cost_rollups import day_of
from shared.store.memory import MemoryJobStore
from shared.store.models import ClusterModel
from shared.wiring import Wiring, wiring_for

HOUR = 3600.0
MEMBERS = ("alice", "carol")
SCHEDULED = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}


def _running(
    wiring: Wiring, job_id: str, owner: str, *, launched_at: float, attempt: int = 0
) -> ClusterModel:
    """A job (or its next attempt) RUNNING on one $0.50/h node since `launched_at`, written as the lifecycle
    writes it (no node listed: the sweep has no node to judge)."""
    store = wiring.store
    job = store.get(job_id)
    if job is None:
        job = store.new_job(job_id=job_id, owner=owner, state="PENDING", version=0, token_hash="h")
        assert store.create(job, "submitted")
        assert store.move(job, JobState.PLANNED, "planned")
    else:
        assert store.move(job, JobState.RECOVERING, "preempted")
        assert store.move(job, JobState.PLANNED, "re-planned", changes={"attempt": attempt})
    cluster = store.new_cluster(
        cluster_id=f"{job_id}-{attempt}", job_id=job_id, attempt=attempt, provider="local", cloud="aws",
        region="us-east-1", zone="us-east-1a", instance_type="c6i.large", use_spot=False, hourly_price=0.5,
        num_nodes=1, state="UP", nodes={}, launched_at=launched_at,
    )  # fmt: skip
    changes = {"cluster_id": cluster.cluster_id, "attempt": attempt}
    assert store.move(job, JobState.SETTING_UP, "launched", changes=changes, also_save=[cluster])
    assert store.move(job, JobState.RUNNING, "running")
    found = store.cluster(cluster.cluster_id)
    assert found is not None
    return found


def _rollup_items(store: MemoryJobStore, owner: str, now: float) -> int:
    first, today = day_of(month_start(now)), day_of(now)
    partition = f"costs#user#{owner}#{today[:7]}"
    return len([key for key in store._rollups.get(partition, {}) if first <= key[:10] <= today])


def _sweep_reads(home: Path, monkeypatch: pytest.MonkeyPatch, finished: int, scope: str) -> dict[str, Any]:
    with memory_stack(home, monkeypatch, MemoryQueues()) as settings:
        wiring = wiring_for(settings)
        store, budgets = wiring.store, wiring.budgets
        assert isinstance(store, MemoryJobStore) and isinstance(budgets, MemoryBudgets)
        budgets.teams = {"ml": set(MEMBERS)}
        if scope == "team":
            budgets.put(Budget(team_scope("ml"), 1e9, "stop", "admin"))
        for member in MEMBERS:
            if scope == "user":
                budgets.put(Budget(user_scope(member), 1e9, "stop", "admin"))
            seed_memory(store, finished, owner=member, ended_before=time.time())
            _running(wiring, f"live-{member}", member, launched_at=time.time() - 2 * HOUR)
        before = store.items_read
        actions = reconcile_event(SCHEDULED)  # what the scheduled handler runs for jobs
        now = time.time()
        read = store.items_read - before
        return {
            "read": read,
            "rollups": sum(_rollup_items(store, member, now) for member in MEMBERS),
            "actions": actions,
            "spend": {member: month_spend(wiring, member, now) for member in MEMBERS},
            "history": sum(1 for job in store._all_jobs() if job.job_id.startswith("hist-")),
        }


@pytest.mark.parametrize("scope", ["user", "team"])
def test_a_sweep_reads_the_same_items_over_thousands_of_finished_jobs_but_the_rollups_days(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scope: str
) -> None:
    small = _sweep_reads(tmp_path / "small", monkeypatch, 100, scope)
    large = _sweep_reads(tmp_path / "large", monkeypatch, 3000, scope)

    assert (small["history"], large["history"]) == (200, 6000)
    assert small["actions"] == large["actions"] == {}  # nothing stopped, nothing warned: 1e9 of budget
    # what grows is one rollup item per member per day of this month the history ran on, not one per job
    assert large["read"] - large["rollups"] == small["read"] - small["rollups"]
    assert large["read"] <= small["read"] + 2 * len(MEMBERS) and large["read"] < 60, (small, large)
    for member in MEMBERS:  # 40 s at $0.42/h a job, those of this month; 2 h at $0.50/h running
        spent = large["spend"][member]
        month_jobs = min(3000, int((time.time() - month_start(time.time())) // 60))
        assert spent.finished == pytest.approx(month_jobs * 0.42 * 40 / HOUR, abs=0.01)
        assert spent.live == pytest.approx(1.0, abs=0.001)


def test_an_attempt_from_last_month_counts_each_months_share_in_its_month(stack: Settings) -> None:
    wiring = wiring_for(stack)
    now = time.time()
    start = month_start(now)
    cluster = _running(wiring, "job-crossing", "alice", launched_at=start - 10 * HOUR)
    this_month = 0.5 * (now - start) / HOUR

    running = budget_of(stack, "alice")  # the API's answer (GET /budget)
    assert running.spent_ended == 0 and running.spent_running == pytest.approx(this_month, abs=0.001)

    job = wiring.store.get("job-crossing")
    assert job is not None and wiring.store.move(job, JobState.SUCCEEDED, "done")
    assert end_cluster(wiring, cluster, "alice")
    ended_at = time.time()
    this_month = 0.5 * (ended_at - start) / HOUR
    ended = month_spend(wiring, "alice", ended_at)
    assert ended.live == 0 and ended.finished == pytest.approx(this_month, abs=0.001)
    last_month = month_spend(wiring, "alice", start - 1)
    assert last_month.finished == pytest.approx(0.5 * 10, abs=0.001)

    wiring.budgets.put(Budget(user_scope("alice"), round(this_month * 0.9, 6), "stop", "alice"))
    task = SubmitJob.from_text(owner="alice", task_text="name: next\nresources:\n  cpus: 2\nrun: echo\n")
    with pytest.raises(UserError) as refused:
        submit_job(wiring, task)
    said = str(refused.value)
    found = re.search(r"ended attempts \$([\d.]+) \+ running \$([\d.]+)\)", said)
    assert found is not None, said
    assert float(found.group(1)) == pytest.approx(this_month, abs=0.006) and float(found.group(2)) == 0
    # $5 of last month's share would have been over the budget: only this month's counts
    wiring.budgets.put(Budget(user_scope("alice"), round(this_month + 1, 6), "stop", "alice"))
    assert submit_job(wiring, task).job_id


def test_a_recovered_jobs_earlier_attempt_counts_once_ended_and_its_current_one_running(
    stack: Settings,
) -> None:
    wiring = wiring_for(stack)
    launched = time.time() - 3 * HOUR
    first = _running(wiring, "job-recovered", "alice", launched_at=launched)
    assert end_cluster(wiring, first, "alice")  # attempt 0 preempted: its teardown writes its rollup
    _running(wiring, "job-recovered", "alice", launched_at=time.time() - HOUR, attempt=1)

    now = time.time()
    spent = month_spend(wiring, "alice", now)
    first_cost = 0.5 * (now - max(launched, month_start(now))) / HOUR  # up to the teardown, this month's
    assert spent.finished == pytest.approx(first_cost, abs=0.01)
    assert spent.live == pytest.approx(0.5 * min(1, (now - month_start(now)) / HOUR), abs=0.01)
