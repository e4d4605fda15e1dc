"""Lambda Cloud provider against the fake Lambda Cloud API over real HTTP."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from fakes.lambda_cloud import FakeLambdaCloud
from fakes.launch_specs import launch_spec

from shared.clouds.base import ATTEMPT_TAG, CLUSTER_TAG, JOB_TAG, MANAGED_TAG, RANK_TAG, LaunchSpec
from shared.clouds.errors import (
    CloudAuthError,
    InvalidLaunchError,
    NoCapacityError,
    QuotaError,
    TransientCloudError,
)
from shared.clouds.lambda_cloud import LambdaCloud

pytest_plugins = ["fakes.fixtures"]


def spec(num_nodes: int = 1, region: str = "us-east-1", attempt: int = 1, **changes: object) -> LaunchSpec:
    changes.setdefault("instance_type", "gpu_1x_a100")
    return launch_spec("lambda", region, num_nodes=num_nodes, attempt=attempt, **changes)


@pytest.fixture
def provider(fake_lambda: FakeLambdaCloud) -> LambdaCloud:
    fake_lambda.ssh_keys.append({"id": "k1", "name": "laptop", "public_key": "ssh-ed25519 AAAA me"})
    return LambdaCloud.from_env()


def test_launch_starts_one_named_instance_per_node_with_the_agent_user_data(
    provider: LambdaCloud, fake_lambda: FakeLambdaCloud
) -> None:
    nodes = provider.launch(spec(num_nodes=2))

    assert [n.instance_id for n in nodes] == [
        "skyless-job-0123456789ab-1-000",
        "skyless-job-0123456789ab-1-001",
    ]
    assert [b["quantity"] for b in fake_lambda.launches] == [1, 1]
    assert {b["ssh_key_names"][0] for b in fake_lambda.launches} == {"laptop"}
    first = fake_lambda.launches[0]
    assert first["region_name"] == "us-east-1" and first["instance_type_name"] == "gpu_1x_a100"
    assert "tok-123" in first["user_data"] and "skyless-job-0123456789ab-1-000" in first["user_data"]
    assert nodes[1].tags == {
        MANAGED_TAG: "true",
        JOB_TAG: "job-0123456789ab",
        CLUSTER_TAG: "job-0123456789ab-1",
        ATTEMPT_TAG: "1",
        RANK_TAG: "1",
        "lambda-instance-id": nodes[1].tags["lambda-instance-id"],
    }
    assert all(n.state == "running" and n.ip.startswith("10.0.0.") for n in nodes)


def test_the_same_attempt_launched_twice_starts_one_set(
    provider: LambdaCloud, fake_lambda: FakeLambdaCloud
) -> None:
    first = provider.launch(spec(num_nodes=2))
    again = provider.launch(spec(num_nodes=2))

    assert [n.instance_id for n in again] == [n.instance_id for n in first]
    assert len(fake_lambda.launches) == 2
    assert len(fake_lambda.live()) == 2


def test_list_owned_sees_only_skyless_instances(provider: LambdaCloud, fake_lambda: FakeLambdaCloud) -> None:
    fake_lambda.instances["mine"] = {
        "id": "mine", "name": "my-notebook", "status": "active", "ip": "1.2.3.4", "private_ip": "10.9.9.9",
        "region": {"name": "us-east-1"}, "instance_type": {"name": "gpu_1x_a10"},
    }  # fmt: skip
    provider.launch(spec(num_nodes=1, attempt=1))
    provider.launch(spec(num_nodes=1, attempt=2))

    owned = provider.list_owned()

    assert sorted(n.cluster_id for n in owned) == ["job-0123456789ab-1", "job-0123456789ab-2"]
    assert {n.attempt for n in owned} == {1, 2}


def test_terminate_leaves_nothing_and_is_idempotent(
    provider: LambdaCloud, fake_lambda: FakeLambdaCloud
) -> None:
    provider.launch(spec(num_nodes=3))

    provider.terminate("job-0123456789ab-1")
    provider.terminate("job-0123456789ab-1")

    assert fake_lambda.live() == []
    assert provider.describe("job-0123456789ab-1") == []


def test_a_launch_that_runs_out_of_capacity_midway_terminates_what_it_started(
    provider: LambdaCloud, fake_lambda: FakeLambdaCloud
) -> None:
    fake_lambda.capacity_left["us-east-1"] = 1

    with pytest.raises(NoCapacityError, match="insufficient-capacity"):
        provider.launch(spec(num_nodes=2))

    assert fake_lambda.live() == []


def test_no_capacity_in_a_region_is_a_capacity_error(
    provider: LambdaCloud, fake_lambda: FakeLambdaCloud
) -> None:
    fake_lambda.no_capacity.add("us-east-1")

    with pytest.raises(NoCapacityError, match="Not enough capacity"):
        provider.launch(spec())
    assert len(provider.launch(spec(region="us-west-1"))) == 1


def test_quota_exceeded_is_a_quota_error(provider: LambdaCloud, fake_lambda: FakeLambdaCloud) -> None:
    fake_lambda.quota_exceeded.add("gpu_1x_a100")

    with pytest.raises(QuotaError, match="global/quota-exceeded"):
        provider.launch(spec())


def test_a_refused_api_key_is_an_auth_error(fake_lambda: FakeLambdaCloud) -> None:
    with pytest.raises(CloudAuthError, match="global/invalid-api-key"):
        LambdaCloud("wrong-key", base_url=fake_lambda.url).list_owned()


def test_no_api_key_at_all_is_an_auth_error_that_says_where_to_put_one(
    fake_lambda: FakeLambdaCloud, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("LAMBDA_API_KEY")
    monkeypatch.setenv("HOME", str(tmp_path))

    with pytest.raises(CloudAuthError, match="LAMBDA_API_KEY"):
        LambdaCloud.from_env().launch(spec())
    assert fake_lambda.requests == []


def test_throttling_is_transient(provider: LambdaCloud, fake_lambda: FakeLambdaCloud) -> None:
    fake_lambda.throttle_next = 1

    with pytest.raises(TransientCloudError):
        provider.launch(spec())


def test_an_unknown_ssh_key_is_an_invalid_launch(fake_lambda: FakeLambdaCloud) -> None:
    provider = LambdaCloud(fake_lambda.api_key, base_url=fake_lambda.url, ssh_key_name="nope")

    with pytest.raises(InvalidLaunchError, match="nope"):
        provider.launch(spec())


def test_spot_is_refused_as_invalid(provider: LambdaCloud) -> None:
    with pytest.raises(InvalidLaunchError, match="no spot"):
        provider.launch(spec(use_spot=True))


def test_without_any_ssh_key_one_named_skyless_is_created(fake_lambda: FakeLambdaCloud) -> None:
    LambdaCloud.from_env().launch(spec())

    assert [k["name"] for k in fake_lambda.ssh_keys] == ["skyless"]
    assert fake_lambda.launches[0]["ssh_key_names"] == ["skyless"]


def test_an_unreachable_endpoint_is_transient() -> None:
    with pytest.raises(TransientCloudError):
        LambdaCloud("key", base_url="http://127.0.0.1:9/api/v1").list_owned()


def test_the_boot_script_makes_the_agent_report_the_node_name_as_its_instance_id(
    provider: LambdaCloud, fake_lambda: FakeLambdaCloud, tmp_path: Path
) -> None:
    provider.launch(spec(num_nodes=2))
    script = fake_lambda.launches[1]["user_data"]
    # Run the script up to the agent start, in a scratch folder, and print what the agent would be given.
    head = script.split("\ntouch /var/log/skyless-agent.log", 1)[0].replace("/opt/skyless", str(tmp_path))
    probe = head + '\necho "$SKYLESS_INSTANCE_ID $SKYLESS_JOB_ID"\n'

    result = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30, check=True)

    assert result.stdout.split() == ["skyless-job-0123456789ab-1-001", "job-0123456789ab"]
    assert "def main(" in (tmp_path / "agent.py").read_text()  # the agent, shipped without its docstrings
