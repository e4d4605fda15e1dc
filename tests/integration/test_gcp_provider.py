"""GCP Compute Engine provider against the fake Compute Engine API over real HTTP."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from conftest import QueueDriver
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fakes.gcp import FakeGcp
from fakes.launch_specs import launch_spec

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from shared.clouds.base import ATTEMPT_TAG, CLUSTER_TAG, JOB_TAG, MANAGED_TAG, RANK_TAG, LaunchSpec, Node
from shared.clouds.errors import (
    CloudAuthError,
    InvalidLaunchError,
    NoCapacityError,
    QuotaError,
    TransientCloudError,
)
from shared.clouds.gcp import GcpCompute, gcp_label, request_id
from shared.config import Settings
from shared.jobs.cancellation import cancel_job
from shared.jobs.reaper import reap_orphans
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import get_job
from shared.states import JobState
from shared.wiring import wiring_for

pytest_plugins = ["fakes.fixtures"]
CLUSTER = "job-0123456789ab-1"


def spec(num_nodes: int = 1, zone: str = "us-central1-a", **changes: object) -> LaunchSpec:
    changes.setdefault("instance_type", "n2-standard-8")
    region = zone.rsplit("-", 1)[0]
    return launch_spec("gcp", region, zone=zone, num_nodes=num_nodes, **changes)


@pytest.fixture
def provider(fake_gcp: FakeGcp) -> GcpCompute:
    return GcpCompute.from_env()


def startup_of(body: dict) -> str:
    return next(i["value"] for i in body["metadata"]["items"] if i["key"] == "startup-script")


def test_on_demand_launch_inserts_labelled_named_vms_with_the_agent_startup_script(
    provider: GcpCompute, fake_gcp: FakeGcp
) -> None:
    nodes = provider.launch(spec(num_nodes=2))

    assert [n.instance_id for n in nodes] == [f"skyless-{CLUSTER}-000", f"skyless-{CLUSTER}-001"]
    assert all(n.state == "running" and n.ip.startswith("10.128.") and not n.use_spot for n in nodes)
    body = fake_gcp.inserts[1]
    expected = {MANAGED_TAG: "true", JOB_TAG: "job-0123456789ab", CLUSTER_TAG: CLUSTER, ATTEMPT_TAG: "1"}
    assert body["labels"] == {**expected, RANK_TAG: "1"}
    assert "provisioningModel" not in body["scheduling"]
    assert "tok-123" in startup_of(body) and "metadata.google.internal" in startup_of(body)
    assert body["disks"][0]["initializeParams"]["sourceImage"].endswith("family/debian-12")
    assert nodes[0].zone == "us-central1-a" and nodes[0].region == "us-central1"
    assert nodes[0].instance_type == "n2-standard-8"


def test_spot_n1_with_t4_asks_for_spot_scheduling_a_guest_accelerator_and_a_deep_learning_image(
    provider: GcpCompute, fake_gcp: FakeGcp
) -> None:
    nodes = provider.launch(
        spec(instance_type="n1-standard-8", use_spot=True, accelerator="T4", accelerator_count=1)
    )

    body = fake_gcp.inserts[0]
    assert body["scheduling"] == {
        "provisioningModel": "SPOT", "instanceTerminationAction": "DELETE",
        "automaticRestart": False, "onHostMaintenance": "TERMINATE",
    }  # fmt: skip
    assert body["guestAccelerators"] == [
        {"acceleratorType": "zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4", "acceleratorCount": 1}
    ]
    assert "deeplearning-platform-release" in body["disks"][0]["initializeParams"]["sourceImage"]
    assert nodes[0].use_spot


def test_on_demand_gpu_vms_do_not_live_migrate(provider: GcpCompute, fake_gcp: FakeGcp) -> None:
    provider.launch(spec(instance_type="n1-standard-8", accelerator="V100", accelerator_count=2))

    body = fake_gcp.inserts[0]
    assert body["scheduling"] == {"onHostMaintenance": "TERMINATE"}
    assert body["guestAccelerators"][0]["acceleratorType"].endswith("nvidia-tesla-v100")


def test_image_id_and_disk_size_override_the_defaults(provider: GcpCompute, fake_gcp: FakeGcp) -> None:
    provider.launch(spec(image_id="projects/my-proj/global/images/my-image", disk_size_gb=500))

    params = fake_gcp.inserts[0]["disks"][0]["initializeParams"]
    assert params == {"sourceImage": "projects/my-proj/global/images/my-image", "diskSizeGb": "500"}


def test_the_same_attempt_launched_twice_starts_one_set(provider: GcpCompute, fake_gcp: FakeGcp) -> None:
    first = provider.launch(spec(num_nodes=2))
    again = provider.launch(spec(num_nodes=2))

    assert [n.instance_id for n in again] == [n.instance_id for n in first]
    assert len(fake_gcp.inserts) == 2 and len(fake_gcp.live()) == 2


def test_concurrent_duplicate_launches_start_one_set(fake_gcp: FakeGcp) -> None:
    results: list[list[Node]] = []

    def launch() -> None:
        results.append(GcpCompute.from_env().launch(spec(num_nodes=2)))

    threads = [threading.Thread(target=launch) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(results) == 2 and results[0] == results[1]
    assert len(fake_gcp.inserts) == 2 and len(fake_gcp.live()) == 2


def test_request_ids_are_stable_per_attempt_place_and_rank() -> None:
    assert request_id(spec(), 0) == request_id(spec(), 0)
    assert len({request_id(spec(), 0), request_id(spec(), 1), request_id(spec(zone="us-central1-b"), 0)}) == 3


def test_list_owned_walks_every_zone_and_page_and_skips_foreign_vms(
    provider: GcpCompute, fake_gcp: FakeGcp
) -> None:
    fake_gcp.instances[("us-central1-a", "my-vm")] = {
        "name": "my-vm", "status": "RUNNING", "zone": "zones/us-central1-a", "labels": {"team": "ml"},
    }  # fmt: skip
    fake_gcp.page_size = 1
    provider.launch(spec(num_nodes=2, zone="us-central1-a"))
    provider.launch(spec(num_nodes=1, zone="europe-west4-b", cluster_id="job-0123456789ab-2", attempt=2))

    owned = provider.list_owned()

    assert len(owned) == 3
    assert {n.zone for n in owned} == {"us-central1-a", "europe-west4-b"}
    assert {n.attempt for n in owned} == {1, 2}


def test_terminate_deletes_every_vm_of_the_cluster_and_is_idempotent(
    provider: GcpCompute, fake_gcp: FakeGcp
) -> None:
    provider.launch(spec(num_nodes=3))

    provider.terminate(CLUSTER)
    provider.terminate(CLUSTER)

    assert fake_gcp.live() == []
    assert all(n.state == "terminated" for n in provider.describe(CLUSTER))
    provider.list_owned()
    assert provider.describe(CLUSTER) == []


def test_a_zone_without_resources_is_a_capacity_error_and_the_next_zone_works(
    provider: GcpCompute, fake_gcp: FakeGcp
) -> None:
    fake_gcp.stockout_zones.add("us-central1-a")

    with pytest.raises(NoCapacityError, match="ZONE_RESOURCE_POOL_EXHAUSTED"):
        provider.launch(spec())
    assert len(provider.launch(spec(zone="us-central1-b"))) == 1


def test_a_launch_that_runs_out_of_capacity_midway_deletes_what_it_started(
    provider: GcpCompute, fake_gcp: FakeGcp
) -> None:
    fake_gcp.capacity_left["us-central1-a"] = 2

    with pytest.raises(NoCapacityError):
        provider.launch(spec(num_nodes=3))

    assert fake_gcp.live() == []


def test_quota_exceeded_is_a_quota_error(provider: GcpCompute, fake_gcp: FakeGcp) -> None:
    fake_gcp.quota_regions.add("us-central1")

    with pytest.raises(QuotaError, match="NVIDIA_T4_GPUS"):
        provider.launch(spec())


def test_rate_limiting_is_transient(provider: GcpCompute, fake_gcp: FakeGcp) -> None:
    fake_gcp.throttle_next = 1

    with pytest.raises(TransientCloudError, match="rateLimitExceeded"):
        provider.launch(spec())


def test_an_unknown_machine_type_is_an_invalid_launch_with_gcps_message(provider: GcpCompute) -> None:
    with pytest.raises(InvalidLaunchError, match=r"resource\.machineType"):
        provider.launch(spec(instance_type="nope-1"))


def test_a_refused_token_is_an_auth_error(fake_gcp: FakeGcp, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.revoked")

    with pytest.raises(CloudAuthError, match="authError"):
        GcpCompute.from_env().list_owned()


def test_a_key_file_signed_by_another_key_is_an_auth_error(
    fake_gcp: FakeGcp, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    info = fake_gcp.service_account_info()
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    info["private_key"] = other.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    (tmp_path / "other.json").write_text(json.dumps(info))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "other.json"))

    with pytest.raises(CloudAuthError, match="Invalid JWT Signature"):
        GcpCompute.from_env().list_owned()


def test_no_credentials_is_an_auth_error_naming_what_to_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_OAUTH_ACCESS_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "p")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))

    with pytest.raises(CloudAuthError, match="GOOGLE_APPLICATION_CREDENTIALS"):
        GcpCompute.from_env().list_owned()


def test_the_service_account_token_is_fetched_once_and_reused(
    provider: GcpCompute, fake_gcp: FakeGcp
) -> None:
    provider.launch(spec())
    provider.terminate(CLUSTER)

    assert fake_gcp.token_grants == 1


def test_labels_follow_gcp_rules() -> None:
    assert gcp_label("Team.Name_X") == "team-name_x"
    assert len(gcp_label("x" * 80)) == 63


CPU_TASK = """
name: prep
resources:
  cloud: gcp
  cpus: 2+
