"""GCP TPU VMs through the TPU v2 REST API, against the fake TPU API (tests/fakes/gcp_tpu.py) over real HTTP,
and a TPU task file from submit to teardown through the real handlers."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import QueueDriver
from fakes.gcp import FakeGcp
from fakes.launch_specs import launch_spec

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from shared.clouds.base import CLUSTER_TAG, JOB_TAG, MANAGED_TAG, RANK_TAG, LaunchSpec
from shared.clouds.errors import NoCapacityError, QuotaError
from shared.clouds.gcp_tpu import GcpCloud, GcpTpuVms, tpu_startup_script
from shared.config import Settings
from shared.jobs.cancellation import cancel_job
from shared.jobs.reaper import reap_orphans
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import get_job
from shared.states import JobState
from shared.wiring import wiring_for

pytest_plugins = ["fakes.fixtures"]
CLUSTER = "job-0123456789ab-1"
FILES = Path(__file__).resolve().parents[1] / "fixtures" / "semantics"


def tpu_spec(accelerator: str = "tpu-v4-8", zone: str = "us-central2-b", **changes: object) -> LaunchSpec:
    changes.setdefault("accelerator_count", 1)
    return launch_spec(
        "gcp", zone.rsplit("-", 1)[0], zone=zone, instance_type="TPU-VM", accelerator=accelerator, **changes
    )


@pytest.fixture
def tpus(fake_gcp: FakeGcp) -> GcpTpuVms:
    return GcpTpuVms.from_env()


def test_a_single_host_slice_is_one_labelled_node_running_the_agent_on_its_worker(
    tpus: GcpTpuVms, fake_gcp: FakeGcp
) -> None:
    nodes = tpus.launch(tpu_spec())

    [create] = fake_gcp.tpu.creates
    assert (create["zone"], create["nodeId"], create["acceleratorType"]) == (
        "us-central2-b",
        f"skyless-{CLUSTER}-000",
        "v4-8",
    )
    assert create["runtimeVersion"] == "tpu-ubuntu2204-base" and "schedulingConfig" not in create
    assert create["labels"] == {MANAGED_TAG: "true", JOB_TAG: "job-0123456789ab", CLUSTER_TAG: CLUSTER,
                                "skyless-attempt": "1", RANK_TAG: "0"}  # fmt: skip
    script = create["metadata"]["startup-script"]
    assert "tok-123" in script and "agent-worker-number" in script and "INSTANCE_ID=$(MD name)" not in script
    [node] = nodes
    assert (node.instance_id, node.instance_type, node.zone, node.state) == (
        f"skyless-{CLUSTER}-000-w000", "TPU-VM", "us-central2-b", "running",
    )  # fmt: skip
    assert node.ip.startswith("10.130.") and node.cluster_id == CLUSTER


def test_every_host_of_a_multi_host_slice_is_a_node_in_rank_order(tpus: GcpTpuVms, fake_gcp: FakeGcp) -> None:
    nodes = tpus.launch(tpu_spec("tpu-v5litepod-16", zone="us-central1-a"))

    assert [n.instance_id for n in nodes] == [f"skyless-{CLUSTER}-000-w{i:03d}" for i in range(4)]
    assert len({n.ip for n in nodes}) == 4
    assert fake_gcp.tpu.creates[0]["runtimeVersion"] == "v2-alpha-tpuv5-lite"


def test_spot_slices_ask_for_spot_scheduling(tpus: GcpTpuVms, fake_gcp: FakeGcp) -> None:
    [node] = tpus.launch(tpu_spec("tpu-v6e-8", zone="us-east5-b", use_spot=True))
    assert fake_gcp.tpu.creates[0]["schedulingConfig"] == {"spot": True} and node.use_spot


def test_the_same_attempt_launched_twice_creates_one_node_per_rank(
    tpus: GcpTpuVms, fake_gcp: FakeGcp
) -> None:
    first = tpus.launch(tpu_spec(num_nodes=2))
    again = GcpTpuVms.from_env().launch(tpu_spec(num_nodes=2))
    assert [n.instance_id for n in again] == [n.instance_id for n in first]
    assert len(fake_gcp.tpu.creates) == 2 and len(fake_gcp.tpu.live()) == 2


def test_no_capacity_is_a_zone_block_and_leaves_nothing_behind(tpus: GcpTpuVms, fake_gcp: FakeGcp) -> None:
    fake_gcp.tpu.no_capacity_zones.add("us-central2-b")
    with pytest.raises(NoCapacityError, match="no more capacity"):
        tpus.launch(tpu_spec(num_nodes=2))
    assert fake_gcp.tpu.live() == []


def test_a_quota_refusal_is_a_quota_error(tpus: GcpTpuVms, fake_gcp: FakeGcp) -> None:
    fake_gcp.tpu.quota_zones.add("us-central2-b")
    with pytest.raises(QuotaError, match="Quota limit"):
        tpus.launch(tpu_spec())


def test_terminate_deletes_the_clusters_nodes_only(tpus: GcpTpuVms, fake_gcp: FakeGcp) -> None:
    tpus.launch(tpu_spec())
    other = "job-0123456789ab-2"
    tpus.launch(tpu_spec(cluster_id=other, attempt_id=other, attempt=2))
    tpus.terminate(CLUSTER)
    assert tpus.describe(CLUSTER) == []
    assert [n.cluster_id for n in tpus.describe(other)] == [other]
    assert {n.cluster_id for n in tpus.list_owned()} == {other}


def test_the_gcp_provider_sends_tpu_vms_to_the_tpu_api_and_the_rest_to_compute_engine(
    fake_gcp: FakeGcp,
) -> None:
    gcp = GcpCloud.from_env()
    gcp.launch(tpu_spec())
    vm = "job-0123456789ab-5"
    gcp.launch(launch_spec("gcp", "us-central1", zone="us-central1-a", instance_type="n2-standard-8",
                           cluster_id=vm, attempt_id=vm, attempt=5))  # fmt: skip
    assert len(fake_gcp.tpu.creates) == 1 and len(fake_gcp.inserts) == 1
    assert {n.instance_type for n in gcp.list_owned()} == {"TPU-VM", "n2-standard-8"}
    gcp.terminate(CLUSTER)
    gcp.terminate(vm)
    assert gcp.describe(CLUSTER) == [] and fake_gcp.tpu.live() == []


def test_the_worker_boot_script_names_itself_after_its_node_and_worker_number() -> None:
    script = tpu_startup_script(tpu_spec(), "skyless-c-000")
    assert 'INSTANCE_ID="skyless-c-000-w$(printf %03d "${TPU_WORKER:-0}")"' in script


def test_a_tpu_task_file_is_planned_launched_and_torn_down_through_the_handlers(
    fake_gcp: FakeGcp, stack: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKYLESS_PROVIDERS", "gcp=gcp")
    settings = stack.with_(providers="gcp=gcp")
    text = (FILES / "tpu_v5e_16.yaml").read_text()
    job_id = submit_job(
        wiring_for(settings), SubmitJob.from_text(owner="alice", task_text=text, filename="tpu_v5e_16.yaml")
    ).job_id
    assert optimize_handler(queues.event(queues.receive("optimize")), None) == {"batchItemFailures": []}
    first = get_job(wiring_for(settings), job_id, owner=None).plan["tasks"][0]["candidates"][0]  # type: ignore[index]
    assert (first["instance_type"], first["accelerator"]) == ("TPU-VM", "tpu-v5litepod-16")
    fake_gcp.tpu.no_capacity_zones.add(first["zone"])

    assert provision_handler(queues.event(queues.receive("provision")), None) == {"batchItemFailures": []}

    view = get_job(wiring_for(settings), job_id, owner=None)
    assert view.state == JobState.SETTING_UP and view.cluster is not None
    assert view.cluster["zone"] != first["zone"] and view.cluster["instance_type"] == "TPU-VM"
    assert len(view.cluster["nodes"]) == 4  # the slice's 4 hosts, each a node
    [slice_node] = fake_gcp.tpu.live()
    assert slice_node["labels"][JOB_TAG] == job_id
    cancel_job(wiring_for(settings), job_id, owner=None)
    assert provision_handler(queues.event(queues.receive("provision")), None) == {"batchItemFailures": []}
    assert fake_gcp.tpu.live() == []


def test_the_reaper_deletes_a_tpu_slice_no_live_job_owns(
    fake_gcp: FakeGcp, stack: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKYLESS_PROVIDERS", "gcp=gcp")
    settings = stack.with_(providers="gcp=gcp")
    orphan = "job-deadbeef0000-1"
    GcpTpuVms.from_env().launch(tpu_spec(job_id="job-deadbeef0000", cluster_id=orphan, attempt_id=orphan))

    report = reap_orphans(wiring_for(settings), grace_seconds=0)

    assert report.killed == [orphan] and fake_gcp.tpu.live() == []
