"""The AWS EC2 provider against moto in server mode (real HTTP, boto3 as in production).

EC2 errors are injected at the boto layer: a `before-call` hook answers with EC2's error body and HTTP
status, so botocore raises the very ClientError a real refusal produces.
"""

from __future__ import annotations

import base64
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse

from shared.aws import sessions
from shared.clouds.aws import AwsCloud, AwsConfig, client_token
from shared.clouds.aws_errors import ERROR_CODES, ERROR_PREFIXES, error_class_for
from shared.clouds.aws_images import forget_images
from shared.clouds.base import LaunchSpec
from shared.clouds.errors import (
    CloudAuthError,
    InvalidLaunchError,
    NoCapacityError,
    QuotaError,
    TransientCloudError,
)

REGIONS = ("us-east-1", "us-west-2")
SERVER_SIDE = {"InternalError": 500, "ServiceUnavailable": 503}  # what EC2 answers them with
AGENT_ENV = {"SKYLESS_API_URL": "https://api.example.com", "SKYLESS_BOOT_TOKEN": "token-123"}


def make_spec(**changes: Any) -> LaunchSpec:
    job_id = changes.pop("job_id", f"job-{uuid.uuid4().hex[:12]}")
    attempt = changes.pop("attempt", 0)
    fields: dict[str, Any] = {
        "job_id": job_id,
        "cluster_id": f"{job_id}-{attempt}",
        "attempt_id": f"{job_id}-{attempt}",
        "attempt": attempt,
        "cloud": "aws",
        "region": "us-east-1",
        "zone": "us-east-1a",
        "instance_type": "m5.large",
        "use_spot": False,
        "num_nodes": 1,
        "agent_env": dict(AGENT_ENV),
    }
    fields.update(changes)
    return LaunchSpec(**fields)


def answer_with_error(code: str, status: int = 400) -> Callable[..., Any]:
    """A before-call hook: EC2's error, as botocore would have parsed it off the wire."""

    def hook(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        body = {
            "Error": {"Code": code, "Message": f"injected {code}"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }
        return AWSResponse("https://ec2.amazonaws.com/", status, {}, None), body

    return hook


def fail_run_instances(cloud: AwsCloud, region: str, codes: list[str]) -> list[dict[str, Any]]:
    """The next len(codes) RunInstances calls in `region` fail with those codes, in order; the calls
    that reach EC2 (theirs and later ones) are recorded with their parameters."""
    pending = list(codes)
    calls: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        calls.append(json.loads(json.dumps(params, default=str)))

    def maybe_fail(**kwargs: Any) -> Any:
        if pending:
            code = pending.pop(0)
            return answer_with_error(code, SERVER_SIDE.get(code, 400))(**kwargs)
        return None

    events = cloud.client(region).meta.events
    events.register("before-parameter-build.ec2.RunInstances", record)
    events.register("before-call.ec2.RunInstances", maybe_fail)
    return calls


@pytest.fixture
def aws(moto_endpoint: str) -> Iterator[AwsCloud]:
    forget_images()
    cloud = AwsCloud(AwsConfig(regions=REGIONS, endpoint_url=moto_endpoint))
    yield cloud
    for cluster_id in {n.cluster_id for n in cloud.list_owned()}:
        cloud.terminate(cluster_id)


def ec2(moto_endpoint: str, region: str = "us-east-1") -> Any:
    return boto3.client("ec2", region_name=region, endpoint_url=moto_endpoint)


def instances_of(moto_endpoint: str, cluster_id: str, region: str = "us-east-1") -> list[dict[str, Any]]:
    filters = [
        {"Name": "tag:skyless-cluster", "Values": [cluster_id]},
        {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]},
    ]
    pages = ec2(moto_endpoint, region).describe_instances(Filters=filters)["Reservations"]
    return [i for r in pages for i in r["Instances"]]


def tags_of(resource: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in resource.get("Tags", [])}


def test_on_demand_launch_tags_instances_and_volumes_and_user_data_starts_the_agent(
    aws: AwsCloud, moto_endpoint: str
) -> None:
    spec = make_spec(disk_size_gb=300, labels={"team": "ml"})
    [node] = aws.launch(spec)
    assert (node.cloud, node.region, node.zone) == ("aws", "us-east-1", "us-east-1a")
    assert node.instance_type == "m5.large"
    assert node.state == "running" and not node.use_spot and node.ip
    [instance] = instances_of(moto_endpoint, spec.cluster_id)
    assert "InstanceLifecycle" not in instance
    expected = {"skyless-managed": "true", "skyless-job": spec.job_id, "skyless-cluster": spec.cluster_id,
                "skyless-attempt": "0", "team": "ml"}  # fmt: skip
    assert tags_of(instance).items() >= expected.items()
    volumes = ec2(moto_endpoint).describe_volumes(
        Filters=[{"Name": "tag:skyless-cluster", "Values": [spec.cluster_id]}]
    )["Volumes"]
    assert [v["Size"] for v in volumes] == [300]
    assert tags_of(volumes[0])["skyless-job"] == spec.job_id
    raw = ec2(moto_endpoint).describe_instance_attribute(InstanceId=node.instance_id, Attribute="userData")
    script = base64.b64decode(raw["UserData"]["Value"]).decode()
    assert script.startswith("#!/bin/bash")
    assert f"export SKYLESS_JOB_ID={spec.job_id}" in script
    assert "export SKYLESS_BOOT_TOKEN=token-123" in script
    assert "export SKYLESS_API_URL=https://api.example.com" in script
    assert "sudo -E -H -u ubuntu setsid python3 /opt/skyless/agent.py" in script


def test_spot_launch_asks_for_a_one_time_spot_instance(aws: AwsCloud, moto_endpoint: str) -> None:
    calls = fail_run_instances(aws, "us-east-1", [])
    spec = make_spec(use_spot=True, instance_type="c6i.xlarge")
    [node] = aws.launch(spec)
    assert node.use_spot
    [instance] = instances_of(moto_endpoint, spec.cluster_id)
    assert instance["InstanceLifecycle"] == "spot"
    options = calls[0]["InstanceMarketOptions"]
    assert options == {
        "MarketType": "spot",
        "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"},
    }


