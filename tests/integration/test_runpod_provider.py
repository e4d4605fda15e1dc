"""RunPod provider against the fake RunPod GraphQL API over real HTTP."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from fakes.launch_specs import launch_spec
from fakes.runpod import FakeRunPod

from shared.clouds.base import ATTEMPT_TAG, CLUSTER_TAG, JOB_TAG, RANK_TAG, LaunchSpec
from shared.clouds.errors import (
    CloudAuthError,
    InvalidLaunchError,
    NoCapacityError,
    QuotaError,
    TransientCloudError,
)
from shared.clouds.runpod import RunPod, parse_instance_type

pytest_plugins = ["fakes.fixtures"]
CLUSTER = "job-0123456789ab-1"


def spec(num_nodes: int = 1, region: str = "US-TX-3", **changes: object) -> LaunchSpec:
    changes.setdefault("instance_type", "2x_H100-SXM_SECURE")
    return launch_spec("runpod", region, num_nodes=num_nodes, **changes)


@pytest.fixture
def provider(fake_runpod: FakeRunPod) -> RunPod:
    return RunPod.from_env()


def env_of(pod_input: dict) -> dict[str, str]:
    return {e["key"]: e["value"] for e in pod_input["env"]}


def test_on_demand_launch_deploys_one_named_pod_per_node_running_the_agent(
    provider: RunPod, fake_runpod: FakeRunPod
) -> None:
    nodes = provider.launch(spec(num_nodes=2))

    assert [n.instance_id for n in nodes] == [f"skyless-{CLUSTER}-000", f"skyless-{CLUSTER}-001"]
    deployed = fake_runpod.deploys[0]
    assert (deployed["gpuTypeId"], deployed["gpuCount"], deployed["cloudType"]) == (
        "NVIDIA H100 80GB HBM3",
        2,
        "SECURE",
    )
    assert deployed["dataCenterId"] == "US-TX-3" and "bidPerGpu" not in deployed
    boot = base64.b64decode(env_of(deployed)["SKYLESS_BOOT"]).decode()
    assert "tok-123" in boot and f"skyless-{CLUSTER}-000" in boot
    assert "SKYLESS_BOOT" in deployed["dockerArgs"]
    assert nodes[1].tags[RANK_TAG] == "1" and nodes[1].tags[JOB_TAG] == "job-0123456789ab"
    assert nodes[1].tags[CLUSTER_TAG] == CLUSTER and nodes[1].tags[ATTEMPT_TAG] == "1"
    assert all(n.region == "US-TX-3" and not n.use_spot and n.ip.startswith("10.65.") for n in nodes)


def test_spot_launch_bids_runpods_minimum_bid_per_gpu(provider: RunPod, fake_runpod: FakeRunPod) -> None:
    fake_runpod.minimum_bids["NVIDIA H100 80GB HBM3"] = 1.42

    nodes = provider.launch(spec(use_spot=True))

    assert fake_runpod.deploys[0]["bidPerGpu"] == 1.42
    assert nodes[0].use_spot


def test_spot_without_a_spot_market_is_a_capacity_error(provider: RunPod, fake_runpod: FakeRunPod) -> None:
    with pytest.raises(NoCapacityError, match="no spot"):
        provider.launch(spec(use_spot=True, instance_type="1x_L4_SECURE"))
    assert fake_runpod.deploys == []


def test_the_same_attempt_launched_twice_deploys_one_set(provider: RunPod, fake_runpod: FakeRunPod) -> None:
    first = provider.launch(spec(num_nodes=2))
    again = provider.launch(spec(num_nodes=2))

    assert [n.instance_id for n in again] == [n.instance_id for n in first]
    assert len(fake_runpod.deploys) == 2 and len(fake_runpod.live()) == 2


def test_list_owned_skips_pods_that_skyless_did_not_start(provider: RunPod, fake_runpod: FakeRunPod) -> None:
    fake_runpod.pods["mine"] = {
        "id": "mine",
        "name": "my-notebook",
        "desiredStatus": "RUNNING",
        "env": [],
        "runtime": None,
    }
    provider.launch(spec(num_nodes=2))

    assert [n.instance_id for n in provider.list_owned()] == [
        f"skyless-{CLUSTER}-000",
        f"skyless-{CLUSTER}-001",
    ]


def test_terminate_leaves_no_pod_and_is_idempotent(provider: RunPod, fake_runpod: FakeRunPod) -> None:
    provider.launch(spec(num_nodes=2))

    provider.terminate(CLUSTER)
    provider.terminate(CLUSTER)

    assert fake_runpod.live() == [] and provider.describe(CLUSTER) == []


def test_no_instances_available_is_a_capacity_error(provider: RunPod, fake_runpod: FakeRunPod) -> None:
    fake_runpod.no_capacity.add("US-TX-3")

    with pytest.raises(NoCapacityError, match="no longer any instances available"):
        provider.launch(spec())
    assert len(provider.launch(spec(region="EU-RO-1"))) == 1


def test_a_launch_that_hits_the_pod_limit_midway_terminates_what_it_started(
    provider: RunPod, fake_runpod: FakeRunPod
) -> None:
    fake_runpod.pod_limit = 1

    with pytest.raises(QuotaError, match="limit"):
        provider.launch(spec(num_nodes=2))
    assert fake_runpod.live() == []


def test_an_empty_balance_disables_the_cloud(provider: RunPod, fake_runpod: FakeRunPod) -> None:
    fake_runpod.low_balance = True

    with pytest.raises(CloudAuthError, match="funds"):
        provider.launch(spec())


def test_a_wrong_api_key_is_an_auth_error(fake_runpod: FakeRunPod) -> None:
    with pytest.raises(CloudAuthError, match="401"):
        RunPod("rpa_WRONG", base_url=fake_runpod.url).list_owned()


@pytest.mark.parametrize("section", ["[default]\n", ""])
def test_the_api_key_is_read_from_the_runpod_cli_config(
    fake_runpod: FakeRunPod, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, section: str
) -> None:
    monkeypatch.delenv("RUNPOD_API_KEY")
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".runpod").mkdir()
    (tmp_path / ".runpod" / "config.toml").write_text(f'{section}api_key = "{fake_runpod.api_key}"\n')

    assert RunPod.from_env().list_owned() == []


def test_no_api_key_is_an_auth_error_saying_what_to_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))

    with pytest.raises(CloudAuthError, match="RUNPOD_API_KEY"):
        RunPod.from_env().list_owned()


def test_throttling_is_transient(provider: RunPod, fake_runpod: FakeRunPod) -> None:
    fake_runpod.throttle_next = 1

    with pytest.raises(TransientCloudError):
        provider.launch(spec())


def test_an_unknown_instance_type_is_invalid_before_any_call(
    provider: RunPod, fake_runpod: FakeRunPod
) -> None:
    with pytest.raises(InvalidLaunchError, match="3x_TPU"):
        provider.launch(spec(instance_type="3x_TPU_SECURE"))


def test_a_field_runpod_does_not_know_is_an_invalid_launch(
    provider: RunPod, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = provider.pod_input

    def with_typo(*args: object) -> dict:
        return {**original(*args), "gpuCnt": 1}  # type: ignore[arg-type]

    monkeypatch.setattr(provider, "pod_input", with_typo)
    with pytest.raises(InvalidLaunchError, match="gpuCnt"):
        provider.launch(spec())


def test_catalog_instance_types_parse_into_runpod_gpu_ids() -> None:
    assert parse_instance_type("8x_A100-80GB-SXM_SECURE") == (8, "NVIDIA A100-SXM4-80GB", "SECURE")
    assert parse_instance_type("1x_RTX4090_COMMUNITY") == (1, "NVIDIA GeForce RTX 4090", "COMMUNITY")


def test_a_docker_image_id_becomes_the_pod_image(provider: RunPod, fake_runpod: FakeRunPod) -> None:
    provider.launch(spec(image_id="docker:vllm/vllm-openai:latest", disk_size_gb=200))

    assert fake_runpod.deploys[0]["imageName"] == "vllm/vllm-openai:latest"
    assert fake_runpod.deploys[0]["containerDiskInGb"] == 200


def test_task_ports_are_exposed_as_tcp_ports_of_the_pod(provider: RunPod, fake_runpod: FakeRunPod) -> None:
    provider.launch(spec(ports=("8080", "9000-9002")))

    assert fake_runpod.deploys[0]["ports"] == "8080/tcp,9000/tcp,9001/tcp,9002/tcp"


def test_a_port_range_too_wide_for_runpod_is_an_invalid_launch(
    provider: RunPod, fake_runpod: FakeRunPod
) -> None:
    with pytest.raises(InvalidLaunchError, match="at most"):
        provider.launch(spec(ports=("10000-20000",)))
    assert fake_runpod.deploys == []
