"""Azure provider against the fake Azure login and Resource Manager endpoints over real HTTP."""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path

import pytest
from conftest import QueueDriver
from fakes.azure import FakeAzure
from fakes.lambda_cloud import FakeLambdaCloud
from fakes.launch_specs import launch_spec
from fakes.runpod import FakeRunPod

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from shared.clouds.azure import AzureCompute, image_reference
from shared.clouds.base import ATTEMPT_TAG, CLUSTER_TAG, JOB_TAG, MANAGED_TAG, RANK_TAG, LaunchSpec
from shared.clouds.errors import (
    CloudAuthError,
    InvalidLaunchError,
    NoCapacityError,
    QuotaError,
    TransientCloudError,
)
from shared.config import Settings
from shared.jobs.cancellation import cancel_job
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import get_job
from shared.states import JobState
from shared.wiring import wiring_for

pytest_plugins = ["fakes.fixtures"]
CLUSTER = "job-0123456789ab-1"


def spec(num_nodes: int = 1, region: str = "eastus", **changes: object) -> LaunchSpec:
    changes.setdefault("instance_type", "Standard_NC4as_T4_v3")
    return launch_spec("azure", region, num_nodes=num_nodes, **changes)


@pytest.fixture
def provider(fake_azure: FakeAzure) -> AzureCompute:
    return AzureCompute.from_env()


def test_launch_creates_a_tagged_vm_with_nic_and_ip_running_the_agent_custom_data(
    provider: AzureCompute, fake_azure: FakeAzure
) -> None:
    nodes = provider.launch(spec(num_nodes=2))

    assert len(nodes) == 2 and all(n.instance_id.startswith(f"skyless-{CLUSTER}-00") for n in nodes)
    assert [n.tags[RANK_TAG] for n in nodes] == ["0", "1"]
    assert all(n.state == "running" and n.ip.startswith("10.0.") and not n.use_spot for n in nodes)
    body = fake_azure.vm_creates[0]
    properties = body["properties"]
    expected = {MANAGED_TAG: "true", JOB_TAG: "job-0123456789ab", CLUSTER_TAG: CLUSTER, ATTEMPT_TAG: "1"}
    assert body["tags"] == {**expected, RANK_TAG: "0"}
    assert properties["priority"] == "Regular" and "evictionPolicy" not in properties
    assert properties["hardwareProfile"] == {"vmSize": "Standard_NC4as_T4_v3"}
    assert properties["storageProfile"]["imageReference"]["publisher"] == "microsoft-dsvm"
    custom = base64.b64decode(properties["osProfile"]["customData"]).decode()
    assert "tok-123" in custom and "169.254.169.254/metadata/instance" in custom
    assert set(fake_azure.groups) == {"skyless-eastus"}
    assert len(fake_azure.live()["Microsoft.Network/networkInterfaces"]) == 2


def test_spot_vms_ask_for_spot_priority_eviction_delete_and_no_price_cap(
    provider: AzureCompute, fake_azure: FakeAzure
) -> None:
    nodes = provider.launch(spec(use_spot=True))

    properties = fake_azure.vm_creates[0]["properties"]
    assert (properties["priority"], properties["evictionPolicy"]) == ("Spot", "Delete")
    assert properties["billingProfile"] == {"maxPrice": -1}
    assert nodes[0].use_spot


def test_the_same_attempt_launched_twice_creates_one_set(
    provider: AzureCompute, fake_azure: FakeAzure
) -> None:
    first = provider.launch(spec(num_nodes=2))
    again = AzureCompute.from_env().launch(spec(num_nodes=2))

    assert [n.instance_id for n in again] == [n.instance_id for n in first]
    assert len(fake_azure.vm_creates) == 2


def test_list_owned_pages_through_vms_and_skips_foreign_ones(
    provider: AzureCompute, fake_azure: FakeAzure
) -> None:
    provider.launch(spec(num_nodes=2))
    provider.launch(spec(num_nodes=1, region="westus2", cluster_id="job-0123456789ab-2", attempt=2))
    fake_azure.resources["/x/mine"] = {
        "id": "/x/mine", "name": "mine", "type": "Microsoft.Compute/virtualMachines", "location": "eastus",
        "tags": {"team": "ml"}, "properties": {"provisioningState": "Succeeded"},
    }  # fmt: skip
    fake_azure.page_size = 1

    owned = provider.list_owned()

    assert len(owned) == 3 and {n.region for n in owned} == {"eastus", "westus2"}
    assert {n.attempt for n in owned} == {1, 2}


def test_terminate_deletes_vms_with_their_nics_ips_and_disks(
    provider: AzureCompute, fake_azure: FakeAzure
) -> None:
    provider.launch(spec(num_nodes=2, use_spot=True))

    provider.terminate(CLUSTER)
    provider.terminate(CLUSTER)

    assert fake_azure.live() == {}
    assert provider.describe(CLUSTER) == []