def test_multi_node_launch_is_one_request_in_one_zone_with_ranks_in_instance_id_order(
    aws: AwsCloud, moto_endpoint: str
) -> None:
    calls = fail_run_instances(aws, "us-east-1", [])
    spec = make_spec(num_nodes=3, zone="us-east-1c")
    nodes = aws.launch(spec)
    assert len(calls) == 1 and calls[0]["MinCount"] == calls[0]["MaxCount"] == 3
    instances = sorted(instances_of(moto_endpoint, spec.cluster_id), key=lambda i: i["InstanceId"])
    assert {i["Placement"]["AvailabilityZone"] for i in instances} == {"us-east-1c"}
    assert len({i["SubnetId"] for i in instances}) == 1
    assert not any("skyless-rank" in tags_of(i) for i in instances)  # tagged only by the creating call
    assert [n.instance_id for n in nodes] == [i["InstanceId"] for i in instances]


def test_the_cluster_security_group_opens_only_the_task_ports_and_the_cluster_to_itself(
    aws: AwsCloud, moto_endpoint: str
) -> None:
    spec = make_spec(ports=("8080", "10000-10010"))
    aws.launch(spec)
    [instance] = instances_of(moto_endpoint, spec.cluster_id)
    [group_ref] = instance["SecurityGroups"]
    [group] = ec2(moto_endpoint).describe_security_groups(GroupIds=[group_ref["GroupId"]])["SecurityGroups"]
    assert tags_of(group)["skyless-cluster"] == spec.cluster_id
    world = sorted((p["FromPort"], p["ToPort"]) for p in group["IpPermissions"] if p.get("IpRanges"))
    assert world == [(8080, 8080), (10000, 10010)]  # no SSH, nothing else
    peers = [p for p in group["IpPermissions"] if p.get("UserIdGroupPairs")]
    assert [p["IpProtocol"] for p in peers] == ["-1"]
    assert peers[0]["UserIdGroupPairs"][0]["GroupId"] == group["GroupId"]


def test_bad_ports_are_an_invalid_launch_naming_the_field(aws: AwsCloud) -> None:
    with pytest.raises(InvalidLaunchError, match=r"resources\.ports: '80-x'"):
        aws.launch(make_spec(ports=("80-x",)))


def test_relaunching_the_same_attempt_starts_nothing_new(aws: AwsCloud, moto_endpoint: str) -> None:
    calls = fail_run_instances(aws, "us-east-1", [])
    spec = make_spec(num_nodes=2)
    first = aws.launch(spec)
    again = aws.launch(spec)
    assert [n.instance_id for n in again] == [n.instance_id for n in first]
    assert len(instances_of(moto_endpoint, spec.cluster_id)) == 2
    assert len(calls) == 1 and calls[0]["ClientToken"] == client_token(spec)


