"""At most one live cluster per job: an attempt's launch starts only once the earlier attempts' clusters
are gone, whatever the queue did with their teardown messages (lost, late, duplicated).

Through the real handlers, on the in-memory stack and the real local cloud; nodes run a sleeping stand-in
for the agent so that "live" is a fact about processes.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from conftest import QueueDriver

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from functions.spot_watch.handler import handler as spot_watch_handler
from shared.clouds.base import LaunchSpec
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.jobs.agent_reports import AgentReport, report_agent_status
from shared.jobs.reconcile import reconcile
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import get_job
from shared.states import JobState
from shared.wiring import wiring_for

SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])
SPOT = "name: train\nresources:\n  cloud: aws\n  cpus: 2+\n  use_spot: true\nrun: python train.py\n"
TWO_NODE_SPOT = SPOT.replace("name: train", "name: ddp\nnum_nodes: 2")


@pytest.fixture(autouse=True)
def sleeping_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)


def deliver(queues: QueueDriver, kind: str, keep: str | None = None) -> list[dict[str, Any]]:
    """Deliver a queue's messages; with `keep`, messages whose action is `keep` are handed back undelivered
    (a teardown the queue has not delivered yet)."""
    handler = {"optimize": optimize_handler, "provision": provision_handler}[kind]
    records = queues.receive(kind)
    held = [r for r in records if keep and json.loads(r["body"]).get("action") == keep]
    batch = [r for r in records if r not in held]
    assert handler(queues.event(batch), None) == {"batchItemFailures": []}
    return held


def live_clusters(settings: Settings, job_id: str) -> set[str]:
    return {n.cluster_id for n in LocalCloud(settings.home).list_job(job_id) if n.state == "running"}


@pytest.fixture
def launches_seen(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, set[str]]]:
    """Each launch the local cloud gets: its cluster, and the job's clusters running at that moment."""
    seen: list[tuple[str, set[str]]] = []
    real_launch = LocalCloud.launch

    def launch(self: LocalCloud, spec: LaunchSpec) -> Any:
        running = {n.cluster_id for n in self.list_job(spec.job_id) if n.state == "running"}
        seen.append((spec.cluster_id, running - {spec.cluster_id}))
        return real_launch(self, spec)

    monkeypatch.setattr(LocalCloud, "launch", launch)
    return seen


def start(settings: Settings, queues: QueueDriver, task: str) -> str:
    job_id = submit_job(wiring_for(settings), SubmitJob.from_text(owner="alice", task_text=task)).job_id
    deliver(queues, "optimize")
    deliver(queues, "provision")
    assert get_job(wiring_for(settings), job_id, owner=None).state == JobState.SETTING_UP
    return job_id


def preempt(settings: Settings, job_id: str, rank: int = 0) -> None:
    """The node's agent reports the notice (the path that leaves the re-plan and the launch to the
    queues, whose teardown these tests hold back), then the cloud takes the node."""
    node = get_job(wiring_for(settings), job_id, owner=None).cluster["nodes"][rank]  # type: ignore[index]
    report_agent_status(wiring_for(settings), AgentReport(job_id, node["instance_id"], "preempting"))
    assert LocalCloud(settings.home).preempt(job_id, rank=rank, notice_seconds=0.1) is not None


def test_a_relaunch_waits_for_nothing_but_terminates_the_old_cluster_when_its_teardown_is_late(
    stack: Settings, queues: QueueDriver, launches_seen: list[tuple[str, set[str]]]
) -> None:
    job_id = start(stack, queues, TWO_NODE_SPOT)
    preempt(stack, job_id, rank=1)  # one node of two: the survivor would go on running the task
    assert live_clusters(stack, job_id) == {f"{job_id}-0"}
    late_teardown = deliver(queues, "provision", keep="teardown")
    deliver(queues, "optimize")
    deliver(queues, "provision")
    view = get_job(wiring_for(stack), job_id, owner=None)
    assert view.state == JobState.SETTING_UP and view.attempt == 1
    assert launches_seen[-1] == (f"{job_id}-1", set())  # nothing of attempt 0 ran when attempt 1 launched
    assert live_clusters(stack, job_id) == {f"{job_id}-1"}
    fenced = [e for e in view.timeline if e["kind"] == "fence"]
    assert [e["message"] for e in fenced] == [f"cluster {job_id}-0 terminated before attempt 1 launches"]
    assert provision_handler(queues.event(late_teardown), None) == {"batchItemFailures": []}
    assert live_clusters(stack, job_id) == {f"{job_id}-1"}  # the late teardown changes nothing


