"""The cluster agent protocol and the control plane's sweeps, with the test playing the agent (the nodes are
stand-in processes): duplicated, late and reordered reports; a lost node; a lost message; autostop checks
chained past SQS's 900 s delay limit."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import QueueDriver

from functions.provision.handler import handler as provision_handler
from functions.reconcile.handler import handler as reconcile_handler
from shared.clouds.local import LocalCloud
from shared.clusters import operations
from shared.clusters.agents import poll_cluster, report_cluster_job
from shared.clusters.messages import ClusterMessage
from shared.clusters.provisioning import cluster_step
from shared.config import Settings
from shared.store.cluster_records import ClusterStore
from shared.wiring import wiring_for

SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])
EVENTS = Path(__file__).resolve().parents[1] / "events"
TASK = "name: dev\nresources:\n  cloud: aws\n  cpus: 2+\nsetup: echo s\nrun: echo r\n"
OWNER = "alice"


@pytest.fixture(autouse=True)
def sleeping_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)


def deliver(queues: QueueDriver) -> list[dict[str, Any]]:
    records = queues.receive("provision")
    assert provision_handler(queues.event(records), None) == {"batchItemFailures": []}
    return [json.loads(r["body"]) for r in records]


def up(settings: Settings, queues: QueueDriver, **options: Any) -> Any:
    operations.launch_on_cluster(settings, owner=OWNER, name="dev", task_text=TASK, **options)
    deliver(queues)
    cluster = ClusterStore(settings).by_name(OWNER, "dev")
    assert cluster.state == "UP"
    return cluster


def node_of(cluster: Any) -> str:
    return next(iter(cluster.nodes.as_dict()))


def test_the_agent_gets_each_job_once_and_duplicated_or_late_reports_change_nothing(
    stack: Settings, queues: QueueDriver
) -> None:
    cluster = up(stack, queues)
    node = node_of(cluster)
    first = poll_cluster(stack, cluster.key, instance_id=node, have=[], running=[], sessions=0)
    assert [c["job"] for c in first.start] == [1] and first.start[0]["setup"] == "echo s"
    assert first.start[0]["run_env"]["SKYPILOT_TASK_ID"].endswith("_dev_1")
    again = poll_cluster(stack, cluster.key, instance_id=node, have=[1], running=[1], sessions=0)
    assert again.start == [] and again.cancel == []
    report = lambda phase, code=None: report_cluster_job(  # noqa: E731
        stack, cluster.key, 1, instance_id=node, phase=phase, exit_code=code
    )
    assert report("setting_up").state == "SETTING_UP"
    assert report("running").state == "RUNNING"
    assert report("running").state == "RUNNING"  # a duplicate
    assert report("succeeded", 0).state == "SUCCEEDED"
    assert report("succeeded", 0).cancel is False  # a duplicate after the end
    assert report("setting_up").state == "SUCCEEDED"  # late: nothing moves back
    assert ClusterStore(stack).get(cluster.key).active.as_dict() == {}
    cancelled = operations.exec_on_cluster(stack, owner=OWNER, name="dev", command="sleep 100")
    operations.cancel_cluster_jobs(stack, owner=OWNER, name="dev", numbers=[cancelled.number])
    late = report_cluster_job(stack, cluster.key, cancelled.number, instance_id=node, phase="running")
    assert (late.state, late.cancel) == ("CANCELLED", True)
    stale = poll_cluster(stack, cluster.key, instance_id=node, have=[1, 2], running=[2], sessions=0)
    assert stale.cancel == [2]  # an agent still running it is told to stop


def test_a_node_the_cloud_lost_fails_its_jobs_and_the_cluster_goes(
    stack: Settings, queues: QueueDriver
) -> None:
    cluster = up(stack, queues)
    node = node_of(cluster)
    poll_cluster(stack, cluster.key, instance_id=node, have=[], running=[], sessions=0)
    report_cluster_job(stack, cluster.key, 1, instance_id=node, phase="running")
    LocalCloud(stack.home).terminate(cluster.provider_cluster)  # deleted behind skyless's back
    answer = reconcile_handler(json.loads((EVENTS / "scheduled_event.json").read_text()), None)
    assert answer["clusters"] == {"lost": ["dev"]}
    job = ClusterStore(stack).job(cluster.key, 1)
    assert job.state == "FAILED" and "lost a node" in job.reason
    assert [b["action"] for b in deliver(queues)] == ["down"]
    assert ClusterStore(stack).by_name(OWNER, "dev") is None


def test_a_lost_launch_message_is_sent_again_by_the_sweep(stack: Settings, queues: QueueDriver) -> None:
    operations.launch_on_cluster(stack, owner=OWNER, name="dev", task_text=TASK)
    queues.receive("provision")  # lost
    later = time.time() + stack.stuck_after_seconds + 1
    from shared.clusters.health import sweep_clusters

    assert sweep_clusters(wiring_for(stack), now=later) == {"redriven": ["dev"]}
    assert [b["action"] for b in deliver(queues)] == ["launch"]
    assert ClusterStore(stack).by_name(OWNER, "dev").state == "UP"


def test_an_autostop_longer_than_sqs_delays_is_a_chain_of_checks(
    stack: Settings, queues: QueueDriver
) -> None:
    cluster = up(stack, queues, idle_minutes=20)  # 1200 s at real minutes
    node = node_of(cluster)
    poll_cluster(stack, cluster.key, instance_id=node, have=[], running=[], sessions=0)
    report_cluster_job(stack, cluster.key, 1, instance_id=node, phase="running")
    report_cluster_job(stack, cluster.key, 1, instance_id=node, phase="succeeded", exit_code=0)
    idle = ClusterStore(stack).get(cluster.key)
    assert idle.idle_since is not None
    assert queues.delayed_count("provision") == 1  # the first check, 900 s away (SQS's most)
    # The check arrives (as if 900 s had passed): 300 s are left, so it sends the next link and waits.
    early = ClusterMessage(cluster=cluster.key, action="autostop", idle_since=float(idle.idle_since))
    assert cluster_step(early.as_body(), wiring_for(stack)) == "retry_later"
    assert queues.delayed_count("provision") == 2
    assert ClusterStore(stack).get(cluster.key).state == "UP"
    # A check of an idle period that is over (a job ran since) is stale, whenever it comes.
    operations.exec_on_cluster(stack, owner=OWNER, name="dev", command="true")
    assert cluster_step(early.as_body(), wiring_for(stack)) == "stale"


def test_autostop_zero_stops_at_once_when_idle_and_duplicated_checks_stop_once(
    stack: Settings, queues: QueueDriver
) -> None:
    cluster = up(stack, queues)
    node = node_of(cluster)
    poll_cluster(stack, cluster.key, instance_id=node, have=[], running=[], sessions=0)
    report_cluster_job(stack, cluster.key, 1, instance_id=node, phase="running")
    report_cluster_job(stack, cluster.key, 1, instance_id=node, phase="succeeded", exit_code=0)
    operations.set_autostop(stack, owner=OWNER, name="dev", idle_minutes=0)
    records = queues.receive("provision")
    assert [json.loads(r["body"])["action"] for r in records] == ["autostop"]
    assert provision_handler(queues.event(records + records), None) == {"batchItemFailures": []}
    assert [b["action"] for b in deliver(queues)] == ["stop"]  # one stop, not two
    assert ClusterStore(stack).get(cluster.key).state == "STOPPED"


def test_a_job_queued_while_provisioning_that_cannot_fit_fails_instead_of_blocking_the_queue(
    stack: Settings, queues: QueueDriver
) -> None:
    operations.launch_on_cluster(stack, owner=OWNER, name="dev", task_text=TASK)  # INIT: not launched yet
    gpu = "resources:\n  accelerators: A100:8\nrun: nvidia-smi\n"
    operations.launch_on_cluster(stack, owner=OWNER, name="dev", task_text=gpu)  # queued behind it
    operations.launch_on_cluster(stack, owner=OWNER, name="dev", task_text=TASK, fast=True)
    deliver(queues)
    store = ClusterStore(stack)
    cluster = store.by_name(OWNER, "dev")
    assert store.job(cluster.key, 2).state == "FAILED"
    assert "does not fit the cluster" in store.job(cluster.key, 2).reason
    node = node_of(cluster)
    poll_cluster(stack, cluster.key, instance_id=node, have=[], running=[], sessions=0)
    report_cluster_job(stack, cluster.key, 1, instance_id=node, phase="succeeded", exit_code=0)
    assert store.job(cluster.key, 3).state == "RUNNING"  # the queue went on past it


def test_stopping_a_cluster_cancels_what_it_was_running_or_had_queued(
    stack: Settings, queues: QueueDriver
) -> None:
    cluster = up(stack, queues)
    operations.exec_on_cluster(stack, owner=OWNER, name="dev", command="sleep 100")
    operations.stop_cluster(stack, owner=OWNER, name="dev")
    assert [b["action"] for b in deliver(queues)] == ["stop"]
    store = ClusterStore(stack)
    assert [store.job(cluster.key, n).state for n in (1, 2)] == ["CANCELLED", "CANCELLED"]
    assert store.get(cluster.key).active.as_dict() == {}


def test_the_reaper_leaves_nodes_launched_but_not_yet_recorded_and_a_lost_down_is_sent_again(
    stack: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shared.clusters.health import sweep_clusters
    from shared.jobs.reaper import reap_orphans

    operations.launch_on_cluster(stack, owner=OWNER, name="dev", task_text=TASK)
    key = ClusterStore(stack).by_name(OWNER, "dev").key
    records = queues.receive("provision")

    def crash(*args: Any, **kwargs: Any) -> bool:
        raise RuntimeError("the function died after starting the nodes, before recording them")

    with monkeypatch.context() as patched:
        patched.setattr(ClusterStore, "write_cluster", crash)
        assert provision_handler(queues.event(records), None)["batchItemFailures"]
    assert ClusterStore(stack).get(key).state == "INIT"
    swept = reap_orphans(wiring_for(stack), grace_seconds=0)
    assert swept.killed == [] and f"{key}-0" in swept.owned
    assert provision_handler(queues.event(records), None) == {"batchItemFailures": []}  # SQS redelivers
    assert ClusterStore(stack).get(key).state == "UP"
    assert len(LocalCloud(stack.home).describe(f"{key}-0")) == 1  # the same node, not a second one

    operations.down_cluster(stack, owner=OWNER, name="dev")
    queues.receive("provision")  # the down message is lost
    assert f"{key}-0" in reap_orphans(wiring_for(stack), grace_seconds=0).owned  # TERMINATING still holds it
    later = time.time() + stack.stuck_after_seconds + 1
    assert sweep_clusters(wiring_for(stack), now=later) == {"redriven": ["dev"]}
    assert [b["action"] for b in deliver(queues)] == ["down"]
    assert [n for n in LocalCloud(stack.home).list_owned() if n.state == "running"] == []
