"""Azure VMs over the Resource Manager REST API.

Credentials: see `shared/clouds/azure_arm.py`; `AZURE_SUBSCRIPTION_ID` names the subscription.
`SKYLESS_AZURE_RESOURCE_GROUP` fixes the resource group (default `skyless-<region>`, created on first
use with a `skyless-vnet`), `SKYLESS_AZURE_SSH_PUBLIC_KEY` the admin key (default ~/.ssh/id_*.pub, else
a throwaway key: the agent needs no login). `SKYLESS_AZURE_ARM_URL` overrides the endpoint (tests).

Each node is a public IP, a NIC and a VM named `skyless-<cluster>-<rank>-<place>` (the VM name is what
the agent reads from IMDS as its instance id; `<place>` keeps candidates of one attempt apart), all
tagged with the skyless tags. ARM PUTs are idempotent by name, which is the launch's idempotency. The
VM deletes its NIC, public IP and OS disk with it (deleteOption Delete); teardown also deletes any
NIC or IP left behind by a launch that died half way.
"""

from __future__ import annotations

import base64
import hashlib
from functools import cache
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from shared.clouds.azure_arm import DEFAULT_ARM_URL, ArmClient, AzureCredentials, cli_default_subscription
from shared.clouds.base import CLUSTER_TAG, JOB_TAG, MANAGED_TAG, RANK_TAG, LaunchSpec, Node
from shared.clouds.errors import CloudError, InvalidLaunchError, TransientCloudError
from shared.clouds.node_names import node_name
from shared.clouds.spec_fields import image_for
from shared.clouds.startup_script import startup_script
from shared.config.clouds import AzureConfig

GROUP_API = "2021-04-01"
NETWORK_API = "2023-09-01"
COMPUTE_API = "2024-03-01"
ADMIN = "azureuser"
NSG_KIND = "Microsoft.Network/networkSecurityGroups"
VNET = "skyless-vnet"
LIVE_STATES = {"Creating", "Updating", "Succeeded"}
POWER_TAG = "azure-power-state"  # not a tag: the VM's power state, for start
# power states (the instance view's `PowerState/...`) of a VM that keeps its disk but runs nothing
STOPPED_POWER = {
    "PowerState/deallocating",
    "PowerState/deallocated",
    "PowerState/stopping",
    "PowerState/stopped",
}
GPU_IMAGE = {"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc", "sku": "2204", "version": "latest"}
CPU_IMAGE = {
    "publisher": "Canonical",
    "offer": "0001-com-ubuntu-server-jammy",
    "sku": "22_04-lts-gen2",
    "version": "latest",
}
DEFAULT_DISK_GB = 128


@cache
def throwaway_public_key() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )


def ssh_public_key_from_home() -> str:
    """~/.ssh's public key, else a throwaway one (the nodes are reached through skyless, not this key)."""
    for name in ("id_ed25519.pub", "id_rsa.pub"):
        path = Path("~/.ssh").expanduser() / name
        if path.exists():
            return path.read_text().strip()
    return throwaway_public_key()


def image_reference(image_id: str | None, vm_size: str) -> dict[str, str]:
    """`publisher:offer:sku:version` or an image resource id; default: the DSVM on GPU sizes."""
    if image_id and image_id.startswith("/subscriptions/"):
        return {"id": image_id}
    if image_id:
        parts = image_id.split(":")
        if len(parts) != 4:
            raise InvalidLaunchError(f"Azure image_id {image_id!r} is not publisher:offer:sku:version")
        return dict(zip(("publisher", "offer", "sku", "version"), parts, strict=True))
    return GPU_IMAGE if vm_size.startswith("Standard_N") else CPU_IMAGE


def vm_name(spec: LaunchSpec, rank: int) -> str:
    place = hashlib.sha1(
        f"{spec.region}/{spec.zone}/{spec.instance_type}/{spec.use_spot}".encode()
    ).hexdigest()
    return f"{node_name(spec.cluster_id, rank)}-{place[:4]}"


