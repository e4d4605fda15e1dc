"""The job lifecycle through the real handlers, on the in-memory stack (tests/memory_stack.py), local cloud.

Nodes here run a stand-in for the agent (a sleeping process) so that "nothing left running" is a fact
about processes; node reports are made through the same operation the API calls.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from conftest import QueueDriver

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.jobs.agent_reports import AgentReport, agent_config, report_agent_status
from shared.jobs.cancellation import cancel_job
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import get_job
from shared.states import JobState
from shared.wiring import wiring_for

SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])
SPOT_TASK = """
name: train
resources:
  cloud: aws
  cpus: 2+
  use_spot: true
run: python train.py
"""
TWO_NODE_TASK = """
name: ddp
num_nodes: 2
resources:
  cloud: aws
  cpus: 2+
run: torchrun train.py
"""


@pytest.fixture(autouse=True)
def sleeping_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)


def run(queues: QueueDriver, kind: str, times: int = 1, reverse: bool = False) -> list[dict[str, Any]]:
    """Deliver every waiting message of a queue `times` times (duplicates), optionally reordered."""
    handler = {"optimize": optimize_handler, "provision": provision_handler}[kind]
    records = queues.receive(kind)
    batch = [r for r in records for _ in range(times)]
    if reverse:
        batch.reverse()
    answer = handler(queues.event(batch), None)
    assert answer == {"batchItemFailures": []}
    return records


def state_of(settings: Settings, job_id: str) -> str:
    return get_job(wiring_for(settings), job_id, owner=None).state


def live_nodes(settings: Settings, job_id: str | None = None) -> list[Any]:
    nodes = LocalCloud(settings.home).list_owned()
    return [n for n in nodes if n.state == "running" and (job_id is None or n.job_id == job_id)]


def launch(settings: Settings, queues: QueueDriver, task: str = SPOT_TASK) -> str:
    job = submit_job(
        wiring_for(settings), SubmitJob.from_text(owner="alice", task_text=task, filename="task.yaml")
    )
    run(queues, "optimize")
    run(queues, "provision")
    return job.job_id


def report_all(settings: Settings, job_id: str, phase: str, exit_code: int | None = None) -> None:
    view = get_job(wiring_for(settings), job_id, owner=None)
    assert view.cluster is not None
    for node in view.cluster["nodes"]:
        instance_id = node["instance_id"]
        report_agent_status(
            wiring_for(settings), AgentReport(job_id, instance_id, phase, exit_code=exit_code)
        )


def test_every_message_delivered_twice_and_reordered_launches_once(stack: Settings, queues: QueueDriver):
    jobs = [
        submit_job(wiring_for(stack), SubmitJob.from_text(owner="alice", task_text=SPOT_TASK)).job_id
        for _ in range(3)
    ]
    run(queues, "optimize", times=2, reverse=True)
    launches = run(queues, "provision", times=2, reverse=True)
    assert len(launches) == 3  # duplicates of optimize sent no extra launch
    for job_id in jobs:
        assert state_of(stack, job_id) == JobState.SETTING_UP
        assert len(live_nodes(stack, job_id)) == 1
    # the same launch messages, late: nothing more starts
    handler_records = [dict(r, messageId=r["messageId"] + "-late") for r in launches]
    assert provision_handler(queues.event(handler_records), None) == {"batchItemFailures": []}
    assert len(live_nodes(stack)) == 3
    assert queues.receive("provision") == []


def test_late_reports_after_the_job_finished_change_nothing(stack: Settings, queues: QueueDriver):
    job_id = launch(stack, queues)
    report_all(stack, job_id, "running")
    report_all(stack, job_id, "succeeded", exit_code=0)
    before = get_job(wiring_for(stack), job_id, owner=None)
    report_all(stack, job_id, "running")
    report_all(stack, job_id, "failed", exit_code=1)
    after = get_job(wiring_for(stack), job_id, owner=None)
    assert after.state == JobState.SUCCEEDED
    assert len(after.timeline) == len(before.timeline)


def test_no_capacity_in_the_first_zones_lands_the_job_on_the_next_candidate(
    stack: Settings, queues: QueueDriver
):
    full = ["aws/us-east-1/us-east-1a", "aws/us-east-1/us-east-1b"]
    LocalCloud(stack.home).set_capacity_rules({"no_capacity": full})
    job_id = launch(stack, queues)
    view = get_job(wiring_for(stack), job_id, owner=None)
    assert view.state == JobState.SETTING_UP
    assert view.cluster is not None and view.cluster["zone"] == "us-east-1c"
    [node] = live_nodes(stack, job_id)
    assert node.zone == "us-east-1c"


def test_quota_blocks_the_region_and_auth_blocks_the_cloud(stack: Settings, queues: QueueDriver):
    LocalCloud(stack.home).set_capacity_rules({"quota": ["aws/us-east-1"], "auth": ["aws/us-east-2"]})
    task = SPOT_TASK.replace("cloud: aws", "infra: aws")
    job_id = launch(stack, queues, task)
    view = get_job(wiring_for(stack), job_id, owner=None)
    assert view.state == JobState.WAITING  # only aws allowed: quota in us-east-1, then aws refused
    job = wiring_for(stack).store.get(job_id)
    assert job is not None
    blocks = json.loads(job.blocklist)
    # cpus: 2+ with no memory is 4 GiB per vCPU (SkyPilot): m6i.large, not c6i.large
    assert {"cloud": "aws", "region": "us-east-1", "instance_family": "m6i"}.items() <= blocks[0].items()
    assert any(b.get("region") is None and b["reason"].startswith("auth") for b in blocks)
    assert live_nodes(stack, job_id) == []


def test_with_no_capacity_anywhere_the_job_waits_with_a_delayed_message_then_fails_no_resource(
    stack: Settings, queues: QueueDriver
):
    LocalCloud(stack.home).set_capacity_rules({"no_capacity": ["*"]})
    job_id = launch(stack, queues, SPOT_TASK.replace("use_spot: true", "use_spot: false"))  # spot waits on
    assert state_of(stack, job_id) == JobState.WAITING
    assert queues.delayed_count("provision") == 1
    store = wiring_for(stack).store
    for _ in range(stack.max_wait_retries):
        job = store.get(job_id)
        assert job is not None and job.state == JobState.WAITING
        provision_handler(queues.event([_launch_record(job_id, int(job.attempt))]), None)
    job = store.get(job_id)
    assert job is not None and job.state == JobState.FAILED_NO_RESOURCE  # SkyPilot's state for it
    assert job.reason is not None and job.reason.startswith("no capacity anywhere")
    assert live_nodes(stack) == []


def _launch_record(job_id: str, attempt: int) -> dict[str, Any]:
    body = json.dumps({"job_id": job_id, "attempt": attempt, "action": "launch"})
    return {"messageId": f"delayed-{job_id}", "body": body}


def test_cancel_before_the_launch_message_arrives_launches_nothing(stack: Settings, queues: QueueDriver):
    job = submit_job(wiring_for(stack), SubmitJob.from_text(owner="alice", task_text=SPOT_TASK))
    run(queues, "optimize")
    cancel_job(wiring_for(stack), job.job_id, owner="alice")
    run(queues, "provision")  # the launch, then the teardown
    run(queues, "provision")
    assert state_of(stack, job.job_id) == JobState.CANCELLED
    assert live_nodes(stack) == []


def test_a_launch_that_completes_after_a_cancel_terminates_what_it_launched(
    stack: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
):
    job = submit_job(wiring_for(stack), SubmitJob.from_text(owner="alice", task_text=SPOT_TASK))
    run(queues, "optimize")
    real_launch = LocalCloud.launch

    def launch_then_cancelled(self: LocalCloud, spec: Any) -> Any:
        nodes = real_launch(self, spec)
        cancel_job(wiring_for(stack), job.job_id, owner="alice")  # the user cancels while the VMs boot
        return nodes

    monkeypatch.setattr(LocalCloud, "launch", launch_then_cancelled)
    run(queues, "provision")
    assert state_of(stack, job.job_id) == JobState.CANCELLED
    assert live_nodes(stack) == []


def test_cancel_during_run_leaves_nothing_running(stack: Settings, queues: QueueDriver):
    job_id = launch(stack, queues, TWO_NODE_TASK)
    report_all(stack, job_id, "running")
    assert len(live_nodes(stack, job_id)) == 2
    cancel_job(wiring_for(stack), job_id, owner="alice")
    cancel_job(wiring_for(stack), job_id, owner="alice")  # twice is fine
    run(queues, "provision")
    assert state_of(stack, job_id) == JobState.CANCELLED
    assert live_nodes(stack) == []
    view = get_job(wiring_for(stack), job_id, owner=None)
    assert view.cluster is not None
    instance_id = view.cluster["nodes"][0]["instance_id"]
    answer = report_agent_status(wiring_for(stack), AgentReport(job_id, instance_id, "heartbeat"))
    assert answer.cancel is True


def test_a_two_node_task_gets_ranks_0_and_1_and_both_ips(stack: Settings, queues: QueueDriver):
    job_id = launch(stack, queues, TWO_NODE_TASK)
    view = get_job(wiring_for(stack), job_id, owner=None)
    assert view.cluster is not None
    configs = [agent_config(wiring_for(stack), job_id, n["instance_id"]) for n in view.cluster["nodes"]]
    assert [c.rank for c in configs if c] == [0, 1]
    ips = [n.ip for n in sorted(live_nodes(stack, job_id), key=lambda n: n.instance_id)]
    assert len(set(ips)) == 2
    assert all(c is not None and c.node_ips == ips and c.num_nodes == 2 for c in configs)
    prefixes = [c.log_upload["key_prefix"] for c in configs if c]
    assert [p.startswith(f"runs/{job_id}/logs/{rank}/") for rank, p in enumerate(prefixes)] == [True, True]


def test_a_failed_node_fails_the_job_and_tears_the_cluster_down(stack: Settings, queues: QueueDriver):
    job_id = launch(stack, queues, TWO_NODE_TASK)
    report_all(stack, job_id, "running")
    node = get_job(wiring_for(stack), job_id, owner=None).cluster["nodes"][1]  # type: ignore[index]
    report_agent_status(wiring_for(stack), AgentReport(job_id, node["instance_id"], "failed", exit_code=3))
    job = get_job(wiring_for(stack), job_id, owner=None)
    assert job.state == JobState.FAILED and job.reason == "node rank 1 failed with exit code 3"
    run(queues, "provision")
    assert live_nodes(stack) == []


def test_max_restarts_on_errors_relaunches_the_job(stack: Settings, queues: QueueDriver):
    recovery = "use_spot: true\n  job_recovery:\n    max_restarts_on_errors: 1"
    task = SPOT_TASK.replace("use_spot: true", recovery)
    job_id = launch(stack, queues, task)
    report_all(stack, job_id, "failed", exit_code=1)
    assert state_of(stack, job_id) == JobState.RECOVERING
    run(queues, "provision")  # teardown of attempt 0
    run(queues, "optimize")
    run(queues, "provision")
    view = get_job(wiring_for(stack), job_id, owner=None)
    assert view.state == JobState.SETTING_UP and view.attempt == 1
    assert view.region == "us-east-1"  # an error in the task is no reason to leave the region
    report_all(stack, job_id, "failed", exit_code=1)
    assert state_of(stack, job_id) == JobState.FAILED


def test_a_failed_setup_ends_failed_setup_and_tears_the_cluster_down(stack: Settings, queues: QueueDriver):
    job_id = launch(stack, queues, TWO_NODE_TASK)
    node = get_job(wiring_for(stack), job_id, owner=None).cluster["nodes"][1]  # type: ignore[index]
    report = AgentReport(
        job_id, node["instance_id"], "setup_failed", exit_code=3, message="setup exited with 3"
    )
    report_agent_status(wiring_for(stack), report)
    report_agent_status(wiring_for(stack), report)  # delivered twice: nothing more happens
    job = get_job(wiring_for(stack), job_id, owner=None)
    assert job.state == JobState.FAILED_SETUP
    assert job.reason == "node rank 1 failed with exit code 3: setup exited with 3"
    run(queues, "provision")
    assert live_nodes(stack) == []


def test_a_setup_failure_uses_max_restarts_on_errors_as_a_run_failure_does_then_ends_failed_setup(
    stack: Settings, queues: QueueDriver
):
    """SkyPilot's managed jobs count FAILED_SETUP among the user code failures (sky/jobs/controller.py):
    restarted while max_restarts_on_errors lasts, FAILED_SETUP after."""
    recovery = "use_spot: true\n  job_recovery:\n    max_restarts_on_errors: 1"
    job_id = launch(stack, queues, SPOT_TASK.replace("use_spot: true", recovery))
    report_all(stack, job_id, "setup_failed", exit_code=2)
    assert state_of(stack, job_id) == JobState.RECOVERING
    run(queues, "provision")
    run(queues, "optimize")
    run(queues, "provision")
    assert get_job(wiring_for(stack), job_id, owner=None).attempt == 1
    report_all(stack, job_id, "setup_failed", exit_code=2)
    assert state_of(stack, job_id) == JobState.FAILED_SETUP


def test_a_late_report_of_an_earlier_phase_does_not_undo_a_nodes_success(
    stack: Settings, queues: QueueDriver
) -> None:
    job_id = launch(stack, queues, TWO_NODE_TASK)
    report_all(stack, job_id, "running")
    first, second = get_job(wiring_for(stack), job_id, owner=None).cluster["nodes"]  # type: ignore[index]
    report_agent_status(
        wiring_for(stack), AgentReport(job_id, first["instance_id"], "succeeded", exit_code=0)
    )
    report_agent_status(wiring_for(stack), AgentReport(job_id, first["instance_id"], "running"))  # late
    report_agent_status(
        wiring_for(stack), AgentReport(job_id, second["instance_id"], "succeeded", exit_code=0)
    )
    assert state_of(stack, job_id) == JobState.SUCCEEDED


def test_two_nodes_reporting_success_at_once_both_count(
    stack: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each report reads the cluster before the other writes: the job must still end SUCCEEDED."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from shared.store.jobs import DynamoJobStore as JobStore

    job_id = launch(stack, queues, TWO_NODE_TASK)
    report_all(stack, job_id, "running")
    assert state_of(stack, job_id) == JobState.RUNNING
    nodes = [n["instance_id"] for n in get_job(wiring_for(stack), job_id, owner=None).cluster["nodes"]]  # type: ignore[index]

    both_read = threading.Barrier(2, timeout=10)
    first_read_in = threading.local()
    real_cluster = JobStore.cluster

    def cluster_read_in_lockstep(self: JobStore, cluster_id: str | None) -> Any:
        found = real_cluster(self, cluster_id)
        if not getattr(first_read_in, "done", False):
            first_read_in.done = True
            both_read.wait()  # neither report writes until both have read the old phases
        return found

    monkeypatch.setattr(JobStore, "cluster", cluster_read_in_lockstep)

    def succeed(instance_id: str) -> None:
        report_agent_status(wiring_for(stack), AgentReport(job_id, instance_id, "succeeded", exit_code=0))

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(succeed, nodes))
    monkeypatch.setattr(JobStore, "cluster", real_cluster)
    assert state_of(stack, job_id) == JobState.SUCCEEDED
