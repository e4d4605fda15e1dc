"""GCP and Azure preemption entry points, called as their platforms call them, with the event shapes from
those clouds' documentation (tests/events/): a job launched on GCP (Azure) through the real handlers, against
the fake cloud and moto's server, moves to recovery when its node's preemption event arrives, once.

- GCP: functions-framework's own app for `functions/spot_watch/gcp_main.py` (target `on_preemption_event`),
  POSTed the Pub/Sub CloudEvent in binary content mode, as Eventarc delivers it.
- Azure: the user function reached through `app.get_functions()` / `get_user_function()`, given the
  `EventGridEvent` that the Functions worker's own converter builds from the Event Grid JSON.
"""

from __future__ import annotations

import base64
import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from conftest import QueueDriver

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from shared.config import Settings
from shared.events.azure_preemptions import parse_event_grid_preemption
from shared.events.gcp_preemptions import parse_preemption_log_entry, parse_pubsub_preemption
from shared.jobs.agent_reports import AgentReport, report_agent_status
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import JobView, get_job
from shared.states import JobState
from shared.wiring import wiring_for

pytest_plugins = ["fakes.fixtures"]

EVENTS = Path(__file__).resolve().parents[1] / "events"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
SPOT_TASK = "name: train\nresources:\n  infra: {cloud}\n  cpus: 2+\n  use_spot: true\nrun: python train.py\n"


def fixture_event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


def launch(settings: Settings, queues: QueueDriver, cloud: str) -> JobView:
    job_id = submit_job(
        wiring_for(settings), SubmitJob.from_text(owner="alice", task_text=SPOT_TASK.format(cloud=cloud))
    ).job_id
    assert optimize_handler(queues.event(queues.receive("optimize")), None) == {"batchItemFailures": []}
    assert provision_handler(queues.event(queues.receive("provision")), None) == {"batchItemFailures": []}
    view = get_job(wiring_for(settings), job_id, owner=None)
    assert view.state == JobState.SETTING_UP and view.cluster is not None and view.cluster["cloud"] == cloud
    for node in view.cluster["nodes"]:
        report_agent_status(wiring_for(settings), AgentReport(job_id, node["instance_id"], "running"))
    return get_job(wiring_for(settings), job_id, owner=None)


def on(stack: Settings, monkeypatch: pytest.MonkeyPatch, cloud: str) -> Settings:
    monkeypatch.setenv("SKYLESS_PROVIDERS", f"{cloud}={cloud}")
    return stack.with_(providers=f"{cloud}={cloud}")


# -- GCP -----------------------------------------------------------------------------------------


def gcp_log_entry(project: str, zone: str, instance: str) -> dict[str, Any]:
    entry = fixture_event("gcp_audit_log_instance_preempted.json")
    entry["protoPayload"]["resourceName"] = f"projects/{project}/zones/{zone}/instances/{instance}"
    entry["resource"]["labels"].update(project_id=project, zone=zone)
    entry["logName"] = f"projects/{project}/logs/cloudaudit.googleapis.com%2Fsystem_event"
    return entry


def pubsub_cloud_event(entry: dict[str, Any]) -> dict[str, Any]:
    """The documented Pub/Sub CloudEvent fixture, carrying `entry` as its message data."""
    event = fixture_event("gcp_pubsub_cloud_event_instance_preempted.json")
    event["data"]["message"]["data"] = base64.b64encode(json.dumps(entry).encode()).decode()
    return event


def post_binary_cloud_event(client: Any, event: dict[str, Any]) -> Any:
    """Eventarc's delivery: the CloudEvent attributes as ce-* headers, the data as the JSON body."""
    headers = {f"ce-{k}": str(v) for k, v in event.items() if k not in ("data", "datacontenttype")}
    headers["Content-Type"] = event["datacontenttype"]
    return client.post("/", headers=headers, data=json.dumps(event["data"]))


@pytest.fixture
def gcp_function_client() -> Any:
    import functions_framework

    app = functions_framework.create_app(
        target="on_preemption_event",
        source=str(PROJECT_ROOT / "functions" / "spot_watch" / "gcp_main.py"),
        signature_type="cloudevent",
    )
    return app.test_client()


def test_gcp_fixtures_are_the_documented_shapes_and_agree() -> None:
    entry = fixture_event("gcp_audit_log_instance_preempted.json")
    event = fixture_event("gcp_pubsub_cloud_event_instance_preempted.json")
    assert event["type"] == "google.cloud.pubsub.topic.v1.messagePublished"
    assert json.loads(base64.b64decode(event["data"]["message"]["data"])) == entry
    parsed = parse_pubsub_preemption(event["data"])
    assert parsed is not None and parsed == parse_preemption_log_entry(entry)
    assert (parsed.instance_id, parsed.kind, parsed.region) == (
        "skyless-job-0123abcd4567-0-000", "preempted", "us-central1",
    )  # fmt: skip


def test_gcp_events_about_anything_else_parse_to_nothing() -> None:
    entry = fixture_event("gcp_audit_log_instance_preempted.json")
    stopped = copy.deepcopy(entry)
    stopped["protoPayload"]["methodName"] = "v1.compute.instances.stop"
    assert parse_preemption_log_entry(stopped) is None
    assert parse_pubsub_preemption({"message": {"data": "not base64!"}}) is None
    assert parse_pubsub_preemption({"message": {"data": base64.b64encode(b"[1]").decode()}}) is None
    assert parse_pubsub_preemption(None) is None