run: python prep.py
"""


def test_a_job_whose_first_zone_is_out_of_resources_lands_in_the_next_zone_and_cancel_leaves_nothing(
    fake_gcp: FakeGcp, stack: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKYLESS_PROVIDERS", "gcp=gcp")
    settings = stack.with_(providers="gcp=gcp")
    job_id = submit_job(wiring_for(settings), SubmitJob.from_text(owner="alice", task_text=CPU_TASK)).job_id
    assert optimize_handler(queues.event(queues.receive("optimize")), None) == {"batchItemFailures": []}
    candidates = get_job(wiring_for(settings), job_id, owner=None).plan["tasks"][0]["candidates"]  # type: ignore[index]
    first, landing = candidates[0], next(c for c in candidates[1:] if c["zone"] != candidates[0]["zone"])
    fake_gcp.stockout_zones.add(first["zone"])

    assert provision_handler(queues.event(queues.receive("provision")), None) == {"batchItemFailures": []}

    view = get_job(wiring_for(settings), job_id, owner=None)
    assert view.state == JobState.SETTING_UP
    assert view.cluster is not None and view.cluster["zone"] == landing["zone"]
    [vm] = fake_gcp.live()
    assert vm["zone"].endswith(landing["zone"]) and vm["labels"][JOB_TAG] == job_id
    assert [n["instance_id"] for n in view.cluster["nodes"]] == [vm["name"]]
    cancel_job(wiring_for(settings), job_id, owner=None)
    assert provision_handler(queues.event(queues.receive("provision")), None) == {"batchItemFailures": []}
    assert fake_gcp.live() == []


def test_a_per_region_image_and_task_labels_reach_the_insert(provider: GcpCompute, fake_gcp: FakeGcp) -> None:
    images = {
        "us-central1": "projects/p/global/images/central",
        "europe-west4": "projects/p/global/images/eu",
    }
    provider.launch(spec(image_id=images, labels={"Team": "ML.Research"}))

    body = fake_gcp.inserts[0]
    assert body["disks"][0]["initializeParams"]["sourceImage"] == "projects/p/global/images/central"
    assert body["labels"]["team"] == "ml-research" and body["labels"][MANAGED_TAG] == "true"


def test_task_ports_open_one_firewall_rule_for_the_cluster_that_terminate_removes(
    provider: GcpCompute, fake_gcp: FakeGcp
) -> None:
    provider.launch(spec(num_nodes=2, ports=("8080", "10000-10010")))
    provider.launch(spec(num_nodes=2, ports=("8080", "10000-10010")))

    [rule] = fake_gcp.firewalls.values()
    assert rule["allowed"] == [{"IPProtocol": "tcp", "ports": ["8080", "10000-10010"]}]
    assert rule["targetTags"] == [f"skyless-{CLUSTER}"]
    assert all(body["tags"] == {"items": [f"skyless-{CLUSTER}"]} for body in fake_gcp.inserts)
    provider.terminate(CLUSTER)
    assert fake_gcp.firewalls == {} and fake_gcp.live() == []


def test_a_task_without_ports_opens_nothing(provider: GcpCompute, fake_gcp: FakeGcp) -> None:
    provider.launch(spec())

    assert fake_gcp.firewalls == {} and "tags" not in fake_gcp.inserts[0]


def test_gcloud_application_default_credentials_work_without_any_variable(
    fake_gcp: FakeGcp, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "application_default_credentials.json").write_text(
        json.dumps(fake_gcp.authorized_user_info())
    )
    for name in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))

    nodes = GcpCompute.from_env().launch(spec())

    assert len(nodes) == 1 and fake_gcp.token_grants == 1


def test_leftover_clusters_names_the_cluster_of_a_firewall_rule_whose_vms_are_gone(
    provider: GcpCompute, fake_gcp: FakeGcp
) -> None:
    provider.launch(spec(use_spot=True, ports=("8888",)))
    fake_gcp.instances.clear()  # preempted spot VMs are deleted by GCP (instanceTerminationAction DELETE)

    assert provider.list_owned() == []
    assert provider.leftover_clusters() == [("job-0123456789ab", CLUSTER)]
    provider.terminate(CLUSTER)
    assert provider.leftover_clusters() == [] and fake_gcp.firewalls == {}


def test_the_reaper_kills_a_planted_orphan_on_gcp_and_spares_a_live_jobs_vm(
    fake_gcp: FakeGcp, stack: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKYLESS_PROVIDERS", "gcp=gcp")
    settings = stack.with_(providers="gcp=gcp")
    job_id = submit_job(wiring_for(settings), SubmitJob.from_text(owner="alice", task_text=CPU_TASK)).job_id
    optimize_handler(queues.event(queues.receive("optimize")), None)
    provision_handler(queues.event(queues.receive("provision")), None)
    orphan = "job-deadbeef0000-1"
    GcpCompute.from_env().launch(
        spec(job_id="job-deadbeef0000", cluster_id=orphan, attempt_id=orphan, ports=("80",))
    )

    report = reap_orphans(wiring_for(settings), grace_seconds=0)

    assert report.killed == [orphan] and report.failed == []
    assert [vm["labels"][JOB_TAG] for vm in fake_gcp.live()] == [job_id]
    assert fake_gcp.firewalls == {}
