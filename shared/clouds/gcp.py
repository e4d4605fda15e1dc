"""GCP Compute Engine over the v1 REST API.

Credentials and project: see `shared/clouds/gcp_auth.py`. `SKYLESS_GCP_COMPUTE_URL` overrides the
endpoint (tests), `SKYLESS_GCP_NETWORK` the VPC (default `global/networks/default`),
`SKYLESS_GCP_POLL_SECONDS` the operation polling interval (default 2).

Each node is one `instances.insert` named `skyless-<cluster>-<rank>` (the name is what the agent reads
from the metadata server as its instance id), labelled with the skyless tags, with a `requestId`
derived from the attempt, zone, instance type and rank: a repeated insert returns the first one's
operation instead of a second VM. A launch is all or nothing: when any insert fails, the VMs this
launch created are deleted before the error goes up.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import httpx

from shared.clouds.base import CLUSTER_TAG, JOB_TAG, MANAGED_TAG, RANK_TAG, LaunchSpec, Node
from shared.clouds.errors import (
    CloudError,
    InvalidLaunchError,
    NoCapacityError,
    QuotaError,
    TransientCloudError,
)
from shared.clouds.gcp_auth import GcpTokenSource, bearer_headers, project_of
from shared.clouds.node_names import node_name, split_cluster_id
from shared.clouds.rest_client import RestClient, body_of, error_for_status
from shared.clouds.spec_fields import accelerator_of, image_for
from shared.clouds.startup_script import startup_script
from shared.config.clouds import GcpConfig

DEFAULT_URL = "https://compute.googleapis.com/compute/v1"
REQUEST_NAMESPACE = uuid.UUID("6f1c8d8e-93a5-4c1e-9a55-5b1f0c2b7e11")
CAPACITY_CODES = {"ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "STOCKOUT"}
QUOTA_CODES = {"QUOTA_EXCEEDED", "quotaExceeded"}
TRANSIENT_CODES = {
    "rateLimitExceeded",
    "userRateLimitExceeded",
    "RESOURCE_OPERATION_RATE_EXCEEDED",
    "resourceNotReady",  # e.g. a start while the VM is still stopping
}
STATUS_TAG = "gcp-status"  # not a label: the instance's status, for terminate
LIVE_STATES = {"PROVISIONING", "STAGING", "RUNNING", "REPAIRING"}
# A stopped VM keeps its boot disk; GCE calls it TERMINATED. Not STOPPING: a VM being deleted says it too.
STOPPED_STATES = {"TERMINATED", "SUSPENDING", "SUSPENDED"}
# N1 hosts take GPUs as guest accelerators; the a2/a3/a4/g2 families have theirs built in.
GUEST_ACCELERATORS = {
    "T4": "nvidia-tesla-t4",
    "V100": "nvidia-tesla-v100",
    "P100": "nvidia-tesla-p100",
    "P4": "nvidia-tesla-p4",
    "K80": "nvidia-tesla-k80",
}
GPU_FAMILIES = ("a2-", "a3-", "a4-", "g2-")
GPU_IMAGE = "projects/deeplearning-platform-release/global/images/family/common-cu124-debian-11-py310"
CPU_IMAGE = "projects/debian-cloud/global/images/family/debian-12"
DEFAULT_DISK_GB = 100


def gcp_label(text: str) -> str:
    """GCP label rules: lower case letters, digits, `-` and `_`, at most 63 characters."""
    return re.sub(r"[^a-z0-9_-]", "-", text.lower())[:63]


def network_tag(cluster_id: str) -> str:
    return gcp_label(f"skyless-{cluster_id}")[:57]


def firewall_name(cluster_id: str) -> str:
    return f"{network_tag(cluster_id)}-ports"


def request_id(spec: LaunchSpec, rank: int) -> str:
    return str(uuid.uuid5(REQUEST_NAMESPACE, f"{spec.attempt_id}/{spec.zone}/{spec.instance_type}/{rank}"))


def _error_text(errors: list[dict[str, Any]]) -> tuple[set[str], str]:
    codes = {str(e.get("code") or e.get("reason") or "") for e in errors}
    return codes, "; ".join(f"{e.get('code') or e.get('reason')}: {e.get('message', '')}" for e in errors)


def classify_codes(codes: set[str], text: str, status: int) -> CloudError:
    if codes & CAPACITY_CODES:
        return NoCapacityError(text)
    if codes & QUOTA_CODES:
        return QuotaError(text)
    if codes & TRANSIENT_CODES:
        return TransientCloudError(text)
    return error_for_status(status, text)


def classify_gcp_error(response: httpx.Response) -> CloudError:
    error = body_of(response).get("error") or {}
    if not isinstance(error, dict):
        return error_for_status(response.status_code, f"{response.status_code}: {error}")
    codes, text = _error_text(list(error.get("errors") or []))
    return classify_codes(
        codes, text or f"{response.status_code}: {error.get('message', '')}", response.status_code
    )


def classify_operation_error(operation: dict[str, Any]) -> CloudError:
    codes, text = _error_text(list(operation["error"].get("errors") or []))
    return classify_codes(codes, text, int(operation.get("httpErrorStatusCode") or 400))


class GcpCompute:
    name = "gcp"

    def __init__(
        self,
        project: str | None,
        tokens: GcpTokenSource,
        base_url: str = DEFAULT_URL,
        network: str = "global/networks/default",
        poll_seconds: float = 2.0,
        operation_timeout: float = 600.0,
    ) -> None:
        self.project = project
        self.tokens = tokens
        self.network = network
        self.poll_seconds = poll_seconds
        self.operation_timeout = operation_timeout
        self.client = RestClient(base_url, self._headers, classify_gcp_error)

    @classmethod
    def from_env(cls, **options: Any) -> GcpCompute:
        return cls.from_config(GcpConfig.from_env(), **options)

    @classmethod
    def from_config(cls, config: GcpConfig, **options: Any) -> GcpCompute:
        tokens = GcpTokenSource.from_config(config)
        return cls(
            project_of(config, tokens),
            tokens,
            base_url=config.compute_url or DEFAULT_URL,
            network=config.network,
            poll_seconds=config.poll_seconds,
            **options,
        )

    def _headers(self) -> dict[str, str]:
        return bearer_headers(self.project, self.tokens)

    # -- the protocol ----------------------------------------------------------------------

    def launch(self, spec: LaunchSpec) -> list[Node]:
        if not spec.zone:
            raise InvalidLaunchError("GCP launches need a zone")
        if spec.ports:
            self._open_ports(spec)
        present = {
            n.instance_id
            for n in self._listed(CLUSTER_TAG, spec.cluster_id, zone=spec.zone)
            if n.state == "running"
        }
        operations: list[tuple[str, dict[str, Any]]] = []
        failures: list[CloudError] = []
        for rank in range(spec.num_nodes):
            name = node_name(spec.cluster_id, rank)
            if name in present:
                continue
            try:
                operation = self._insert(spec, rank, name)
            except CloudError as error:
                failures.append(error)
                break
            if operation is not None:
                operations.append((name, operation))
        for _name, operation in operations:
            try:
                self._wait(operation)
            except CloudError as error:
                failures.append(error)
        if failures:
            self._delete_names(spec.zone, [name for name, _ in operations])
            raise failures[0]
        nodes = self._listed(CLUSTER_TAG, spec.cluster_id, zone=spec.zone)
        return [n for n in nodes if n.state == "running" and n.instance_type == spec.instance_type]

    def terminate(self, cluster_id: str) -> None:
        for node in self._listed(CLUSTER_TAG, cluster_id):
            try:
                self._delete(node.zone or "", node.instance_id)
            except CloudError:
                if node.tags.get(STATUS_TAG) != "STOPPING":  # STOPPING: being deleted (or stopped) already
                    raise
        firewall = f"projects/{self.project}/global/firewalls/{firewall_name(cluster_id)}"
        self.client.request("DELETE", firewall, missing_ok=(404,))

    def describe(self, cluster_id: str) -> list[Node]:
        return self._listed(CLUSTER_TAG, cluster_id)

    def list_owned(self) -> list[Node]:
        return self._listed(MANAGED_TAG, "true")

    def leftover_clusters(self) -> list[tuple[str, str]]:
        """(job id, cluster id) of every task-ports firewall rule, whatever became of its VMs (reaper)."""
        path = f"projects/{self.project}/global/firewalls"
        page = self.client.request("GET", path, params={"filter": 'name eq "skyless-.*-ports"'}) or {}
        clusters = [
            str(rule["name"]).removeprefix("skyless-").removesuffix("-ports")
            for rule in page.get("items", [])
        ]
        return sorted((split_cluster_id(cluster)[0], cluster) for cluster in clusters)

    # -- named clusters: stop and start ----------------------------------------------------

    def stop(self, cluster_id: str) -> None:
        """instances.stop on every running VM of the cluster (boot disks kept), waited for. Idempotent."""
        operations = [
            self.client.request("POST", self._instance_path(node, "stop"), missing_ok=(404,))
            for node in self._listed(CLUSTER_TAG, cluster_id)
            if node.state == "running"
        ]
        for operation in operations:
            if operation is not None:
                self._wait(operation)

    def start(self, cluster_id: str, agent_env: dict[str, str]) -> list[Node]:
        """instances.start on the cluster's stopped VMs; the startup script runs at every boot, and the agent
        keeps its token on disk (`agent_env` is not needed). A VM still stopping is retried later."""
        nodes = self._listed(CLUSTER_TAG, cluster_id)
        if not nodes:
            raise InvalidLaunchError(f"gcp: cluster {cluster_id} has no VM to start (deleted?)")
        if any(node.tags.get(STATUS_TAG) == "STOPPING" for node in nodes):
            raise TransientCloudError(f"gcp: a VM of {cluster_id} is still stopping")
        operations = [
            self.client.request("POST", self._instance_path(node, "start"))
            for node in nodes
            if node.state == "stopped"
        ]
        for operation in operations:
            self._wait(operation)
        return self._listed(CLUSTER_TAG, cluster_id) if operations else nodes

    def _instance_path(self, node: Node, verb: str) -> str:
        return f"{self._zone_path(node.zone or '')}/instances/{node.instance_id}/{verb}"

    # -- instances -------------------------------------------------------------------------

    def instance_body(self, spec: LaunchSpec, rank: int, name: str) -> dict[str, Any]:
        zone = spec.zone
        accelerator, count = accelerator_of(spec)
        guest = GUEST_ACCELERATORS.get(accelerator or "") if spec.instance_type.startswith("n1-") else None
        has_gpu = bool(guest and count) or spec.instance_type.startswith(GPU_FAMILIES)
        image = image_for(spec) or (GPU_IMAGE if has_gpu else CPU_IMAGE)
        disk_gb = spec.disk_size_gb or DEFAULT_DISK_GB
        labels = {gcp_label(k): gcp_label(v) for k, v in spec.labels.items()}
        labels.update({gcp_label(k): gcp_label(v) for k, v in {**spec.tags(), RANK_TAG: str(rank)}.items()})
        scheduling: dict[str, Any] = {"onHostMaintenance": "TERMINATE" if has_gpu else "MIGRATE"}
        if spec.use_spot:
            scheduling = {
                "provisioningModel": "SPOT",
                "instanceTerminationAction": "DELETE",
                "automaticRestart": False,
                "onHostMaintenance": "TERMINATE",
            }
        body: dict[str, Any] = {
            "name": name,
            "machineType": f"zones/{zone}/machineTypes/{spec.instance_type}",
            "disks": [
                {
                    "boot": True,
                    "autoDelete": True,
                    "initializeParams": {"sourceImage": image, "diskSizeGb": str(disk_gb)},
                }
            ],
            "networkInterfaces": [
                {
                    "network": self.network,
                    "accessConfigs": [{"type": "ONE_TO_ONE_NAT", "name": "External NAT"}],
                }
            ],
            "metadata": {"items": [{"key": "startup-script", "value": startup_script(spec)}]},
            "labels": labels,
            "scheduling": scheduling,
        }
        if spec.ports:
            body["tags"] = {"items": [network_tag(spec.cluster_id)]}
        if spec.reservation:
            body["reservationAffinity"] = {
                "consumeReservationType": "SPECIFIC_RESERVATION",
                "key": "compute.googleapis.com/reservation-name",
                "values": [spec.reservation],
            }
        if guest and count:
            body["guestAccelerators"] = [
                {"acceleratorType": f"zones/{zone}/acceleratorTypes/{guest}", "acceleratorCount": count}
            ]
        return body

    def _open_ports(self, spec: LaunchSpec) -> None:
        """One ingress rule per cluster for the task's ports, aimed at the cluster's network tag."""
        rule = {
            "name": firewall_name(spec.cluster_id),
            "network": self.network,
            "direction": "INGRESS",
            "sourceRanges": ["0.0.0.0/0"],
            "targetTags": [network_tag(spec.cluster_id)],
            "allowed": [{"IPProtocol": "tcp", "ports": [str(p) for p in spec.ports]}],
            "description": f"skyless: task ports of {spec.cluster_id}",
        }
        rid = str(uuid.uuid5(REQUEST_NAMESPACE, f"{spec.attempt_id}/firewall"))
        path = f"projects/{self.project}/global/firewalls"
        operation = self.client.request("POST", path, params={"requestId": rid}, json=rule, missing_ok=(409,))
        if operation is not None:
            self._wait(operation)

    def _zone_path(self, zone: str) -> str:
        return f"projects/{self.project}/zones/{zone}"

    def _insert(self, spec: LaunchSpec, rank: int, name: str) -> dict[str, Any] | None:
        """The insert's operation, or None when a VM of that name already exists (409)."""
        return self.client.request(
            "POST",
            f"{self._zone_path(spec.zone or '')}/instances",
            params={"requestId": request_id(spec, rank)},
            json=self.instance_body(spec, rank, name),
            missing_ok=(409,),
        )

    def _wait(self, operation: dict[str, Any]) -> dict[str, Any]:
        deadline = time.monotonic() + self.operation_timeout
        while operation.get("status") != "DONE":
            if time.monotonic() > deadline:
                raise TransientCloudError(f"GCP operation {operation.get('name')} still running")
            time.sleep(self.poll_seconds)
            operation = self.client.request("GET", self._operation_path(operation))
        if operation.get("error"):
            raise classify_operation_error(operation)
        return operation

    def _operation_path(self, operation: dict[str, Any]) -> str:
        """Relative to our base URL (not the operation's selfLink), so an overridden endpoint is kept."""
        zone = str(operation.get("zone", "")).rsplit("/", 1)[-1]
        scope = f"zones/{zone}" if zone else "global"
        return f"projects/{self.project}/{scope}/operations/{operation['name']}"

    def _delete(self, zone: str, name: str) -> None:
        self.client.request("DELETE", f"{self._zone_path(zone)}/instances/{name}", missing_ok=(404,))

    def _delete_names(self, zone: str, names: list[str]) -> None:
        for name in names:
            self._delete(zone, name)

    def _listed(self, label: str, value: str, zone: str | None = None) -> list[Node]:
        """Instances whose label matches, in one zone or (aggregated list) in all, every page."""
        path = (
            f"{self._zone_path(zone)}/instances" if zone else f"projects/{self.project}/aggregated/instances"
        )
        params: dict[str, Any] = {"filter": f'labels.{gcp_label(label)} = "{gcp_label(value)}"'}
        found: list[dict[str, Any]] = []
        while True:
            page = self.client.request("GET", path, params=params) or {}
            items = page.get("items") or []
            if isinstance(
                items, dict
            ):  # aggregated: {"zones/<zone>": {"instances": [...]} | {"warning": ...}}
                found.extend(i for scoped in items.values() for i in scoped.get("instances", []))
            else:
                found.extend(items)
            if not page.get("nextPageToken"):
                break
            params["pageToken"] = page["nextPageToken"]
        return sorted((self._node(i) for i in found), key=lambda n: n.instance_id)

    @staticmethod
    def _node(instance: dict[str, Any]) -> Node:
        labels = dict(instance.get("labels") or {})
        interfaces = instance.get("networkInterfaces") or [{}]
        zone = str(instance.get("zone", "")).rsplit("/", 1)[-1]
        return Node(
            instance_id=instance["name"],
            cluster_id=labels.get(CLUSTER_TAG, ""),
            job_id=labels.get(JOB_TAG, ""),
            ip=interfaces[0].get("networkIP", ""),
            state=_node_state(str(instance.get("status", ""))),
            cloud="gcp",
            region=zone.rsplit("-", 1)[0],
            zone=zone,
            instance_type=str(instance.get("machineType", "")).rsplit("/", 1)[-1],
            use_spot=(instance.get("scheduling") or {}).get("provisioningModel") == "SPOT",
            tags={**labels, STATUS_TAG: str(instance.get("status", ""))},
        )


def _node_state(status: str) -> str:
    return "running" if status in LIVE_STATES else "stopped" if status in STOPPED_STATES else "terminated"
