"""The provider scorecard as an opt-in reliability prior (issue 23 item 4), through the real handlers: another
user's history on azure/eastus (four spot preemptions in 20 spot-minutes, 5 minutes to RUNNING each) is kept
by the reconcile handler's snapshot; a job launched with `skyless launch` that may run in eastus or, 8 %
dearer, in northeurope is placed in northeurope only with `SKYLESS_RELIABILITY_PRIOR_DAYS` set, and
`skyless status` says why."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_budgets import _run
from test_provider_scorecard import _launch as _launch_attempt

from functions.reconcile.handler import handler as reconcile_handler
from shared.config import Settings
from shared.jobs.planning import _prior_reads, plan_of
from shared.jobs.recovery import recover_job
from shared.jobs.submission import SubmitJob, submit_job
from shared.store.cooldowns import RECORD_KEY, record_model
from shared.store.users import create_user, find_user
from shared.wiring import wiring_for

EVENTS = Path(__file__).resolve().parents[1] / "events"
TASK = """\
name: prior
resources:
  cpus: 8
  use_spot: true
  any_of:
    - {cloud: azure, region: eastus}
    - {cloud: azure, region: northeurope}
run: echo
"""


def _seed_preemptions(stack: Settings) -> None:
    """Another user's job, preempted four times on azure eastus spot, 5 minutes after each launch."""
    wiring = wiring_for(stack)
    owner = find_user(create_user("history", stack), stack)
    assert owner is not None
    job_id = submit_job(wiring, SubmitJob.from_text(owner=owner.user_id, task_text=TASK)).job_id
    for attempt in range(4):
        _launch_attempt(stack, job_id, attempt, "azure", "eastus", "Standard_D8s_v5",
                        spot=True, price=0.0768, ran_after=300, hours=0.5)  # fmt: skip
        job = wiring.store.get(job_id)
        assert job is not None
        assert recover_job(wiring, job, "spot preempted", preempted=True, warned=True).value
    # as if it were days ago: the cool-down policy has forgotten them (after 4 h); the scorecard keeps 30 days
    record_model(stack)(cluster_id=RECORD_KEY).delete()
    assert not wiring.cooldowns.cooling()


def _placed(stack: Settings, cli_api: list[str], tmp_path: Path) -> tuple[str, str]:
    path = tmp_path / "prior.yaml"
    path.write_text(TASK)
    launched = _run("launch", str(path), "--detach", *cli_api)
    assert launched.exit_code == 0, launched.output
    job_id = re.search(r"Job (job-\w+) submitted", launched.output).group(1)  # type: ignore[union-attr]
    job = wiring_for(stack).store.get(job_id)
    assert job is not None
    plan = plan_of(job)
    assert plan is not None
    return job_id, plan.tasks[0].chosen.region


@pytest.fixture(autouse=True)
def no_cached_snapshot() -> None:
    _prior_reads.clear()


def test_a_place_with_many_preemptions_loses_to_a_dearer_reliable_one_only_when_opted_in(
    stack: Settings, cli_api: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _seed_preemptions(stack)
    scheduled = json.loads((EVENTS / "scheduled_event.json").read_text())

    assert reconcile_handler(scheduled, None)["reliability"] == "off"
    _, region = _placed(stack, cli_api, tmp_path)
    assert region == "eastus"  # the list price wins with the prior off

    monkeypatch.setenv("SKYLESS_RELIABILITY_PRIOR_DAYS", "30")
    assert reconcile_handler(scheduled, None)["reliability"] == "written"
    assert reconcile_handler(scheduled, None)["reliability"] == "fresh"  # at most once an hour
    job_id, region = _placed(stack, cli_api, tmp_path)
    assert region == "northeurope"

    status = " ".join(_run("status", job_id, *cli_api).output.split())
    said = (r"plan: reliability prior \(the provider scorecard of the last 30 days, opt-in\): azure/eastus\S*"
            r" Standard_D8s_v5 \(spot\) at \$0\.0768/h is expected at \$0\.[1-9][0-9]+/h \(1\d\.\d\d "
            r"preemptions per spot-hour\)")  # fmt: skip
    assert re.search(said, status), status
    assert "plan: reliability prior: chose azure/northeurope" in status, status


def test_with_no_history_the_prior_changes_nothing(
    stack: Settings, cli_api: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKYLESS_RELIABILITY_PRIOR_DAYS", "30")
    scheduled = json.loads((EVENTS / "scheduled_event.json").read_text())
    assert reconcile_handler(scheduled, None)["reliability"] == "written"
    job_id, region = _placed(stack, cli_api, tmp_path)
    assert region == "eastus"
    assert "reliability prior" not in _run("status", job_id, *cli_api).output