def test_the_client_token_is_the_attempt_id_plus_the_candidate() -> None:
    spec = make_spec()
    assert client_token(spec).startswith(spec.attempt_id + "-")
    assert client_token(spec) == client_token(make_spec(job_id=spec.job_id))
    assert client_token(spec) != client_token(make_spec(job_id=spec.job_id, zone="us-east-1b"))
    assert len(client_token(make_spec(job_id="job-" + "x" * 80))) <= 64


def test_the_next_candidate_of_the_same_attempt_ends_what_an_earlier_candidate_left(
    aws: AwsCloud, moto_endpoint: str
) -> None:
    spec = make_spec()
    [stray] = aws.launch(spec)
    [node] = aws.launch(make_spec(job_id=spec.job_id, zone="us-east-1b"))
    live = instances_of(moto_endpoint, spec.cluster_id)
    assert [i["InstanceId"] for i in live] == [node.instance_id] != [stray.instance_id]


def test_terminate_leaves_no_instance_and_no_security_group_and_is_idempotent(
    aws: AwsCloud, moto_endpoint: str
) -> None:
    spec = make_spec(num_nodes=2, ports=("8888",))
    aws.launch(spec)
    aws.terminate(spec.cluster_id)
    assert instances_of(moto_endpoint, spec.cluster_id) == []
    groups = ec2(moto_endpoint).describe_security_groups(
        Filters=[{"Name": "tag:skyless-cluster", "Values": [spec.cluster_id]}]
    )["SecurityGroups"]
    assert groups == []
    assert aws.describe(spec.cluster_id) == []
    aws.terminate(spec.cluster_id)  # again: nothing to do, no error
    assert spec.cluster_id not in {n.cluster_id for n in aws.list_owned()}


def test_list_owned_and_describe_find_nodes_in_every_configured_region(aws: AwsCloud) -> None:
    east = make_spec()
    west = make_spec(region="us-west-2", zone="us-west-2b")
    aws.launch(east)
    aws.launch(west)
    owned = {(n.cluster_id, n.region) for n in aws.list_owned()}
    assert {(east.cluster_id, "us-east-1"), (west.cluster_id, "us-west-2")} <= owned
    [node] = aws.describe(west.cluster_id)
    assert (node.region, node.zone, node.job_id) == ("us-west-2", "us-west-2b", west.job_id)


def test_list_owned_reads_every_page_of_instances(aws: AwsCloud) -> None:
    specs = [make_spec() for _ in range(3)]
    for spec in specs:
        aws.launch(spec)
    calls: list[dict[str, Any]] = []

    def one_reservation_a_page(params: dict[str, Any], **_: Any) -> None:
        params["MaxResults"] = 1
        calls.append(dict(params))

    events = aws.client("us-east-1").meta.events
    events.register("provide-client-params.ec2.DescribeInstances", one_reservation_a_page)
    try:
        owned = {n.cluster_id for n in aws.list_owned() if n.region == "us-east-1"}
    finally:
        events.unregister("provide-client-params.ec2.DescribeInstances", one_reservation_a_page)
    assert {spec.cluster_id for spec in specs} <= owned
    assert len(calls) >= 3 and any("NextToken" in call for call in calls)


def test_gpu_types_boot_a_deep_learning_image_and_cpu_types_ubuntu(aws: AwsCloud, moto_endpoint: str) -> None:
    gpu = make_spec(instance_type="p3.2xlarge")
    cpu = make_spec()
    aws.launch(gpu)
    aws.launch(cpu)
    client = ec2(moto_endpoint)

    def image_name(spec: LaunchSpec) -> str:
        image_id = instances_of(moto_endpoint, spec.cluster_id)[0]["ImageId"]
        return client.describe_images(ImageIds=[image_id])["Images"][0]["Name"]

    assert image_name(gpu).startswith("Deep Learning")
    assert image_name(cpu).startswith("ubuntu/images/")