def test_terminate_also_deletes_a_nic_and_ip_left_by_a_launch_that_died_half_way(
    provider: AzureCompute, fake_azure: FakeAzure, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(*args: object) -> dict:
        raise RuntimeError("the function was killed before the VM PUT")

    monkeypatch.setattr(provider, "vm_body", crash)
    with pytest.raises(RuntimeError):
        provider.launch(spec())
    assert fake_azure.live() != {}

    provider.terminate(CLUSTER)

    assert fake_azure.live() == {}


def test_allocation_failure_is_a_capacity_error_and_leaves_nothing(
    provider: AzureCompute, fake_azure: FakeAzure
) -> None:
    fake_azure.allocation_failed_regions.add("eastus")

    with pytest.raises(NoCapacityError, match="AllocationFailed"):
        provider.launch(spec(num_nodes=2))

    assert fake_azure.live() == {}
    assert len(provider.launch(spec(region="westus2"))) == 1


def test_running_out_of_capacity_midway_deletes_what_the_launch_started(
    provider: AzureCompute, fake_azure: FakeAzure
) -> None:
    fake_azure.capacity_left["eastus"] = 1

    with pytest.raises(NoCapacityError):
        provider.launch(spec(num_nodes=2))
    assert fake_azure.live() == {}


def test_a_size_not_available_is_a_capacity_error(provider: AzureCompute, fake_azure: FakeAzure) -> None:
    fake_azure.sku_not_available.add("eastus/Standard_NC4as_T4_v3")

    with pytest.raises(NoCapacityError, match="SkuNotAvailable"):
        provider.launch(spec())
    assert fake_azure.live() == {}


def test_exceeding_cores_quota_is_a_quota_error(provider: AzureCompute, fake_azure: FakeAzure) -> None:
    fake_azure.quota_exceeded_sizes.add("Standard_NC4as_T4_v3")

    with pytest.raises(QuotaError, match="OperationNotAllowed"):
        provider.launch(spec())


def test_a_principal_without_a_role_is_an_auth_error(provider: AzureCompute, fake_azure: FakeAzure) -> None:
    fake_azure.forbidden = True

    with pytest.raises(CloudAuthError, match="AuthorizationFailed"):
        provider.launch(spec())


def test_a_wrong_client_secret_is_an_auth_error(
    fake_azure: FakeAzure, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_CLIENT_SECRET", "wrong")

    with pytest.raises(CloudAuthError, match="AADSTS7000215"):
        AzureCompute.from_env().list_owned()


def test_missing_credentials_are_an_auth_error_naming_the_variables(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AZURE_SUBSCRIPTION_ID", "s")
    monkeypatch.setenv("PATH", str(tmp_path))  # no az CLI either

    with pytest.raises(CloudAuthError, match="AZURE_CLIENT_SECRET"):
        AzureCompute.from_env().list_owned()


def test_throttling_is_transient(provider: AzureCompute, fake_azure: FakeAzure) -> None:
    fake_azure.throttle_next = 1

    with pytest.raises(TransientCloudError, match="TooManyRequests"):
        provider.launch(spec())


def test_an_invalid_vm_size_is_an_invalid_launch(provider: AzureCompute, fake_azure: FakeAzure) -> None:
    with pytest.raises(InvalidLaunchError, match="InvalidParameter"):
        provider.launch(spec(instance_type="nc4"))
    assert fake_azure.live() == {}


def test_image_ids_are_urns_or_resource_ids() -> None:
    assert image_reference("Canonical:ubuntu-24_04-lts:server:latest", "Standard_D2s_v5") == {
        "publisher": "Canonical", "offer": "ubuntu-24_04-lts", "sku": "server", "version": "latest",
    }  # fmt: skip
    assert image_reference("/subscriptions/s/images/x", "Standard_D2s_v5") == {
        "id": "/subscriptions/s/images/x"
    }
    assert image_reference(None, "Standard_D2s_v5")["publisher"] == "Canonical"
    with pytest.raises(InvalidLaunchError):
        image_reference("ubuntu", "Standard_D2s_v5")


A100_TASK = """
name: finetune
resources:
  accelerators: {A100: 1, A100-80GB: 1}
  any_of:
    - cloud: lambda
      region: us-east-1
    - cloud: runpod
      region: US-TX-3
    - cloud: azure
run: python finetune.py
"""


def test_a_job_with_no_capacity_on_lambda_and_runpod_lands_on_azure_and_cancel_leaves_nothing_anywhere(
    fake_lambda: FakeLambdaCloud,
    fake_runpod: FakeRunPod,
    fake_azure: FakeAzure,
    stack: Settings,
    queues: QueueDriver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    providers = "lambda=lambda,runpod=runpod,azure=azure"
    monkeypatch.setenv("SKYLESS_PROVIDERS", providers)
    settings = stack.with_(providers=providers)
    fake_lambda.no_capacity.add("*")
    fake_runpod.no_capacity.update({"NVIDIA A100 80GB PCIe", "NVIDIA A100-SXM4-80GB"})
    job_id = submit_job(
        wiring_for(settings),
        SubmitJob.from_text(owner="alice", task_text=A100_TASK, clouds=["lambda", "runpod", "azure"]),
    ).job_id
    assert optimize_handler(queues.event(queues.receive("optimize")), None) == {"batchItemFailures": []}
    plan = get_job(wiring_for(settings), job_id, owner=None).plan or {}
    order = [c["cloud"] for c in plan["tasks"][0]["candidates"]]
    assert order.index("lambda") < order.index("runpod") < order.index("azure")

    assert provision_handler(queues.event(queues.receive("provision")), None) == {"batchItemFailures": []}

    view = get_job(wiring_for(settings), job_id, owner=None)
    assert view.state == JobState.SETTING_UP and view.cluster is not None
    assert (view.cluster["cloud"], view.cluster["region"]) == ("azure", "eastus")
    assert fake_lambda.live() == [] and fake_runpod.live() == []
    assert len(fake_azure.live()["Microsoft.Compute/virtualMachines"]) == 1
    cancel_job(wiring_for(settings), job_id, owner=None)
    assert provision_handler(queues.event(queues.receive("provision")), None) == {"batchItemFailures": []}
    assert fake_azure.live() == {} and fake_lambda.live() == [] and fake_runpod.live() == []


def test_task_labels_become_tags_without_overriding_skylesss_own(
    provider: AzureCompute, fake_azure: FakeAzure
) -> None:
    provider.launch(spec(labels={"team": "ml", MANAGED_TAG: "false"}))

    tags = fake_azure.vm_creates[0]["tags"]
    assert tags["team"] == "ml" and tags[MANAGED_TAG] == "true"


def test_an_az_cli_login_is_used_when_there_is_no_service_principal(
    fake_azure: FakeAzure, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`az` here is a stand-in executable that prints what `az account get-access-token` prints."""
    fake_azure.tokens.add("cli-token")
    answer = json.dumps(
        {"accessToken": "cli-token", "expires_on": int(time.time()) + 3600, "tokenType": "Bearer"}
    )
    (tmp_path / "az").write_text(f"#!/bin/sh\necho '{answer}'\n")
    (tmp_path / "az").chmod(0o755)
    profile = {"subscriptions": [{"id": fake_azure.subscription, "name": "dev", "isDefault": True}]}
    (tmp_path / "azureProfile.json").write_text(json.dumps(profile))
    for name in ("AZURE_CLIENT_SECRET", "AZURE_SUBSCRIPTION_ID"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AZURE_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")

    assert len(AzureCompute.from_env().launch(spec())) == 1


def test_without_principal_or_az_the_auth_error_says_to_run_az_login(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AZURE_SUBSCRIPTION_ID", "s")
    monkeypatch.setenv("PATH", str(tmp_path))

    with pytest.raises(CloudAuthError, match="az login"):
        AzureCompute.from_env().list_owned()


def test_leftover_clusters_names_the_cluster_of_a_nic_and_ip_without_a_vm(
    provider: AzureCompute, fake_azure: FakeAzure, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(*args: object) -> dict:
        raise RuntimeError("killed before the VM PUT")

    monkeypatch.setattr(provider, "vm_body", crash)
    with pytest.raises(RuntimeError):
        provider.launch(spec())

    assert provider.list_owned() == []
    assert provider.leftover_clusters() == [("job-0123456789ab", CLUSTER)]
    provider.terminate(CLUSTER)
    assert provider.leftover_clusters() == []


def test_task_ports_get_a_security_group_on_every_nic_and_terminate_removes_it(
    provider: AzureCompute, fake_azure: FakeAzure
) -> None:
    provider.launch(spec(num_nodes=2, ports=("8080", "9000-9010")))

    [nsg] = [r for r in fake_azure.resources.values() if r["type"].endswith("networkSecurityGroups")]
    rules = nsg["properties"]["securityRules"]
    assert [r["properties"]["destinationPortRange"] for r in rules] == ["8080", "9000-9010"]
    assert all(
        r["properties"]["access"] == "Allow" and r["properties"]["direction"] == "Inbound" for r in rules
    )
    nics = [r for r in fake_azure.resources.values() if r["type"].endswith("networkInterfaces")]
    assert len(nics) == 2 and all(n["properties"]["networkSecurityGroup"]["id"] == nsg["id"] for n in nics)
    provider.terminate(CLUSTER)
    assert fake_azure.live() == {}


def test_a_failed_launch_with_ports_leaves_no_security_group(
    provider: AzureCompute, fake_azure: FakeAzure
) -> None:
    fake_azure.allocation_failed_regions.add("eastus")

    with pytest.raises(NoCapacityError):
        provider.launch(spec(ports=("8080",)))
    assert fake_azure.live() == {}
