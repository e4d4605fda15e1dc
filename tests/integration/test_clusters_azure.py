"""Named clusters on Azure, against a local server speaking ARM over HTTP: stop deallocates the VMs (the OS
disk kept, the compute no longer billed) and start starts the same VMs; power states are read from the VM
list's instance views (`statusOnly=true`); the reaper leaves a stopped cluster alone and takes a deallocated
VM no record claims; spot clusters refuse to stop as SkyPilot says."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from conftest import QueueDriver
from fakes.azure import VM_KIND, FakeAzure
from fakes.launch_specs import launch_spec

from functions.provision.handler import handler as provision_handler
from shared.clouds.azure import AzureCompute
from shared.clouds.errors import TransientCloudError
from shared.clusters import operations
from shared.config import Settings
from shared.errors import UserError
from shared.jobs.reaper import reap_orphans
from shared.store.cluster_records import ClusterStore
from shared.wiring import wiring_for

pytest_plugins = ["fakes.fixtures"]

TASK = """
name: box
resources:
  cloud: azure
  region: eastus
  cpus: 2+
run: echo hi
"""
OWNER = "u-ada"


@pytest.fixture
def azure_stack(
    fake_azure: FakeAzure, stack: Settings, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Settings]:
    settings = stack.with_(providers="azure=azure")
    monkeypatch.setenv("SKYLESS_PROVIDERS", settings.providers)
    yield settings


def deliver(queues: QueueDriver) -> list[str]:
    records = queues.receive("provision")
    assert provision_handler(queues.event(records), None) == {"batchItemFailures": []}
    return [json.loads(r["body"])["action"] for r in records]


def vm_count(fake: FakeAzure) -> int:
    with fake.lock:
        return sum(1 for r in fake.resources.values() if r["type"] == VM_KIND)


def test_the_provider_deallocates_and_starts_the_same_vms_and_both_are_idempotent(
    fake_azure: FakeAzure,
) -> None:
    provider = AzureCompute.from_env()
    spec = launch_spec("azure", "eastus", num_nodes=2, instance_type="Standard_D2s_v5")
    nodes = provider.launch(spec)

    provider.stop(spec.cluster_id)
    provider.stop(spec.cluster_id)  # twice: the second finds nothing running
    assert {n.state for n in provider.describe(spec.cluster_id)} == {"stopped"}
    assert fake_azure.live()["disks"] == sorted(f"{n.instance_id}_OsDisk" for n in nodes)  # disks kept

    started = provider.start(spec.cluster_id, {})
    assert [n.instance_id for n in started] == [n.instance_id for n in nodes]  # the same VMs, rank order
    assert [n.ip for n in started] == [n.ip for n in nodes]
    assert {n.state for n in provider.describe(spec.cluster_id)} == {"running"}
    assert [n.instance_id for n in provider.start(spec.cluster_id, {})] == [n.instance_id for n in nodes]
    assert vm_count(fake_azure) == 2 and len(fake_azure.vm_creates) == 2  # no VM made anew
    assert sorted(fake_azure.power_calls) == sorted(
        [("deallocate", n.instance_id) for n in nodes] + [("start", n.instance_id) for n in nodes]
    )


def test_a_start_while_vms_are_still_deallocating_is_tried_again_later(fake_azure: FakeAzure) -> None:
    provider = AzureCompute.from_env()
    spec = launch_spec("azure", "eastus", instance_type="Standard_D2s_v5")
    provider.launch(spec)
    fake_azure.slow_deallocations = True
    provider.stop(spec.cluster_id)
    with pytest.raises(TransientCloudError, match="still deallocating"):
        provider.start(spec.cluster_id, {})
    fake_azure.slow_deallocations = False
    assert [n.state for n in provider.start(spec.cluster_id, {})] == ["running"]


def test_down_removes_a_stopped_cluster_with_its_disks(fake_azure: FakeAzure) -> None:
    provider = AzureCompute.from_env()
    spec = launch_spec("azure", "eastus", num_nodes=2, instance_type="Standard_D2s_v5")
    provider.launch(spec)
    provider.stop(spec.cluster_id)
    provider.terminate(spec.cluster_id)
    provider.terminate(spec.cluster_id)
    provider.list_owned()
    assert provider.describe(spec.cluster_id) == []


def test_a_cluster_on_azure_stops_is_left_by_the_reaper_and_starts_again(
    azure_stack: Settings, queues: QueueDriver, fake_azure: FakeAzure
) -> None:
    operations.launch_on_cluster(azure_stack, owner=OWNER, name="box", task_text=TASK)
    assert deliver(queues) == ["launch"]
    cluster = ClusterStore(azure_stack).by_name(OWNER, "box")
    assert cluster.state == "UP" and cluster.provider == "azure"

    operations.stop_cluster(azure_stack, owner=OWNER, name="box")
    assert deliver(queues) == ["stop"]
    assert ClusterStore(azure_stack).by_name(OWNER, "box").state == "STOPPED"
    swept = reap_orphans(wiring_for(azure_stack), grace_seconds=0)
    assert cluster.provider_cluster in swept.owned and swept.killed == []

    operations.start_cluster(azure_stack, owner=OWNER, name="box")
    assert deliver(queues) == ["start"]
    assert ClusterStore(azure_stack).by_name(OWNER, "box").state == "UP"
    provider = AzureCompute.from_env()
    assert {n.state for n in provider.describe(cluster.provider_cluster)} == {"running"}

    operations.down_cluster(azure_stack, owner=OWNER, name="box")
    assert deliver(queues) == ["down"]
    assert provider.describe(cluster.provider_cluster) == []


def test_a_deallocated_vm_no_record_claims_is_reaped(azure_stack: Settings, fake_azure: FakeAzure) -> None:
    provider = AzureCompute.from_env()
    orphan = launch_spec(
        "azure", "eastus", instance_type="Standard_D2s_v5", job_id="job-deadbeef0000",
        cluster_id="job-deadbeef0000-1", attempt_id="job-deadbeef0000-1",
    )  # fmt: skip
    provider.launch(orphan)
    provider.stop(orphan.cluster_id)  # a deallocated VM still bills its disk: the reaper must see it

    report = reap_orphans(wiring_for(azure_stack), grace_seconds=0)

    assert report.killed == [orphan.cluster_id]
    assert provider.describe(orphan.cluster_id) == []


def test_a_spot_cluster_on_azure_cannot_stop_as_skypilot_says(
    azure_stack: Settings, queues: QueueDriver
) -> None:
    operations.launch_on_cluster(
        azure_stack, owner=OWNER, name="box", task_text=TASK.replace("cpus: 2+", "cpus: 2+\n  use_spot: true")
    )
    assert deliver(queues) == ["launch"]
    with pytest.raises(UserError, match="stopping spot instances is not supported on Azure"):
        operations.stop_cluster(azure_stack, owner=OWNER, name="box")