def test_image_id_override_single_and_per_region_forms(aws: AwsCloud, moto_endpoint: str) -> None:
    image = ec2(moto_endpoint).describe_images(Owners=["099720109477"])["Images"][0]["ImageId"]
    single = make_spec(image_id=image)
    per_region = make_spec(image_id={"us-east-1": image, "eu-west-1": "ami-12345678"})
    aws.launch(single)
    aws.launch(per_region)
    assert instances_of(moto_endpoint, single.cluster_id)[0]["ImageId"] == image
    assert instances_of(moto_endpoint, per_region.cluster_id)[0]["ImageId"] == image
    with pytest.raises(NoCapacityError, match="no image for region us-east-1"):
        aws.launch(make_spec(image_id={"eu-west-1": "ami-12345678"}))
    with pytest.raises(InvalidLaunchError, match="InvalidAMIID"):
        aws.launch(make_spec(image_id="ami-0000000000deadbee"))


def test_the_instance_profile_from_configuration_is_attached(moto_endpoint: str) -> None:
    iam = boto3.client("iam", region_name="us-east-1", endpoint_url=moto_endpoint)
    name = f"skyless-node-{uuid.uuid4().hex[:6]}"
    arn = iam.create_instance_profile(InstanceProfileName=name)["InstanceProfile"]["Arn"]
    cloud = AwsCloud(AwsConfig(regions=REGIONS, endpoint_url=moto_endpoint, instance_profile=name))
    spec = make_spec()
    try:
        cloud.launch(spec)
        [instance] = instances_of(moto_endpoint, spec.cluster_id)
        assert instance["IamInstanceProfile"]["Arn"] == arn
    finally:
        cloud.terminate(spec.cluster_id)


def test_a_region_outside_the_swept_ones_is_refused_before_anything_starts(
    aws: AwsCloud, moto_endpoint: str
) -> None:
    spec = make_spec(region="eu-west-1", zone="eu-west-1a")
    with pytest.raises(QuotaError, match="SKYLESS_AWS_REGIONS"):
        aws.launch(spec)
    assert instances_of(moto_endpoint, spec.cluster_id, region="eu-west-1") == []


def test_without_an_api_url_the_launch_is_invalid(aws: AwsCloud) -> None:
    with pytest.raises(InvalidLaunchError, match="SKYLESS_API_URL"):
        aws.launch(make_spec(agent_env={}))


EXPECTED = {
    "InsufficientInstanceCapacity": NoCapacityError,
    "InsufficientCapacity": NoCapacityError,
    "SpotMaxPriceTooLow": NoCapacityError,
    "Unsupported": NoCapacityError,
    "MaxSpotInstanceCountExceeded": QuotaError,
    "VcpuLimitExceeded": QuotaError,
    "InstanceLimitExceeded": QuotaError,
    "UnauthorizedOperation": CloudAuthError,
    "AuthFailure": CloudAuthError,
    "RequestLimitExceeded": TransientCloudError,
    "InternalError": TransientCloudError,
    "ServiceUnavailable": TransientCloudError,
    "InvalidParameterCombination": InvalidLaunchError,
    "InvalidAMIID.NotFound": InvalidLaunchError,
    "InvalidAMIID.Malformed": InvalidLaunchError,
}


@pytest.mark.parametrize("code", sorted(EXPECTED))
def test_each_ec2_error_code_raises_its_taxonomy_class_and_leaves_no_group(
    code: str, aws: AwsCloud, moto_endpoint: str
) -> None:
    fail_run_instances(aws, "us-east-1", [code])
    spec = make_spec()
    with pytest.raises(EXPECTED[code]) as raised:
        aws.launch(spec)
    assert raised.value.message.startswith(f"{code}: injected {code}")
    assert instances_of(moto_endpoint, spec.cluster_id) == []
    groups = ec2(moto_endpoint).describe_security_groups(
        Filters=[{"Name": "tag:skyless-cluster", "Values": [spec.cluster_id]}]
    )["SecurityGroups"]
    assert groups == []


def test_the_error_table_covers_every_documented_code_and_unknown_codes_go_by_status() -> None:
    for code, kind in EXPECTED.items():
        assert error_class_for(code) is kind
    assert set(EXPECTED) - set(ERROR_CODES) <= {"InvalidAMIID.NotFound", "InvalidAMIID.Malformed"}
    assert "InvalidAMIID." in ERROR_PREFIXES
    assert error_class_for("SomethingNew", 503) is TransientCloudError
    assert error_class_for("SomethingNew", 400) is InvalidLaunchError


def test_missing_credentials_are_an_auth_error(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setattr(sessions, "_local", threading.local())  # a process started without credentials
    cloud = AwsCloud(AwsConfig(regions=REGIONS, endpoint_url=moto_endpoint))
    with pytest.raises(CloudAuthError, match="credentials"):
        cloud.launch(make_spec())
