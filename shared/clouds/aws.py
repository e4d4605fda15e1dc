"""The AWS EC2 provider (boto3): on-demand and one-time spot instances, found and ended by tag.

Configuration (environment, read once per process):
  SKYLESS_AWS_REGIONS          regions to list and terminate in (comma-separated; default: the account's
                               enabled regions, from DescribeRegions)
  SKYLESS_AWS_INSTANCE_PROFILE the instance profile nodes get (name or ARN; the SAM template's
                               NodeInstanceProfile grants nothing). When set, only instances carrying it
                               are skyless's: tags anyone could add do not make an instance ours to end.
  SKYLESS_AWS_EC2_ENDPOINT     an EC2 endpoint other than AWS_ENDPOINT_URL ("aws" = the real one, for a
                               local control plane that drives real EC2)
  SKYLESS_AWS_RUN_AS           the login user of the image the agent runs as (default "ubuntu")
  SKYLESS_AWS_DISK_GB          root disk size when the task names none (default 256, as SkyPilot)

Idempotency: a launch first looks for live instances tagged with the cluster; then RunInstances carries a
ClientToken made of the attempt id and the candidate (zone, type, spot), so a redelivered message never
starts a second cluster, and the next candidate of the same attempt is a different request to EC2.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import boto3
from botocore.config import Config

from node_agent.user_data import render_user_data
from shared.aws.service_models import EC2_API_VERSION
from shared.aws.sessions import boto3_session
from shared.clouds.aws_errors import ec2_errors
from shared.clouds.aws_images import find_image, requested_image
from shared.clouds.aws_network import (
    cluster_agent_env,
    delete_security_group,
    ensure_security_group,
    find_security_groups,
    open_port_22,
    parse_ports,
    tag_list,
    zone_subnet,
)
from shared.clouds.base import CLUSTER_TAG, JOB_TAG, MANAGED_TAG, LaunchSpec, Node, ranked
from shared.clouds.errors import InvalidLaunchError, NoCapacityError, QuotaError
from shared.clouds.spec_fields import container_image_for
from shared.config import Settings
from shared.config.clouds import DEFAULT_AWS_DISK_GB, AwsConfig

LIVE_STATES = ("pending", "running", "stopping", "stopped")
RUNNING_STATES = ("pending", "running")
DEFAULT_DISK_GB = DEFAULT_AWS_DISK_GB
MAX_REGION_THREADS = 8
T = TypeVar("T")
CLIENT_CONFIG = Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=5, read_timeout=30)


def client_token(spec: LaunchSpec) -> str:
    """The attempt id plus the candidate, within EC2's 64 characters."""
    market = "spot" if spec.use_spot else "on-demand"
    place = f"{spec.region}/{spec.zone}/{spec.instance_type}/{market}/{spec.num_nodes}"
    token = f"{spec.attempt_id}-{hashlib.sha256(place.encode()).hexdigest()[:12]}"
    return token if len(token) <= 64 else hashlib.sha256(token.encode()).hexdigest()