def test_a_cluster_launched_but_never_recorded_is_found_by_tag_and_terminated_before_the_next_attempt(
    stack: Settings, queues: QueueDriver, launches_seen: list[tuple[str, set[str]]]
) -> None:
    job_id = start(stack, queues, SPOT)
    # A provision of attempt 0 that crashed after the cloud started VMs and before it recorded them:
    # only the cloud knows of this cluster (no record, so no teardown message will ever name it).
    cloud = LocalCloud(stack.home, api_url=stack.api_url)
    stray = LaunchSpec(
        job_id=job_id, cluster_id=f"{job_id}-0-stray", attempt_id="stray", attempt=0, cloud="aws",
        region="us-west-2", zone="us-west-2a", instance_type="c6i.large", use_spot=True, num_nodes=1,
    )  # fmt: skip
    cloud._launch_locked(stray)
    preempt(stack, job_id)
    deliver(queues, "provision", keep="teardown")  # the recorded cluster's teardown is late too
    deliver(queues, "optimize")
    deliver(queues, "provision")
    assert launches_seen[-1] == (f"{job_id}-1", set())
    assert live_clusters(stack, job_id) == {f"{job_id}-1"}
    messages = [
        e["message"] for e in get_job(wiring_for(stack), job_id, owner=None).timeline if e["kind"] == "fence"
    ]
    assert f"cluster {job_id}-0-stray terminated before attempt 1 launches" in messages


def test_a_launch_waits_while_the_cloud_still_lists_an_earlier_cluster_as_running(
    stack: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = start(stack, queues, TWO_NODE_SPOT)
    preempt(stack, job_id, rank=1)  # rank 0 goes on running
    held = deliver(queues, "provision", keep="teardown")
    deliver(queues, "optimize")
    slow = {"on": True}
    real_terminate = LocalCloud.terminate

    def terminate(self: LocalCloud, cluster_id: str) -> None:  # a cloud that has not let go yet
        if not slow["on"]:
            real_terminate(self, cluster_id)

    monkeypatch.setattr(LocalCloud, "terminate", terminate)
    deliver(queues, "provision")
    view = get_job(wiring_for(stack), job_id, owner=None)
    assert view.state == JobState.PLANNED and view.cluster is None  # nothing launched for attempt 1
    assert live_clusters(stack, job_id) == {f"{job_id}-0"}
    assert queues.delayed_count("provision") == 1  # the launch is asked again a little later
    assert any(e["kind"] == "fence" and "waiting for" in e["message"] for e in view.timeline)
    slow["on"] = False
    assert provision_handler(queues.event(held), None) == {"batchItemFailures": []}
    assert live_clusters(stack, job_id) == set()


def test_reconcile_writes_each_termination_in_the_jobs_timeline(stack: Settings, queues: QueueDriver) -> None:
    job_id = start(stack, queues, SPOT)
    preempt(stack, job_id)
    deliver(queues, "provision", keep="teardown")  # the teardown is lost
    store = wiring_for(stack).store
    job = store.get(job_id)
    assert job is not None and job.state == JobState.RECOVERING
    done = reconcile(wiring=wiring_for(stack))
    assert done.get("terminated") == [f"{job_id}-0"]
    notes = [e for e in get_job(wiring_for(stack), job_id, owner=None).timeline if e["kind"] == "teardown"]
    assert len(notes) == 1 and notes[0]["message"].startswith(f"reconcile terminated cluster {job_id}-0")
    assert reconcile(wiring=wiring_for(stack)).get("terminated") is None  # once


def test_a_spot_event_replans_and_relaunches_in_the_same_invocation_after_the_fence(
    stack: Settings, queues: QueueDriver, launches_seen: list[tuple[str, set[str]]]
) -> None:
    job_id = start(stack, queues, TWO_NODE_SPOT)
    event = LocalCloud(stack.home).preempt(job_id, rank=1, notice_seconds=0.1)
    assert event is not None
    spot_watch_handler(event, None)  # the cloud's event: recover, re-plan, fence, launch, in one go
    view = get_job(wiring_for(stack), job_id, owner=None)
    assert view.state == JobState.SETTING_UP and view.attempt == 1
    assert launches_seen[-1] == (f"{job_id}-1", set())  # the survivor of attempt 0 was gone first
    assert live_clusters(stack, job_id) == {f"{job_id}-1"}
    assert queues.delayed_count("optimize") == 1  # the fallback re-plan, for a crash midway
    spot_watch_handler(event, None)  # the event again: nothing more
    deliver(queues, "provision")  # the teardown and the launch message: no-ops now
    assert get_job(wiring_for(stack), job_id, owner=None).attempt == 1
    assert live_clusters(stack, job_id) == {f"{job_id}-1"}
