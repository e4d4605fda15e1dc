"""spot_watch and reconcile handlers with real event shapes (tests/events/*.json), against moto's server."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import pytest
from conftest import QueueDriver

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from functions.reconcile.handler import handler as reconcile_handler
from functions.spot_watch.handler import handler as spot_watch_handler
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.events.instances import parse_instance_event
from shared.jobs.agent_reports import AgentReport, report_agent_status
from shared.jobs.cancellation import cancel_job
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import get_job
from shared.states import JobState
from shared.wiring import wiring_for

EVENTS = Path(__file__).resolve().parents[1] / "events"
SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])
TASK = """
name: train
resources:
  cloud: aws
  cpus: 2+
  use_spot: {spot}
  job_recovery: {strategy}
run: python train.py
"""


def fixture_event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


@pytest.fixture(autouse=True)
def sleeping_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)


def deliver(queues: QueueDriver, kind: str) -> dict[str, Any]:
    handler = {"optimize": optimize_handler, "provision": provision_handler, "spot_watch": spot_watch_handler}
    return handler[kind](queues.event(queues.receive(kind)), None)


def launch(
    settings: Settings, queues: QueueDriver, spot: bool = True, strategy: str = "EAGER_NEXT_REGION"
) -> str:
    task = TASK.format(spot="true" if spot else "false", strategy=strategy)
    job_id = submit_job(wiring_for(settings), SubmitJob.from_text(owner="alice", task_text=task)).job_id
    deliver(queues, "optimize")
    deliver(queues, "provision")
    view = get_job(wiring_for(settings), job_id, owner=None)
    assert view.state == JobState.SETTING_UP and view.cluster is not None
    for node in view.cluster["nodes"]:
        report_agent_status(wiring_for(settings), AgentReport(job_id, node["instance_id"], "running"))
    return job_id


def live_nodes(settings: Settings, job_id: str) -> list[Any]:
    return [n for n in LocalCloud(settings.home).list_owned() if n.job_id == job_id and n.state == "running"]


def test_fixture_events_parse_to_what_they_say() -> None:
    warning = parse_instance_event(fixture_event("ec2_spot_interruption_warning.json"))
    assert warning is not None
    assert (warning.instance_id, warning.kind) == ("i-0b662ef9931388ba0", "spot-warning")
    gone = parse_instance_event(fixture_event("ec2_instance_state_change_terminated.json"))
    assert gone is not None and gone.kind == "terminated"
    local = parse_instance_event(json.dumps(fixture_event("skyless_local_preemption.json")))
    assert local is not None and local.source == "skyless.local"
    assert parse_instance_event(fixture_event("ec2_instance_state_change_running.json")) is None
    assert parse_instance_event(fixture_event("scheduled_event.json")) is None
    assert parse_instance_event("not json") is None


def test_spot_watch_ignores_unknown_instances_and_drops_the_malformed_message(
    stack: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    batch = fixture_event("sqs_batch_of_spot_warning.json")
    bad = dict(batch["Records"][0], messageId="bad-1", body="[1, 2")
    answer = spot_watch_handler({"Records": [*batch["Records"], bad]}, None)
    assert answer == {"batchItemFailures": []}  # never retried: it could never succeed
    (line,) = [r for r in caplog.records if "malformed_message_dropped" in r.getMessage()]
    assert json.loads(line.getMessage())["message_id"] == "bad-1" and line.exc_info is None


def test_a_preemption_through_eventbridge_recovers_the_job_in_another_region(
    stack: Settings, queues: QueueDriver
) -> None:
    job_id = launch(stack, queues)
    first = get_job(wiring_for(stack), job_id, owner=None)
    event = LocalCloud(stack.home).preempt(job_id)
    assert event is not None and live_nodes(stack, job_id) == []
    detail = json.dumps(event["detail"])
    entry = {"Source": event["source"], "DetailType": event["detail-type"], "Detail": detail}
    boto3.client("events", endpoint_url=stack.endpoint_url).put_events(Entries=[entry])
    records = queues.receive("spot_watch", wait_seconds=2)
    assert len(records) == 1
    assert spot_watch_handler(queues.event(records + records), None) == {"batchItemFailures": []}  # twice
    # recovered, re-planned and relaunched in that one invocation (the queued steps are fallbacks)
    second = get_job(wiring_for(stack), job_id, owner=None)
    assert second.state == JobState.SETTING_UP and second.attempt == 1 and second.recoveries == 1
    assert [e["state"] for e in second.timeline if e["kind"] == "state"][-3:] == [
        "RECOVERING", "PLANNED", "SETTING_UP",
    ]  # fmt: skip
    deliver(queues, "provision")  # the teardown of the old cluster and the launch message: no-ops now
    assert get_job(wiring_for(stack), job_id, owner=None).attempt == 1
    assert (second.cloud, second.region) != (first.cloud, first.region)
    assert len(live_nodes(stack, job_id)) == 1
    # the old VM's late "terminated" event is about a cluster the job has left: nothing changes
    late = fixture_event("ec2_instance_state_change_terminated.json")
    late["detail"]["instance-id"] = first.cluster["nodes"][0]["instance_id"]  # type: ignore[index]
    spot_watch_handler(late, None)
    assert get_job(wiring_for(stack), job_id, owner=None).state == JobState.SETTING_UP


def test_a_preemption_relaunched_in_the_same_call_leaves_provision_nothing_to_launch_beside_it(
    stack: Settings, queues: QueueDriver
) -> None:
    """The plan's launch message waits as a fallback: sent at once, provision (polled by another thread, or
    another Lambda) launched the same attempt beside the spot_watch call, a third launch and record per
    preemption. The old cluster's teardown is asked for once the replacement's launch is recorded."""
    job_id = launch(stack, queues)
    event = LocalCloud(stack.home).preempt(job_id)
    assert event is not None
    detail = json.dumps(event["detail"])
    entry = {"Source": event["source"], "DetailType": event["detail-type"], "Detail": detail}
    boto3.client("events", endpoint_url=stack.endpoint_url).put_events(Entries=[entry])
    assert spot_watch_handler(queues.event(queues.receive("spot_watch", wait_seconds=2)), None) == {
        "batchItemFailures": []
    }
    relaunched = get_job(wiring_for(stack), job_id, owner=None)
    assert relaunched.state == JobState.SETTING_UP and relaunched.cluster is not None
    visible = queues.receive("provision")
    assert [json.loads(r["body"])["action"] for r in visible] == ["teardown"]  # no launch to race
    assert queues.delayed_count("provision") == 1 and queues.delayed_count("optimize") == 1  # the fallbacks
    record = wiring_for(stack).store.cluster(relaunched.cluster["cluster_id"])
    assert record is not None
    assert int(visible[0]["attributes"]["SentTimestamp"]) / 1000 >= float(record.launched_at) - 0.001


def test_a_preemption_relaunched_in_the_same_call_reads_the_cooldown_record_once(
    stack: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan orders spot places by the cooling ones and the spot gate reads refused launches: both from
    one GetItem of the record in the spot_watch call that re-plans and relaunches."""
    from shared.store.cooldowns import CooldownStore

    job_id = launch(stack, queues)
    reads: list[float] = []
    original = CooldownStore.record

    def counted(self: CooldownStore) -> dict[str, list[str]]:
        reads.append(time.time())
        return original(self)

    monkeypatch.setattr(CooldownStore, "record", counted)
    event = LocalCloud(stack.home).preempt(job_id)
    assert event is not None
    assert spot_watch_handler(event, None) == {"outcome": "done"}  # EventBridge's event, as Lambda gets it
    assert len(reads) == 1
    relaunched = get_job(wiring_for(stack), job_id, owner=None)
    assert relaunched.state == JobState.SETTING_UP and relaunched.attempt == 1
    assert wiring_for(stack).cooldowns.preemptions()  # counted, in the record every later call reads