class AwsCloud:
    name = "aws"

    def __init__(self, config: AwsConfig, session: boto3.session.Session | None = None) -> None:
        self.config = config
        self._session = session
        self._clients: dict[str, Any] = {}
        self._regions: tuple[str, ...] = config.regions

    @classmethod
    def from_settings(cls, settings: Settings) -> AwsCloud:
        return cls(AwsConfig.from_env(settings))

    @property
    def session(self) -> boto3.session.Session:
        """The session given, else the thread's shared one: a session of its own would load the endpoint
        rules again at a cold start (shared.aws.sessions)."""
        return self._session or boto3_session()

    def client(self, region: str) -> Any:
        """The EC2 client of one region, made on first use and kept while the process is warm; from the
        shared session, on the EC2 model cut to what this provider calls (shared.aws.service_models)."""
        if region not in self._clients:
            version = None if self._session else EC2_API_VERSION
            self._clients[region] = self.session.client(
                "ec2", region_name=region, endpoint_url=self.config.endpoint_url, config=CLIENT_CONFIG,
                api_version=version,
            )  # fmt: skip
        return self._clients[region]

    def regions(self) -> tuple[str, ...]:
        if not self._regions:
            with ec2_errors():
                answer = self.client(self.config.home_region).describe_regions()
            self._regions = tuple(sorted(r["RegionName"] for r in answer["Regions"]))
        return self._regions

    # -- the protocol ----------------------------------------------------------------------

    def launch(self, spec: LaunchSpec) -> list[Node]:
        if spec.region not in self.regions():  # what list and terminate never look at would leak
            raise QuotaError(f"region {spec.region} is not among those skyless sweeps (SKYLESS_AWS_REGIONS)")
        ec2 = self.client(spec.region)
        with ec2_errors():
            live = self._instances(ec2, {CLUSTER_TAG: spec.cluster_id}, LIVE_STATES)
            mine = [i for i in live if _fits(i, spec)]
            strays = [i["InstanceId"] for i in live if not _fits(i, spec)]
            if strays:  # an earlier candidate of this attempt that EC2 started after all
                ec2.terminate_instances(InstanceIds=strays)
            if mine:
                if len(mine) < spec.num_nodes:
                    left = f"{len(mine)} of {spec.num_nodes}"
                    raise NoCapacityError(f"cluster {spec.cluster_id} has {left} nodes left (reclaimed)")
                return self._nodes(mine, spec.region)
            return self._run(ec2, spec)

    def terminate(self, cluster_id: str) -> None:
        def terminate_in(region: str, ec2: Any) -> list[None]:
            ids = [i["InstanceId"] for i in self._instances(ec2, {CLUSTER_TAG: cluster_id}, LIVE_STATES)]
            if ids:
                ec2.terminate_instances(InstanceIds=ids)
            for group in find_security_groups(ec2, cluster_id):
                delete_security_group(ec2, group["GroupId"])
            return []

        self._each_region(terminate_in)

    def describe(self, cluster_id: str) -> list[Node]:
        return self._find({CLUSTER_TAG: cluster_id})

    def list_owned(self) -> list[Node]:
        return self._find({MANAGED_TAG: "true"})

    def leftover_clusters(self) -> list[tuple[str, str]]:
        """(job id, cluster id) of skyless security groups whose cluster has no live instance: what a
        terminate left because EC2 still held the group for a shutting-down instance."""

        def leftovers_in(region: str, ec2: Any) -> list[tuple[str, str]]:
            groups = find_security_groups(ec2)
            if not groups:
                return []
            owned = self._instances(ec2, {MANAGED_TAG: "true"}, LIVE_STATES)
            live = {_tags(instance).get(CLUSTER_TAG) for instance in owned} | {None}
            tags = [_tags(group) for group in groups]
            return [(t.get(JOB_TAG, ""), t[CLUSTER_TAG]) for t in tags if t.get(CLUSTER_TAG) not in live]

        return self._each_region(leftovers_in)

    # -- named clusters: stop, start, SSH ---------------------------------------------------

    def stop(self, cluster_id: str) -> None:
        """StopInstances on every running node of the cluster (EBS volumes kept). Idempotent."""

        def stop_in(region: str, ec2: Any) -> list[None]:
            ids = [i["InstanceId"] for i in self._instances(ec2, {CLUSTER_TAG: cluster_id}, RUNNING_STATES)]
            if ids:
                ec2.stop_instances(InstanceIds=ids)
            return []

        self._each_region(stop_in)

    def start(self, cluster_id: str, agent_env: dict[str, str]) -> list[Node]:
        """StartInstances on the cluster's stopped nodes; the agent comes back from user-data at boot (it
        keeps its token: `agent_env` is not needed on EC2). Idempotent."""

        def start_in(region: str, ec2: Any) -> list[Node]:
            found = self._instances(ec2, {CLUSTER_TAG: cluster_id}, LIVE_STATES)
            stopped = [i["InstanceId"] for i in found if i["State"]["Name"] in ("stopping", "stopped")]
            if stopped:
                ec2.start_instances(InstanceIds=stopped)
                found = self._instances(ec2, {CLUSTER_TAG: cluster_id}, LIVE_STATES)
            return self._nodes(found, region)

        nodes = ranked(self._each_region(start_in))
        if not nodes:
            raise InvalidLaunchError(f"aws: cluster {cluster_id} has no instance to start (terminated?)")
        return nodes

    def open_ssh(self, cluster_id: str, cidr: str) -> None:
        """Let `cidr` (the caller's address) reach port 22 of the cluster's nodes, and nobody else."""

        def open_in(region: str, ec2: Any) -> list[None]:
            for group in find_security_groups(ec2, cluster_id):
                open_port_22(ec2, group["GroupId"], cidr)
            return []

        self._each_region(open_in)

    # -- EC2 calls -------------------------------------------------------------------------

    def _run(self, ec2: Any, spec: LaunchSpec) -> list[Node]:
        api_url = spec.agent_env.get("SKYLESS_API_URL")
        if not api_url:
            raise InvalidLaunchError("aws: no API URL for the node agents (SKYLESS_API_URL)")
        image = find_image(ec2, spec.region, spec.instance_type, requested_image(spec.image_id, spec.region))
        tags = {**spec.labels, **spec.tags(), "Name": spec.cluster_id}
        subnet_id, vpc_id = zone_subnet(ec2, spec.zone)
        group_id = ensure_security_group(ec2, spec.cluster_id, vpc_id, parse_ports(spec.ports), tags)
        request: dict[str, Any] = {
            "ImageId": image.image_id,
            "InstanceType": spec.instance_type,
            "MinCount": spec.num_nodes,  # all or nothing, in one zone
            "MaxCount": spec.num_nodes,
            "ClientToken": client_token(spec),
            "SecurityGroupIds": [group_id],
            "UserData": render_user_data(
                api_url=api_url,
                job_id=spec.job_id,
                cluster_id=spec.cluster_id,
                boot_token=spec.agent_env.get("SKYLESS_BOOT_TOKEN", ""),
                cloud="aws",
                run_as=self.config.run_as,
                extra_env=cluster_agent_env(spec.agent_env),
                container=container_image_for(spec) is not None,
            ),
            "BlockDeviceMappings": [
                {
                    "DeviceName": image.root_device,
                    "Ebs": {
                        "VolumeSize": spec.disk_size_gb or self.config.default_disk_gb,
                        "VolumeType": "gp3",
                        "DeleteOnTermination": True,
                    },
                }
            ],
            "TagSpecifications": [
                {"ResourceType": "instance", "Tags": tag_list(tags)},
                {"ResourceType": "volume", "Tags": tag_list(tags)},
            ],
            "InstanceInitiatedShutdownBehavior": "terminate",
            "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},
        }
        if subnet_id:
            request["SubnetId"] = subnet_id
        elif spec.zone:
            request["Placement"] = {"AvailabilityZone": spec.zone}
        if spec.use_spot:
            request["InstanceMarketOptions"] = {
                "MarketType": "spot",
                "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"},
            }
        if spec.reservation:
            target = {"CapacityReservationId": spec.reservation}
            request["CapacityReservationSpecification"] = {"CapacityReservationTarget": target}
            if spec.reservation_kind == "capacity-block":
                request["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
        profile = self.config.instance_profile
        if profile:
            key = "Arn" if profile.startswith("arn:") else "Name"
            request["IamInstanceProfile"] = {key: profile}
        try:
            instances = ec2.run_instances(**request)["Instances"]
        except Exception:
            # Nothing started: drop the group now rather than leave it to the reaper (best effort).
            with contextlib.suppress(Exception):
                if not self._instances(ec2, {CLUSTER_TAG: spec.cluster_id}, LIVE_STATES):
                    delete_security_group(ec2, group_id)
            raise
        alive = [i for i in instances if i["State"]["Name"] in LIVE_STATES]
        if not alive:
            raise NoCapacityError(f"the instances of launch {client_token(spec)} were already reclaimed")
        # Ranks are the order of instance ids (`ranked`): no tag written after launch, since the role may
        # tag only what its RunInstances call creates.
        return self._nodes(alive, spec.region)

    def _instances(self, ec2: Any, tags: dict[str, str], states: tuple[str, ...]) -> list[dict[str, Any]]:
        filters = [{"Name": f"tag:{key}", "Values": [value]} for key, value in tags.items()]
        filters.append({"Name": "instance-state-name", "Values": list(states)})
        found: list[dict[str, Any]] = []
        request: dict[str, Any] = {"Filters": filters}
        while True:  # pages by hand: a paginator loads its own model, ~12 ms of a cold start's CPU
            page = ec2.describe_instances(**request)
            for reservation in page["Reservations"]:
                found += [i for i in reservation["Instances"] if self._launched_by_skyless(i)]
            if not page.get("NextToken"):
                return found
            request["NextToken"] = page["NextToken"]

    def _launched_by_skyless(self, instance: dict[str, Any]) -> bool:
        """Launched with the nodes' instance profile, which only skyless's provision role may pass."""
        profile = self.config.instance_profile
        if not profile:
            return True
        arn = (instance.get("IamInstanceProfile") or {}).get("Arn", "")
        return arn == profile if profile.startswith("arn:") else arn.endswith(f"/{profile}")

    def _find(self, tags: dict[str, str]) -> list[Node]:
        def find_in(region: str, ec2: Any) -> list[Node]:
            return self._nodes(self._instances(ec2, tags, LIVE_STATES), region)

        return ranked(self._each_region(find_in))

    def _each_region(self, work: Callable[[str, Any], list[T]]) -> list[T]:
        """`work(region, client)` in every region, side by side (a sweep of 17+ regions one by one takes
        seconds); the first CloudError raised is raised here."""
        clients = [(region, self.client(region)) for region in self.regions()]  # made here: not thread-safe

        def guarded(pair: tuple[str, Any]) -> list[T]:
            with ec2_errors():
                return work(*pair)

        if len(clients) == 1:
            return guarded(clients[0])
        with ThreadPoolExecutor(max_workers=min(MAX_REGION_THREADS, len(clients))) as pool:
            return [item for found in pool.map(guarded, clients) for item in found]

    def _nodes(self, instances: list[dict[str, Any]], region: str) -> list[Node]:
        return ranked([_node(i, region) for i in instances])


def _tags(resource: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in resource.get("Tags", [])}


def _fits(instance: dict[str, Any], spec: LaunchSpec) -> bool:
    zone = instance.get("Placement", {}).get("AvailabilityZone")
    spot = instance.get("InstanceLifecycle") == "spot"
    return (
        instance["InstanceType"] == spec.instance_type
        and spot == spec.use_spot
        and (spec.zone is None or zone == spec.zone)
    )


def _node(instance: dict[str, Any], region: str) -> Node:
    tags = _tags(instance)
    zone = instance.get("Placement", {}).get("AvailabilityZone")
    state = instance["State"]["Name"]
    return Node(
        instance_id=instance["InstanceId"],
        cluster_id=tags.get(CLUSTER_TAG, ""),
        job_id=tags.get(JOB_TAG, ""),
        ip=instance.get("PrivateIpAddress", ""),
        state="running" if state in RUNNING_STATES else "stopped" if state in LIVE_STATES else "terminated",
        cloud="aws",
        region=region,
        zone=zone,
        instance_type=instance["InstanceType"],
        use_spot=instance.get("InstanceLifecycle") == "spot",
        tags=tags,
        public_ip=instance.get("PublicIpAddress"),
    )
