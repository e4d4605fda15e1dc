"""The deployment's contracts where jobs are planned (in-memory stack): at submit, as the API submits, a job
is planned into a free reservation, the next job sees what the first holds (read from the live jobs) and goes
to list price, the reservation is free again once the first job ends; a re-plan by the optimize handler
(recovery) counts the same way; a bad contracts file is an error naming the file and the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import QueueDriver

from functions.optimize.handler import handler as optimize_handler
from shared.config.env_names import ENV_CONTRACTS_FILE
from shared.errors import UserError
from shared.jobs.cancellation import cancel_job
from shared.jobs.messages import send_optimize
from shared.jobs.planning import plan_of
from shared.jobs.submission import SubmitJob, submit_job
from shared.optimizer import Plan
from shared.states import JobState
from shared.wiring import wiring_for

TASK = (
    "name: serve\nnum_nodes: 2\nresources:\n  cloud: aws\n  instance_type: m6i.large\nrun: python serve.py\n"
)
RESERVATION = {
    "id": "cr-0feed",
    "cloud": "aws",
    "zone": "us-east-1b",
    "instance_type": "m6i.large",
    "count": 3,
}


@pytest.fixture
def contracts_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "contracts.yaml"
    path.write_text(yaml.safe_dump({"contracts": {"reservations": [RESERVATION]}}))
    monkeypatch.setenv(ENV_CONTRACTS_FILE, str(path))
    return path


def submit_and_plan(settings: Any) -> tuple[str, Plan]:
    wiring = wiring_for(settings)
    job = submit_job(wiring, SubmitJob.from_text(owner="alice", task_text=TASK, filename="serve.yaml"))
    stored = wiring.store.get(job.job_id)
    assert stored is not None and stored.state == JobState.PLANNED, stored and stored.reason
    plan = plan_of(stored)
    assert plan is not None
    return job.job_id, plan


def test_a_reservation_is_used_until_live_jobs_hold_it_and_freed_when_they_end(
    stack: Any, queues: QueueDriver, contracts_file: Path
) -> None:
    first_id, first = submit_and_plan(stack)
    chosen = first.tasks[0].chosen
    assert (chosen.reservation, chosen.zone, chosen.hourly_price) == ("cr-0feed", "us-east-1b", 0)
    assert any("reserved: 3 of 3 free in cr-0feed" in n for n in first.notes)

    second_id, second = submit_and_plan(stack)  # 1 node left of 3: too few for 2
    assert second.tasks[0].chosen.reservation is None and second.tasks[0].chosen.hourly_price > 0
    assert any(
        "reserved: 1 of 3 free in cr-0feed" in n and "too few for 2 node(s)" in n for n in second.notes
    )

    cancel_job(wiring_for(stack), first_id, owner="alice")
    wiring = wiring_for(stack)
    job = wiring.store.get(second_id)
    assert job is not None
    for state in (JobState.PROVISIONING, JobState.SETTING_UP, JobState.RUNNING, JobState.RECOVERING):
        assert wiring.store.move(job, state, f"to {state}")  # preempted: re-planned by the optimize handler
    send_optimize(wiring, second_id, int(job.attempt))
    records = queues.receive("optimize")
    assert optimize_handler(queues.event(records + records), None) == {"batchItemFailures": []}  # twice
    replanned = wiring.store.get(second_id)
    assert replanned is not None and replanned.state == JobState.PLANNED
    plan = plan_of(replanned)
    assert plan is not None and plan.tasks[0].chosen.reservation == "cr-0feed"  # the first job ended
    assert any("reserved: 3 of 3 free in cr-0feed" in n for n in plan.notes)


def test_a_bad_contracts_file_is_an_error_naming_the_file_the_key_and_its_line(
    stack: Any, contracts_file: Path
) -> None:
    contracts_file.write_text(yaml.safe_dump({"contracts": {"reservations": [{**RESERVATION, "count": -1}]}}))
    with pytest.raises(UserError) as caught:
        submit_job(
            wiring_for(stack), SubmitJob.from_text(owner="alice", task_text=TASK, filename="serve.yaml")
        )
    lines = contracts_file.read_text().splitlines()
    line = next(n for n, text in enumerate(lines, 1) if "count: -1" in text)  # the bad key's own line
    assert str(caught.value).startswith(f"{contracts_file}:{line}: contracts.reservations[0].count: must")