def test_failover_strategy_tries_the_same_region_again_first(stack: Settings, queues: QueueDriver) -> None:
    job_id = launch(stack, queues, strategy="FAILOVER")
    first = get_job(wiring_for(stack), job_id, owner=None)
    event = LocalCloud(stack.home).preempt(job_id)
    assert event is not None
    spot_watch_handler(event, None)
    deliver(queues, "provision")
    deliver(queues, "optimize")
    deliver(queues, "provision")
    second = get_job(wiring_for(stack), job_id, owner=None)
    assert second.state == JobState.SETTING_UP and second.region == first.region


def test_an_on_demand_vm_that_dies_is_recovered_too(stack: Settings, queues: QueueDriver) -> None:
    job_id = launch(stack, queues, spot=False)
    node = get_job(wiring_for(stack), job_id, owner=None).cluster["nodes"][0]  # type: ignore[index]
    event = fixture_event("ec2_instance_state_change_terminated.json")
    event["detail"]["instance-id"] = node["instance_id"]
    spot_watch_handler(event, None)
    view = get_job(wiring_for(stack), job_id, owner=None)
    assert view.attempt == 1 and "RECOVERING" in [e["state"] for e in view.timeline]


def test_reconcile_recovers_a_spot_job_whose_node_went_silent(
    stack: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = launch(stack, queues)
    monkeypatch.setenv("SKYLESS_SILENT_AFTER_SECONDS", "1")
    time.sleep(1.5)
    answer = reconcile_handler(fixture_event("scheduled_event.json"), None)
    assert answer["actions"]["recovered"] == [job_id]
    view = get_job(wiring_for(stack), job_id, owner=None)
    assert view.state == JobState.RECOVERING
    assert "silent since" in view.timeline[-1]["message"]


def test_reconcile_fails_an_on_demand_job_whose_node_went_silent_and_tears_it_down(
    stack: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = launch(stack, queues, spot=False)
    heartbeat_node = get_job(wiring_for(stack), job_id, owner=None).cluster["nodes"][0]  # type: ignore[index]
    monkeypatch.setenv("SKYLESS_SILENT_AFTER_SECONDS", "1")
    # The API and reconcile share the silence limit (a heartbeat younger than a third of it is not rewritten).
    api_settings = replace(stack, silent_after_seconds=1)
    report_agent_status(
        wiring_for(api_settings), AgentReport(job_id, heartbeat_node["instance_id"], "heartbeat")
    )
    heard_just_now = reconcile_handler(fixture_event("scheduled_event.json"), None)
    assert heard_just_now["actions"] == {}
    time.sleep(1.5)
    reconcile_handler(fixture_event("scheduled_event.json"), None)
    view = get_job(wiring_for(stack), job_id, owner=None)
    assert view.state == JobState.FAILED and view.reason is not None and "silent since" in view.reason
    deliver(queues, "provision")
    assert live_nodes(stack, job_id) == []


def test_reconcile_terminates_nodes_whose_job_is_over_when_the_teardown_was_lost(
    stack: Settings, queues: QueueDriver
) -> None:
    job_id = launch(stack, queues)
    cancel_job(wiring_for(stack), job_id, owner="alice")
    assert queues.receive("provision")  # the teardown message is lost
    assert len(live_nodes(stack, job_id)) == 1
    answer = reconcile_handler(fixture_event("scheduled_event.json"), None)
    assert answer["actions"]["terminated"] == [f"{job_id}-0"]
    assert live_nodes(stack, job_id) == []
    assert get_job(wiring_for(stack), job_id, owner=None).cluster["state"] == "TERMINATED"  # type: ignore[index]


def test_reconcile_redrives_a_planned_job_whose_launch_message_was_lost(
    stack: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = TASK.format(spot="true", strategy="FAILOVER")
    job_id = submit_job(wiring_for(stack), SubmitJob.from_text(owner="alice", task_text=task)).job_id
    deliver(queues, "optimize")
    assert queues.receive("provision")  # lost
    monkeypatch.setenv("SKYLESS_STUCK_AFTER_SECONDS", "0")
    assert reconcile_handler(fixture_event("scheduled_event.json"), None)["actions"]["redriven"] == [job_id]
    deliver(queues, "provision")
    assert get_job(wiring_for(stack), job_id, owner=None).state == JobState.SETTING_UP


def test_reconcile_gives_a_node_that_never_reported_the_boot_grace_before_calling_it_lost(
    stack: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = submit_job(
        wiring_for(stack),
        SubmitJob.from_text(owner="alice", task_text=TASK.format(spot="true", strategy="FAILOVER")),
    ).job_id
    deliver(queues, "optimize")
    deliver(queues, "provision")
    monkeypatch.setenv("SKYLESS_SILENT_AFTER_SECONDS", "0")
    time.sleep(0.2)
    assert reconcile_handler(fixture_event("scheduled_event.json"), None)["actions"] == {}
    monkeypatch.setenv("SKYLESS_BOOT_GRACE_SECONDS", "0")
    assert reconcile_handler(fixture_event("scheduled_event.json"), None)["actions"]["recovered"] == [job_id]


def test_reconcile_recovers_a_job_whose_vm_vanished_without_any_event(
    stack: Settings, queues: QueueDriver
) -> None:
    job_id = launch(stack, queues, spot=False)
    cloud = LocalCloud(stack.home)
    [node] = live_nodes(stack, job_id)
    record = json.loads((cloud.nodes_dir / node.cluster_id / "0" / "node.json").read_text())
    os.killpg(record["pid"], signal.SIGKILL)  # the VM dies; no event reaches us
    deadline = time.monotonic() + 5
    while live_nodes(stack, job_id) and time.monotonic() < deadline:
        time.sleep(0.05)
    answer = reconcile_handler(fixture_event("scheduled_event.json"), None)
    assert answer["actions"]["recovered"] == [job_id]
    view = get_job(wiring_for(stack), job_id, owner=None)
    assert view.state == JobState.RECOVERING and "is gone" in view.timeline[-1]["message"]
