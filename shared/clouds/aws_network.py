"""Where a cluster's nodes sit on the network: the zone's default subnet, and one security group per
cluster that opens only the task's ports to the world, plus all traffic between the cluster's own nodes
(multi-node training talks on ports the task does not list). SSH is not opened at launch: the node agent
calls home over HTTPS; `skyless ssh` on a named cluster opens port 22 to the caller's address only
(`open_port_22`). The group carries the skyless tags and goes at terminate
(or, when EC2 still holds it for a terminating instance, at the reaper's next sweep)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from shared.clouds.aws_errors import error_code
from shared.clouds.base import CLUSTER_TAG, MANAGED_TAG
from shared.clouds.errors import InvalidLaunchError

WORLD = "0.0.0.0/0"


def group_name(cluster_id: str) -> str:
    return f"skyless-{cluster_id}"


def parse_ports(ports: tuple[str, ...] | list[str]) -> list[tuple[int, int]]:
    """`("8080", "10000-10010", 22)` -> [(8080, 8080), (10000, 10010), (22, 22)]."""
    ranges: list[tuple[int, int]] = []
    for raw in ports:
        text = str(raw).strip()
        low, _, high = text.partition("-")
        try:
            first, last = int(low), int(high or low)
        except ValueError:
            raise InvalidLaunchError(f"resources.ports: {text!r} is not a port or a range") from None
        if not 0 < first <= last <= 65535:
            raise InvalidLaunchError(f"resources.ports: {text!r} is outside 1-65535")
        ranges.append((first, last))
    return sorted(set(ranges))


def zone_subnet(ec2: Any, zone: str | None) -> tuple[str | None, str | None]:
    """(subnet id, vpc id) of the default subnet of `zone` (or of the default VPC when zone is None)."""
    if zone is not None:
        filters = [
            {"Name": "availability-zone", "Values": [zone]},
            {"Name": "default-for-az", "Values": ["true"]},
        ]
        subnets = ec2.describe_subnets(Filters=filters)["Subnets"]
        if subnets:
            return subnets[0]["SubnetId"], subnets[0]["VpcId"]
    vpcs = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"]
    return None, (vpcs[0]["VpcId"] if vpcs else None)


def ensure_security_group(
    ec2: Any, cluster_id: str, vpc_id: str | None, ports: list[tuple[int, int]], tags: dict[str, str]
) -> str:
    """The cluster's group (created once; a second call finds it), with exactly the task's ports open."""
    existing = find_security_groups(ec2, cluster_id)
    if existing:
        return existing[0]["GroupId"]
    arguments: dict[str, Any] = {
        "GroupName": group_name(cluster_id),
        "Description": f"skyless cluster {cluster_id}: task ports only",
        "TagSpecifications": [{"ResourceType": "security-group", "Tags": tag_list(tags)}],
    }
    if vpc_id:
        arguments["VpcId"] = vpc_id
    try:
        group_id = ec2.create_security_group(**arguments)["GroupId"]
    except ClientError as error:
        if error_code(error) != "InvalidGroup.Duplicate":
            raise
        return find_security_groups(ec2, cluster_id)[0]["GroupId"]
    permissions: list[dict[str, Any]] = [{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group_id}]}]
    permissions += [
        {"IpProtocol": "tcp", "FromPort": low, "ToPort": high, "IpRanges": [{"CidrIp": WORLD}]}
        for low, high in ports
    ]
    ec2.authorize_security_group_ingress(GroupId=group_id, IpPermissions=permissions)
    return group_id


def find_security_groups(ec2: Any, cluster_id: str | None = None) -> list[dict[str, Any]]:
    """skyless's groups in this region: one cluster's, or all of them."""
    filters = [{"Name": f"tag:{MANAGED_TAG}", "Values": ["true"]}]
    if cluster_id is not None:
        filters.append({"Name": f"tag:{CLUSTER_TAG}", "Values": [cluster_id]})
    return list(ec2.describe_security_groups(Filters=filters)["SecurityGroups"])


def delete_security_group(ec2: Any, group_id: str) -> bool:
    """True when gone; False while a (terminating) instance still holds it."""
    try:
        ec2.delete_security_group(GroupId=group_id)
    except ClientError as error:
        if error_code(error) == "InvalidGroup.NotFound":
            return True
        if error_code(error) == "DependencyViolation":
            return False
        raise
    return True


def tag_list(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": key, "Value": value} for key, value in tags.items()]


def open_port_22(ec2: Any, group_id: str, cidr: str) -> None:
    """SSH from one address (a named cluster's `skyless ssh` caller); already open is fine."""
    permission = {"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "IpRanges": [{"CidrIp": cidr}]}
    try:
        ec2.authorize_security_group_ingress(GroupId=group_id, IpPermissions=[permission])
    except ClientError as error:
        if error_code(error) != "InvalidPermission.Duplicate":
            raise


def cluster_agent_env(agent_env: dict[str, str]) -> dict[str, str]:
    """What a named cluster's agent needs in user-data beyond a job agent's (its mode and cluster)."""
    return {k: v for k, v in agent_env.items() if k in ("SKYLESS_AGENT_MODE", "SKYLESS_CLUSTER_KEY")}
