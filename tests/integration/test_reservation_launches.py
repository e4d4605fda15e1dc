"""A plan's reserved place launches into its reservation on each cloud's API: the candidate the optimizer
chose under a team's contracts becomes the LaunchSpec the provisioner builds (`candidate_shape`), and each
provider puts the reservation into its request: EC2 RunInstances against moto's server (its parameters read
as they leave botocore), GCP's instances.insert and Azure's VM PUT against the fake endpoints over HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from fakes.azure import FakeAzure
from fakes.gcp import FakeGcp
from fakes.launch_specs import launch_spec

from shared.catalog.model import load_default_catalog, reset_default_catalog
from shared.clouds.aws import AwsCloud, AwsConfig
from shared.clouds.aws_images import forget_images
from shared.clouds.azure import AzureCompute
from shared.clouds.gcp import GcpCompute
from shared.jobs.launching import candidate_shape
from shared.optimizer import Candidate, TeamPrices, contracts_from_config, plan_pipeline
from shared.task import load_pipeline

pytest_plugins = ["fakes.fixtures"]
AZURE_GROUP = (
    "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ml/providers/"
    "Microsoft.Compute/capacityReservationGroups/t4-eastus"
)


@pytest.fixture(autouse=True)
def builtin_catalog(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SKYLESS_HOME", str(tmp_path / "home"))
    reset_default_catalog()
    yield
    reset_default_catalog()


def reserved_choice(instance_type: str, reservation: dict[str, Any]) -> Candidate:
    """The chosen candidate of a one-node task on `instance_type` with `reservation` declared."""
    contracts = contracts_from_config({"contracts": {"reservations": [reservation]}}, "config.yaml")
    task = f"resources:\n  instance_type: {instance_type}\nrun: python serve.py\n"
    plan = plan_pipeline(
        load_pipeline(task, filename="t.yaml"), load_default_catalog(), prices=TeamPrices(contracts)
    )
    chosen = plan.tasks[0].chosen
    assert chosen.reservation == reservation["id"] and chosen.hourly_price == 0
    return chosen


def spec_for(candidate: Candidate) -> Any:
    shape = candidate_shape(candidate)  # what the provisioner passes on from the plan
    spec = launch_spec(shape.pop("cloud"), shape.pop("region"), instance_type=shape.pop("instance_type"))
    return replace(spec, **shape)


@pytest.fixture
def aws(moto_endpoint: str) -> Iterator[AwsCloud]:
    forget_images()
    cloud = AwsCloud(AwsConfig(regions=("us-east-1",), endpoint_url=moto_endpoint))
    yield cloud
    for cluster_id in {n.cluster_id for n in cloud.list_owned()}:
        cloud.terminate(cluster_id)


def run_instances_params(cloud: AwsCloud) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        calls.append(json.loads(json.dumps(params, default=str)))

    cloud.client("us-east-1").meta.events.register("before-parameter-build.ec2.RunInstances", record)
    return calls


def test_aws_launches_into_the_capacity_reservation_the_plan_chose(aws: AwsCloud) -> None:
    chosen = reserved_choice(
        "m6i.large", {"id": "cr-0123456789abcdef0", "cloud": "aws", "zone": "us-east-1b",
                     "instance_type": "m6i.large", "count": 4}
    )  # fmt: skip
    calls = run_instances_params(aws)
    nodes = aws.launch(spec_for(chosen))
    assert len(nodes) == 1 and nodes[0].zone == "us-east-1b"
    assert calls[0]["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": "cr-0123456789abcdef0"}
    }
    assert "InstanceMarketOptions" not in calls[0]  # on-demand capacity, already paid


def test_aws_capacity_blocks_are_launched_in_the_capacity_block_market(aws: AwsCloud) -> None:
    chosen = reserved_choice(
        "m6i.large", {"id": "cr-0b10c4", "cloud": "aws", "zone": "us-east-1a", "instance_type": "m6i.large",
                     "count": 2, "kind": "capacity-block"}
    )  # fmt: skip
    calls = run_instances_params(aws)
    aws.launch(spec_for(chosen))
    assert calls[0]["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert calls[0]["CapacityReservationSpecification"]["CapacityReservationTarget"] == {
        "CapacityReservationId": "cr-0b10c4"
    }


def test_gcp_inserts_vms_with_a_specific_reservation_affinity(fake_gcp: FakeGcp) -> None:
    chosen = reserved_choice(
        "n2-standard-8", {"id": "projects/ml/reservations/n2-pool", "cloud": "gcp", "zone": "us-central1-a",
                          "instance_type": "n2-standard-8", "count": 2}
    )  # fmt: skip
    GcpCompute.from_env().launch(spec_for(chosen))
    assert fake_gcp.inserts[0]["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["projects/ml/reservations/n2-pool"],
    }
    assert fake_gcp.inserts[0]["machineType"] == "zones/us-central1-a/machineTypes/n2-standard-8"


def test_azure_puts_vms_in_the_capacity_reservation_group(fake_azure: FakeAzure) -> None:
    chosen = reserved_choice(
        "Standard_NC4as_T4_v3", {"id": AZURE_GROUP, "cloud": "azure", "region": "eastus",
                                 "instance_type": "Standard_NC4as_T4_v3", "count": 3}
    )  # fmt: skip
    AzureCompute.from_env().launch(spec_for(chosen))
    properties = fake_azure.vm_creates[0]["properties"]
    assert properties["capacityReservation"] == {"capacityReservationGroup": {"id": AZURE_GROUP}}
    assert properties["priority"] == "Regular"


def test_a_list_price_launch_names_no_reservation(fake_gcp: FakeGcp) -> None:
    GcpCompute.from_env().launch(
        launch_spec("gcp", "us-central1", zone="us-central1-a", instance_type="n2-standard-8")
    )
    assert "reservationAffinity" not in fake_gcp.inserts[0]