def test_a_gcp_preemption_event_through_cloud_functions_moves_the_job_to_recovery_once(
    fake_gcp: Any, stack: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch,
    gcp_function_client: Any,
) -> None:  # fmt: skip
    settings = on(stack, monkeypatch, "gcp")
    view = launch(settings, queues, "gcp")
    assert view.cluster is not None and view.state == JobState.RUNNING
    node = view.cluster["nodes"][0]["instance_id"]
    event = pubsub_cloud_event(gcp_log_entry(fake_gcp.project, view.cluster["zone"], node))

    for _ in range(2):  # Pub/Sub delivers at least once
        answer = post_binary_cloud_event(gcp_function_client, event)
        assert answer.status_code == 200, answer.get_data(as_text=True)

    # Recovered once for both deliveries, and relaunched in the same call (as the EventBridge path does).
    recovered = get_job(wiring_for(settings), view.job_id, owner=None)
    assert recovered.recoveries == 1 and recovered.attempt == 1, recovered
    assert recovered.state == JobState.SETTING_UP and recovered.cluster is not None
    assert recovered.cluster["cluster_id"] != view.cluster["cluster_id"]
    assert any("instance preempted" in e["message"] for e in recovered.timeline)


def test_a_gcp_event_for_an_unknown_instance_changes_nothing(
    stack: Settings, queues: QueueDriver, gcp_function_client: Any
) -> None:
    event = pubsub_cloud_event(gcp_log_entry("my-project", "us-central1-a", "not-a-skyless-node"))
    assert post_binary_cloud_event(gcp_function_client, event).status_code == 200
    assert queues.receive("provision") == [] and queues.receive("optimize") == []


# -- Azure ---------------------------------------------------------------------------------------


@cache
def azure_user_function() -> Any:
    """get_functions() may run once per process (a second call raises): the function is kept."""
    from functions.spot_watch.azure_app import app

    (function,) = app.get_functions()
    assert function.get_function_name() == "skyless_preemption"
    trigger = function.get_bindings()[0]
    assert (trigger.type, trigger.name) == ("eventGridTrigger", "event")
    return function.get_user_function()


def invoke_azure(event: dict[str, Any]) -> None:
    """What the Functions worker does with an Event Grid delivery: decode the JSON with the binding's
    converter, then call the function with it."""
    import azure.functions as func
    from azure.functions.eventgrid import EventGridEventInConverter

    argument = EventGridEventInConverter.decode(
        func.meta.Datum(type="json", value=json.dumps(event)), trigger_metadata=None
    )
    azure_user_function()(argument)


def azure_event(name: str, vm_id: str) -> dict[str, Any]:
    event = fixture_event(name)
    event["subject"] = vm_id
    properties = event["data"]["resourceInfo"]["properties"]
    properties["targetResourceId"] = vm_id
    event["data"]["resourceInfo"]["id"] = f"{vm_id}/providers/Microsoft.ResourceHealth/resourceAnnotations/1"
    return event


def vm_resource_id(subscription: str, name: str) -> str:
    group = f"/subscriptions/{subscription}/resourceGroups/skyless"
    return f"{group}/providers/Microsoft.Compute/virtualMachines/{name}"


def test_azure_fixtures_are_the_documented_shapes() -> None:
    grid = parse_event_grid_preemption(fixture_event("azure_event_grid_vm_preempted.json"))
    cloud = parse_event_grid_preemption(fixture_event("azure_cloud_event_vm_preempted.json"))
    assert grid is not None and grid == cloud
    assert (grid.instance_id, grid.kind) == ("skyless-job-0123abcd4567-0-000-1a2b", "preempted")
    assert (
        parse_event_grid_preemption(fixture_event("azure_event_grid_vm_deallocation_initiated.json")) is None
    )
    other = fixture_event("azure_event_grid_vm_preempted.json")
    other["eventType"] = "Microsoft.ResourceNotifications.HealthResources.AvailabilityStatusChanged"
    assert parse_event_grid_preemption(other) is None


@pytest.mark.parametrize(
    "schema", ["azure_event_grid_vm_preempted.json", "azure_cloud_event_vm_preempted.json"]
)
def test_an_azure_preemption_event_through_azure_functions_moves_the_job_to_recovery_once(
    schema: str, fake_azure: Any, stack: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = on(stack, monkeypatch, "azure")
    view = launch(settings, queues, "azure")
    assert view.cluster is not None and view.state == JobState.RUNNING
    vm = vm_resource_id(fake_azure.subscription, view.cluster["nodes"][0]["instance_id"])

    # A user's own deallocation is another annotation: nothing happens.
    invoke_azure(azure_event("azure_event_grid_vm_deallocation_initiated.json", vm))
    assert get_job(wiring_for(settings), view.job_id, owner=None).state == JobState.RUNNING

    for _ in range(2):  # Event Grid delivers at least once
        invoke_azure(azure_event(schema, vm))

    recovered = get_job(wiring_for(settings), view.job_id, owner=None)
    assert recovered.recoveries == 1 and recovered.attempt == 1, recovered
    assert recovered.state == JobState.SETTING_UP and recovered.cluster is not None
    assert recovered.cluster["cluster_id"] != view.cluster["cluster_id"]