class AzureCompute:
    name = "azure"

    def __init__(
        self, arm: ArmClient, resource_group: str | None = None, ssh_public_key: str | None = None
    ) -> None:
        self.arm = arm
        self.resource_group = resource_group
        self.ssh_public_key = ssh_public_key
        self._networks: dict[str, str] = {}  # region -> subnet id, once ensured in this process

    @classmethod
    def from_env(cls) -> AzureCompute:
        return cls.from_config(AzureConfig.from_env())

    @classmethod
    def from_config(cls, config: AzureConfig) -> AzureCompute:
        arm = ArmClient(
            config.subscription_id or cli_default_subscription(config.config_dir),
            AzureCredentials.from_config(config),
            config.arm_url or DEFAULT_ARM_URL,
            poll_seconds=config.poll_seconds,
        )
        return cls(arm, config.resource_group, config.ssh_public_key)

    def group(self, region: str) -> str:
        return self.resource_group or f"skyless-{region}"

    # -- the protocol ----------------------------------------------------------------------

    def launch(self, spec: LaunchSpec) -> list[Node]:
        subnet = self._ensure_network(spec.region)
        nsg = self._open_ports(spec) if spec.ports else None
        present = {n.instance_id for n in self.describe(spec.cluster_id) if n.state == "running"}
        started: list[str] = []
        operations: list[str | None] = []
        failures: list[CloudError] = []
        for rank in range(spec.num_nodes):
            name = vm_name(spec, rank)
            if name in present:
                continue
            started.append(name)
            try:
                operations.append(self._create_node(spec, rank, name, subnet, nsg))
            except CloudError as error:
                failures.append(error)
                break
        for operation in operations:
            try:
                self.arm.wait(operation)
            except CloudError as error:
                failures.append(error)
        if failures:
            for name in started:  # all or nothing
                self._delete_node(self.group(spec.region), name)
            if nsg:
                self._delete(nsg, NETWORK_API, wait=True)
            raise failures[0]
        ours = {vm_name(spec, rank) for rank in range(spec.num_nodes)}
        return [n for n in self.describe(spec.cluster_id) if n.state == "running" and n.instance_id in ours]

    def terminate(self, cluster_id: str) -> None:
        tagged = self.arm.list_all(
            "resources", GROUP_API, {"$filter": f"tagName eq '{CLUSTER_TAG}' and tagValue eq '{cluster_id}'"}
        )
        order = ["Microsoft.Compute/virtualMachines", "Microsoft.Network/networkInterfaces",
                 "Microsoft.Network/publicIPAddresses", NSG_KIND]  # fmt: skip
        for kind in order:
            for resource in tagged:
                if resource.get("type", "").lower() == kind.lower():
                    self._delete(
                        resource["id"], COMPUTE_API if "Compute" in kind else NETWORK_API, wait=False
                    )

    def describe(self, cluster_id: str) -> list[Node]:
        return [n for n in self.list_owned() if n.cluster_id == cluster_id]

    def list_owned(self) -> list[Node]:
        vms = self.arm.list_all(  # statusOnly: each VM with its instance view (its power state)
            "providers/Microsoft.Compute/virtualMachines", COMPUTE_API, {"statusOnly": "true"}
        )
        ours = [vm for vm in vms if (vm.get("tags") or {}).get(MANAGED_TAG) == "true"]
        ips = self._private_ips() if ours else {}
        return sorted((self._node(vm, ips) for vm in ours), key=lambda n: n.instance_id)

    def leftover_clusters(self) -> list[tuple[str, str]]:
        """(job id, cluster id) of every tagged resource, NICs and IPs of dead launches too (reaper)."""
        tagged = self.arm.list_all(
            "resources", GROUP_API, {"$filter": f"tagName eq '{MANAGED_TAG}' and tagValue eq 'true'"}
        )
        pairs = {
            ((r.get("tags") or {}).get(JOB_TAG, ""), (r.get("tags") or {}).get(CLUSTER_TAG)) for r in tagged
        }
        return sorted((job, cluster) for job, cluster in pairs if cluster)

    # -- named clusters: stop (deallocate) and start ---------------------------------------

    def stop(self, cluster_id: str) -> None:
        """Deallocate every running VM of the cluster, as SkyPilot stops Azure VMs: the OS disk stays, the
        compute is no longer billed. Waited for; idempotent."""
        operations = [
            self.arm.call("POST", self._vm_action(node, "deallocate"), COMPUTE_API, missing_ok=(404,))[1]
            for node in self.describe(cluster_id)
            if node.state == "running"
        ]
        for operation in operations:
            self.arm.wait(operation)

    def start(self, cluster_id: str, agent_env: dict[str, str]) -> list[Node]:
        """Start the cluster's deallocated VMs; cloud-init's per-boot script brings the agent back, which
        keeps its token on disk (`agent_env` is not needed). A VM still deallocating is retried later."""
        nodes = self.describe(cluster_id)
        if not nodes:
            raise InvalidLaunchError(f"azure: cluster {cluster_id} has no VM to start (deleted?)")
        if any(
            node.tags.get(POWER_TAG) in ("PowerState/deallocating", "PowerState/stopping") for node in nodes
        ):
            raise TransientCloudError(f"azure: a VM of {cluster_id} is still deallocating")
        operations = [
            self.arm.call("POST", self._vm_action(node, "start"), COMPUTE_API)[1]
            for node in nodes
            if node.state == "stopped"
        ]
        for operation in operations:
            self.arm.wait(operation)
        return self.describe(cluster_id) if operations else nodes

    def _vm_action(self, node: Node, action: str) -> str:
        vm = self._id(self.group(node.region or ""), "Microsoft.Compute/virtualMachines", node.instance_id)
        return f"{vm}/{action}"

    # -- resources -------------------------------------------------------------------------

    def _ensure_network(self, region: str) -> str:
        if region in self._networks:
            return self._networks[region]
        group = self.group(region)
        tags = {MANAGED_TAG: "true"}
        self.arm.call("PUT", f"resourcegroups/{group}", GROUP_API, {"location": region, "tags": tags})
        vnet = {
            "location": region,
            "tags": tags,
            "properties": {
                "addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
                "subnets": [{"name": "default", "properties": {"addressPrefix": "10.0.0.0/20"}}],
            },
        }
        _, operation = self.arm.call(
            "PUT", self._id(group, "Microsoft.Network/virtualNetworks", VNET), NETWORK_API, vnet
        )
        self.arm.wait(operation)
        subnet = (
            f"/{self.arm.path(self._id(group, 'Microsoft.Network/virtualNetworks', VNET))}/subnets/default"
        )
        self._networks[region] = subnet
        return subnet

    def _open_ports(self, spec: LaunchSpec) -> str:
        """A security group on the cluster's NICs letting the task's ports in (Standard IPs admit none)."""
        rules = [
            {
                "name": f"task-port-{index}",
                "properties": {
                    "priority": 1000 + index,
                    "direction": "Inbound",
                    "access": "Allow",
                    "protocol": "Tcp",
                    "sourceAddressPrefix": "*",
                    "sourcePortRange": "*",
                    "destinationAddressPrefix": "*",
                    "destinationPortRange": str(port),
                },
            }
            for index, port in enumerate(spec.ports)
        ]
        nsg_id = self._id(self.group(spec.region), NSG_KIND, f"skyless-{spec.cluster_id}-ports")
        body = {"location": spec.region, "tags": spec.tags(), "properties": {"securityRules": rules}}
        _, operation = self.arm.call("PUT", nsg_id, NETWORK_API, body)
        self.arm.wait(operation)
        return f"/{self.arm.path(nsg_id)}"

    def _create_node(
        self, spec: LaunchSpec, rank: int, name: str, subnet: str, nsg: str | None = None
    ) -> str | None:
        """Public IP and NIC (waited for), then the VM: returns the VM's async operation to wait for."""
        group = self.group(spec.region)
        tags = {**(spec.labels), **spec.tags(), RANK_TAG: str(rank)}
        zones = [spec.zone.rsplit("-", 1)[-1]] if spec.zone else None
        ip_id = self._id(group, "Microsoft.Network/publicIPAddresses", f"{name}-ip")
        public_ip: dict[str, Any] = {
            "location": spec.region,
            "tags": tags,
            "sku": {"name": "Standard"},
            "properties": {"publicIPAllocationMethod": "Static"},
        }
        if zones:
            public_ip["zones"] = zones
        _, operation = self.arm.call("PUT", ip_id, NETWORK_API, public_ip)
        self.arm.wait(operation)
        nic_id = self._id(group, "Microsoft.Network/networkInterfaces", f"{name}-nic")
        nic: dict[str, Any] = {
            "location": spec.region,
            "tags": tags,
            "properties": {
                "ipConfigurations": [
                    {
                        "name": "ipconfig1",
                        "properties": {
                            "subnet": {"id": subnet},
                            "privateIPAllocationMethod": "Dynamic",
                            "publicIPAddress": {
                                "id": f"/{self.arm.path(ip_id)}",
                                "properties": {"deleteOption": "Delete"},
                            },
                        },
                    }
                ]
            },
        }
        if nsg:
            nic["properties"]["networkSecurityGroup"] = {"id": nsg}
        _, operation = self.arm.call("PUT", nic_id, NETWORK_API, nic)
        self.arm.wait(operation)
        vm = self.vm_body(spec, name, tags, f"/{self.arm.path(nic_id)}")
        if zones:
            vm["zones"] = zones
        _, operation = self.arm.call(
            "PUT", self._id(group, "Microsoft.Compute/virtualMachines", name), COMPUTE_API, vm
        )
        return operation

    def vm_body(self, spec: LaunchSpec, name: str, tags: dict[str, str], nic_id: str) -> dict[str, Any]:
        custom_data = base64.b64encode(startup_script(spec, run_as=ADMIN).encode()).decode()
        key = self.ssh_public_key or ssh_public_key_from_home()
        properties: dict[str, Any] = {
            "hardwareProfile": {"vmSize": spec.instance_type},
            "storageProfile": {
                "imageReference": image_reference(image_for(spec), spec.instance_type),
                "osDisk": {
                    "createOption": "FromImage",
                    "deleteOption": "Delete",
                    "diskSizeGB": spec.disk_size_gb or DEFAULT_DISK_GB,
                    "managedDisk": {"storageAccountType": "Premium_LRS"},
                },
            },
            "osProfile": {
                "computerName": name,
                "adminUsername": ADMIN,
                "customData": custom_data,
                "linuxConfiguration": {
                    "disablePasswordAuthentication": True,
                    "ssh": {"publicKeys": [{"path": f"/home/{ADMIN}/.ssh/authorized_keys", "keyData": key}]},
                },
            },
            "networkProfile": {
                "networkInterfaces": [
                    {"id": nic_id, "properties": {"primary": True, "deleteOption": "Delete"}}
                ]
            },
            "priority": "Regular",
        }
        if spec.use_spot:
            properties.update(priority="Spot", evictionPolicy="Delete", billingProfile={"maxPrice": -1})
        if spec.reservation:
            properties["capacityReservation"] = {"capacityReservationGroup": {"id": spec.reservation}}
        return {"location": spec.region, "tags": tags, "properties": properties}

    def _delete_node(self, group: str, name: str) -> None:
        """A failed launch's VM, NIC and IP, in that order, each waited for (the next depends on it)."""
        self._delete(self._id(group, "Microsoft.Compute/virtualMachines", name), COMPUTE_API, wait=True)
        self._delete(
            self._id(group, "Microsoft.Network/networkInterfaces", f"{name}-nic"), NETWORK_API, wait=True
        )
        self._delete(
            self._id(group, "Microsoft.Network/publicIPAddresses", f"{name}-ip"), NETWORK_API, wait=True
        )

    def _delete(self, resource: str, api_version: str, wait: bool) -> None:
        path = resource.lstrip("/")
        rest = path.split("/", 2)[2] if path.lower().startswith("subscriptions/") else path
        try:
            _, operation = self.arm.call("DELETE", rest, api_version, missing_ok=(404,))
            if wait:
                self.arm.wait(operation)
        except InvalidLaunchError as error:
            if "InUse" not in error.message and "CannotBeDeleted" not in error.message:
                raise  # in use: its VM's deletion takes it along (deleteOption Delete)

    def _private_ips(self) -> dict[str, str]:
        nics = self.arm.list_all("providers/Microsoft.Network/networkInterfaces", NETWORK_API)
        ips: dict[str, str] = {}
        for nic in nics:
            configs = (nic.get("properties") or {}).get("ipConfigurations") or [{}]
            ips[nic["id"].lower()] = (configs[0].get("properties") or {}).get("privateIPAddress", "")
        return ips

    @staticmethod
    def _id(group: str, kind: str, name: str) -> str:
        return f"resourceGroups/{group}/providers/{kind}/{name}"

    @staticmethod
    def _node(vm: dict[str, Any], ips: dict[str, str]) -> Node:
        properties = vm.get("properties") or {}
        statuses = (properties.get("instanceView") or {}).get("statuses") or []
        power = next(
            (str(s["code"]) for s in statuses if str(s.get("code", "")).startswith("PowerState/")), ""
        )
        tags = {**dict(vm.get("tags") or {}), **({POWER_TAG: power} if power else {})}
        nics = (properties.get("networkProfile") or {}).get("networkInterfaces") or [{}]
        zones = vm.get("zones") or []
        return Node(
            instance_id=vm["name"],
            cluster_id=tags.get(CLUSTER_TAG, ""),
            job_id=tags.get(JOB_TAG, ""),
            ip=ips.get(str(nics[0].get("id", "")).lower(), ""),
            state="terminated"
            if properties.get("provisioningState") not in LIVE_STATES
            else "stopped"
            if power in STOPPED_POWER
            else "running",
            cloud="azure",
            region=vm.get("location", ""),
            zone=f"{vm.get('location')}-{zones[0]}" if zones else None,
            instance_type=(properties.get("hardwareProfile") or {}).get("vmSize", ""),
            use_spot=properties.get("priority") == "Spot",
            tags=tags,
        )
