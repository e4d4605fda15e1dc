"""Named clusters on GCP, against the fake Compute Engine over HTTP: stop keeps the VMs (GCE's TERMINATED, the
boot disk kept) and start boots the same VMs again; the reaper leaves a stopped cluster alone and takes a
stopped VM that no record claims; `down` removes a cluster even while its VMs are still stopping."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from conftest import QueueDriver
from fakes.gcp import FakeGcp
from fakes.launch_specs import launch_spec

from functions.provision.handler import handler as provision_handler
from shared.clouds.errors import TransientCloudError
from shared.clouds.gcp import GcpCompute
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
  cloud: gcp
  cpus: 2+
run: echo hi
"""
OWNER = "u-ada"


@pytest.fixture
def gcp_stack(fake_gcp: FakeGcp, stack: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    settings = stack.with_(providers="gcp=gcp")
    monkeypatch.setenv("SKYLESS_PROVIDERS", settings.providers)
    yield settings


def deliver(queues: QueueDriver) -> list[str]:
    records = queues.receive("provision")
    assert provision_handler(queues.event(records), None) == {"batchItemFailures": []}
    return [json.loads(r["body"])["action"] for r in records]


def statuses(fake: FakeGcp, cluster_id: str) -> list[str]:
    with fake.lock:  # a deleted VM is gone
        return sorted(
            vm["status"]
            for vm in fake.instances.values()
            if vm["labels"].get("skyless-cluster") == cluster_id and vm["status"] != "DELETED"
        )


def vm_ids(fake: FakeGcp) -> set[str]:
    with fake.lock:
        return {vm["id"] for vm in fake.instances.values() if vm["status"] != "DELETED"}


def test_the_provider_stops_and_starts_the_same_vms_and_both_are_idempotent(fake_gcp: FakeGcp) -> None:
    provider = GcpCompute.from_env()
    spec = launch_spec("gcp", "us-central1", zone="us-central1-a", num_nodes=2, instance_type="n2-standard-8")
    nodes = provider.launch(spec)
    before = vm_ids(fake_gcp)

    provider.stop(spec.cluster_id)
    provider.stop(spec.cluster_id)  # twice: the second finds nothing running
    assert {n.state for n in provider.describe(spec.cluster_id)} == {"stopped"}
    assert statuses(fake_gcp, spec.cluster_id) == ["TERMINATED", "TERMINATED"]

    started = provider.start(spec.cluster_id, {})
    assert [n.instance_id for n in started] == [n.instance_id for n in nodes]  # the same VMs, rank order
    assert [n.ip for n in started] == [n.ip for n in nodes]
    assert {n.state for n in started} == {"running"}
    assert provider.start(spec.cluster_id, {}) == started  # a second start changes nothing
    assert vm_ids(fake_gcp) == before and len(fake_gcp.inserts) == 2  # no VM made anew: the disks are theirs
    assert sorted(fake_gcp.power_calls) == sorted([("stop", n.instance_id) for n in nodes] +
                                                  [("start", n.instance_id) for n in nodes])  # fmt: skip


def test_a_start_while_vms_are_still_stopping_is_tried_again_later(fake_gcp: FakeGcp) -> None:
    provider = GcpCompute.from_env()
    spec = launch_spec("gcp", "us-central1", zone="us-central1-a", instance_type="n2-standard-8")
    provider.launch(spec)
    fake_gcp.slow_stops = True
    provider.stop(spec.cluster_id)
    with pytest.raises(TransientCloudError, match="still stopping"):
        provider.start(spec.cluster_id, {})
    name = provider.describe(spec.cluster_id)[0].instance_id
    with pytest.raises(TransientCloudError, match="resourceNotReady"):  # GCE's own answer, if asked
        provider.client.request(
            "POST", f"projects/{fake_gcp.project}/zones/us-central1-a/instances/{name}/start"
        )
    fake_gcp.slow_stops = False
    provider.list_owned()
    assert [n.state for n in provider.start(spec.cluster_id, {})] == ["running"]


def test_down_removes_a_cluster_whose_vms_are_still_stopping(fake_gcp: FakeGcp) -> None:
    provider = GcpCompute.from_env()
    spec = launch_spec("gcp", "us-central1", zone="us-central1-a", num_nodes=2, instance_type="n2-standard-8")
    provider.launch(spec)
    provider.stop(spec.cluster_id)
    provider.terminate(spec.cluster_id)
    provider.terminate(spec.cluster_id)
    provider.list_owned()
    assert provider.describe(spec.cluster_id) == [] and statuses(fake_gcp, spec.cluster_id) == []


def test_a_cluster_on_gcp_stops_is_left_by_the_reaper_and_starts_again(
    gcp_stack: Settings, queues: QueueDriver, fake_gcp: FakeGcp
) -> None:
    operations.launch_on_cluster(gcp_stack, owner=OWNER, name="box", task_text=TASK)
    assert deliver(queues) == ["launch"]
    cluster = ClusterStore(gcp_stack).by_name(OWNER, "box")
    assert cluster.state == "UP" and cluster.provider == "gcp"

    operations.stop_cluster(gcp_stack, owner=OWNER, name="box")
    assert deliver(queues) == ["stop"]
    assert ClusterStore(gcp_stack).by_name(OWNER, "box").state == "STOPPED"
    swept = reap_orphans(wiring_for(gcp_stack), grace_seconds=0)
    assert cluster.provider_cluster in swept.owned and swept.killed == []
    assert statuses(fake_gcp, cluster.provider_cluster) == ["TERMINATED"]

    operations.start_cluster(gcp_stack, owner=OWNER, name="box")
    assert deliver(queues) == ["start"]
    assert ClusterStore(gcp_stack).by_name(OWNER, "box").state == "UP"
    assert statuses(fake_gcp, cluster.provider_cluster) in (["PROVISIONING"], ["RUNNING"])

    operations.down_cluster(gcp_stack, owner=OWNER, name="box")
    assert deliver(queues) == ["down"]
    GcpCompute.from_env().list_owned()
    assert statuses(fake_gcp, cluster.provider_cluster) == []


def test_a_stopped_vm_no_record_claims_is_reaped(gcp_stack: Settings, fake_gcp: FakeGcp) -> None:
    provider = GcpCompute.from_env()
    orphan = launch_spec(
        "gcp", "us-central1", zone="us-central1-a", instance_type="n2-standard-8",
        job_id="job-deadbeef0000", cluster_id="job-deadbeef0000-1", attempt_id="job-deadbeef0000-1",
    )  # fmt: skip
    provider.launch(orphan)
    provider.stop(orphan.cluster_id)  # a stopped VM still bills its disk: the reaper must see it

    report = reap_orphans(wiring_for(gcp_stack), grace_seconds=0)

    assert report.killed == [orphan.cluster_id]
    provider.list_owned()
    assert statuses(fake_gcp, orphan.cluster_id) == []


def test_a_spot_cluster_on_gcp_can_stop_as_in_skypilot(gcp_stack: Settings, queues: QueueDriver) -> None:
    operations.launch_on_cluster(
        gcp_stack, owner=OWNER, name="box", task_text=TASK.replace("cpus: 2+", "cpus: 2+\n  use_spot: true")
    )
    assert deliver(queues) == ["launch"]
    operations.stop_cluster(gcp_stack, owner=OWNER, name="box")
    assert deliver(queues) == ["stop"]
    assert ClusterStore(gcp_stack).by_name(OWNER, "box").state == "STOPPED"
    with pytest.raises(UserError, match="STOPPED"):
        operations.exec_on_cluster(gcp_stack, owner=OWNER, name="box", command="true")
