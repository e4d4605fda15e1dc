"""A job from submit to SUCCEEDED against the moto server: the one test of tests/unit/test_lifecycle.py that
stays here, since it reads the cost of the seconds its cluster ran (in memory, too few to price)."""

from __future__ import annotations

from conftest import QueueDriver
from test_lifecycle import launch, live_nodes, report_all, run, sleeping_nodes, state_of

from shared.config import Settings
from shared.jobs.views import get_job
from shared.states import JobState
from shared.wiring import wiring_for

__all__ = ["sleeping_nodes"]  # its autouse fixture: the nodes sleep instead of running an agent


def test_a_job_runs_from_submit_to_succeeded_and_its_nodes_are_torn_down(
    stack: Settings, queues: QueueDriver
) -> None:
    job_id = launch(stack, queues)
    assert state_of(stack, job_id) == JobState.SETTING_UP
    assert len(live_nodes(stack, job_id)) == 1
    report_all(stack, job_id, "setting_up")
    report_all(stack, job_id, "running")
    assert state_of(stack, job_id) == JobState.RUNNING
    report_all(stack, job_id, "succeeded", exit_code=0)
    assert state_of(stack, job_id) == JobState.SUCCEEDED
    run(queues, "provision")  # the teardown
    assert live_nodes(stack, job_id) == []
    view = get_job(wiring_for(stack), job_id, owner=None)
    assert view.cluster is not None and view.cluster["state"] == "TERMINATED"
    states = [e["state"] for e in view.timeline if e["kind"] == "state"]
    # planned at submit; PROVISIONING is written only when a launch has progress to keep (failover, retries)
    assert states == ["PLANNED", "SETTING_UP", "RUNNING", "SUCCEEDED"]
    assert [e["kind"] for e in view.timeline][-1] == "teardown"  # from the cluster record
    seconds = (view.cost / (view.plan["tasks"][0]["candidates"][0]["hourly_price"])) * 3600  # type: ignore[index]
    assert 0 < seconds < 120  # the cluster's price for the time it ran
