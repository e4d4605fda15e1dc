"""Cloud TPU VMs over the TPU v2 REST API (`tpu.googleapis.com/v2`), and the GCP provider that routes a
launch to Compute Engine or to TPU VMs by its instance type (`TPU-VM` is SkyPilot's name for a slice).

Each node of a job is one TPU node (`nodes.create`, `nodeId` = `skyless-<cluster>-<rank>`, labelled with
the skyless tags, the agent's boot script as the `startup-script` metadata, `requestId` derived from the
attempt: a repeated create answers the first one's operation). A multi-host slice (`v5litepod-16`: 4
hosts) has one worker VM per host; each worker runs the agent and is one node of the cluster (instance id
`<node id>-w<worker>`, its IP from the node's `networkEndpoints`), so `SKYPILOT_NUM_NODES` counts hosts, as
SkyPilot does on TPU pods. A launch is all or nothing: when a create fails, the nodes this launch made are
deleted before the error goes up. Nodes are listed across zones with `locations/-`.

`SKYLESS_GCP_TPU_URL` overrides the endpoint (tests); credentials and project as for Compute Engine.
"""

from __future__ import annotations

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
from shared.clouds.gcp import REQUEST_NAMESPACE, GcpCompute, gcp_label
from shared.clouds.gcp_auth import GcpTokenSource, bearer_headers, project_of
from shared.clouds.node_names import node_name
from shared.clouds.rest_client import RestClient, body_of, error_for_status
from shared.clouds.startup_script import startup_script
from shared.config.clouds import GcpConfig

DEFAULT_TPU_URL = "https://tpu.googleapis.com/v2"
TPU_INSTANCE_TYPE = "TPU-VM"
LIVE_STATES = {"CREATING", "READY", "RESTARTING", "REIMAGING", "REPAIRING", "STARTING"}
# The TPU VM software a slice boots when the task does not say (Google's recommended base images).
DEFAULT_RUNTIMES = {
    "v2": "tpu-ubuntu2204-base",
    "v3": "tpu-ubuntu2204-base",
    "v4": "tpu-ubuntu2204-base",
    "v5litepod": "v2-alpha-tpuv5-lite",
    "v5p": "v2-alpha-tpuv5",
    "v6e": "v2-alpha-tpuv6e",
}
# A worker learns its number from the metadata server; its instance id is the node's name + that number.
_GCP_INSTANCE_ID = "INSTANCE_ID=$(MD name)\n"
_TPU_INSTANCE_ID = (
    "TPU_WORKER=$(MD attributes/agent-worker-number || echo 0)\n"
    'INSTANCE_ID="{node}-w$(printf %03d "${{TPU_WORKER:-0}}")"\n'
)


def accelerator_type(spec: LaunchSpec) -> str:
    """`tpu-v5litepod-16` (the candidate's accelerator) → `v5litepod-16`, the TPU API's name."""
    name = spec.accelerator or ""
    if not name.startswith("tpu-"):
        raise InvalidLaunchError(f"a TPU VM needs a TPU accelerator (tpu-v5litepod-16, ...), not {name!r}")
    return name.removeprefix("tpu-")


def tpu_startup_script(spec: LaunchSpec, node: str) -> str:
    """The agent's boot script, with each worker's instance id made from the node name and its number."""
    script = startup_script(spec)
    if _GCP_INSTANCE_ID not in script:
        raise InvalidLaunchError("the node agent's boot script no longer reads its GCP identity as expected")
    return script.replace(_GCP_INSTANCE_ID, _TPU_INSTANCE_ID.format(node=node), 1)


def classify_tpu_error(response: httpx.Response) -> CloudError:
    """google.rpc.Status bodies: `{"error": {"code", "message", "status"}}`."""
    error = body_of(response).get("error") or {}
    if not isinstance(error, dict):
        return error_for_status(response.status_code, f"{response.status_code}: {error}")
    return classify_status(str(error.get("status", "")), str(error.get("message", "")), response.status_code)


def classify_status(status: str, message: str, http_status: int) -> CloudError:
    text = f"{status}: {message}" if status else message
    lowered = message.lower()
    if status == "RESOURCE_EXHAUSTED" or http_status == 429:
        if "quota" in lowered:
            return QuotaError(text)
        if "capacity" in lowered or "resources" in lowered:
            return NoCapacityError(text)
        return TransientCloudError(text)
    if status == "UNAVAILABLE" and "capacity" in lowered:
        return NoCapacityError(text)
    return error_for_status(http_status, text)


_RPC_CODES = {8: ("RESOURCE_EXHAUSTED", 429), 14: ("UNAVAILABLE", 503), 7: ("PERMISSION_DENIED", 403),
              3: ("INVALID_ARGUMENT", 400), 9: ("FAILED_PRECONDITION", 400)}  # fmt: skip


class GcpTpuVms:
    name = "gcp"

    def __init__(
        self,
        project: str | None,
        tokens: GcpTokenSource,
        base_url: str = DEFAULT_TPU_URL,
        poll_seconds: float = 2.0,
        operation_timeout: float = 900.0,
    ) -> None:
        self.project = project
        self.tokens = tokens
        self.poll_seconds = poll_seconds
        self.operation_timeout = operation_timeout
        self.client = RestClient(base_url, self._headers, classify_tpu_error)

    @classmethod
    def from_env(cls, **options: Any) -> GcpTpuVms:
        return cls.from_config(GcpConfig.from_env(), **options)

    @classmethod
    def from_config(cls, config: GcpConfig, **options: Any) -> GcpTpuVms:
        tokens = GcpTokenSource.from_config(config)
        return cls(
            project_of(config, tokens),
            tokens,
            base_url=config.tpu_url or DEFAULT_TPU_URL,
            poll_seconds=config.poll_seconds,
            **options,
        )

    def _headers(self) -> dict[str, str]:
        return bearer_headers(self.project, self.tokens)

    # -- the protocol ----------------------------------------------------------------------

    def launch(self, spec: LaunchSpec) -> list[Node]:
        if not spec.zone:
            raise InvalidLaunchError("a TPU VM launch needs a zone")
        present = {n["name"].rsplit("/", 1)[-1] for n in self._nodes(spec.zone) if _live(n)}
        created: list[str] = []
        failures: list[CloudError] = []
        operations: list[dict[str, Any]] = []
        for rank in range(spec.num_nodes):
            name = node_name(spec.cluster_id, rank)
            if name in present:
                continue
            try:
                operation = self._create(spec, rank, name)
            except CloudError as error:
                failures.append(error)
                break
            if operation is not None:
                created.append(name)
                operations.append(operation)
        for operation in operations:
            try:
                self._wait(operation)
            except CloudError as error:
                failures.append(error)
        if failures:
            for name in created:
                self._delete(spec.zone, name)
            raise failures[0]
        return [n for n in self.describe(spec.cluster_id) if n.state == "running"]

    def terminate(self, cluster_id: str) -> None:
        for node in self._nodes("-"):
            labels = node.get("labels") or {}
            if labels.get(CLUSTER_TAG) == gcp_label(cluster_id) and node.get("state") != "DELETING":
                self._delete(_zone_of(node), node["name"].rsplit("/", 1)[-1])

    def describe(self, cluster_id: str) -> list[Node]:
        return self._workers(CLUSTER_TAG, gcp_label(cluster_id))

    def list_owned(self) -> list[Node]:
        return self._workers(MANAGED_TAG, "true")

    # -- nodes -----------------------------------------------------------------------------

    def node_body(self, spec: LaunchSpec, rank: int, name: str) -> dict[str, Any]:
        kind = accelerator_type(spec)
        generation = kind.rsplit("-", 1)[0]
        labels = {gcp_label(k): gcp_label(v) for k, v in spec.labels.items()}
        labels.update({gcp_label(k): gcp_label(v) for k, v in {**spec.tags(), RANK_TAG: str(rank)}.items()})
        body: dict[str, Any] = {
            "acceleratorType": kind,
            "runtimeVersion": DEFAULT_RUNTIMES.get(generation, "tpu-ubuntu2204-base"),
            "networkConfig": {"enableExternalIps": True},
            "labels": labels,
            "metadata": {"startup-script": tpu_startup_script(spec, name)},
        }
        if spec.use_spot:
            body["schedulingConfig"] = {"spot": True}
        return body

    def _create(self, spec: LaunchSpec, rank: int, name: str) -> dict[str, Any] | None:
        """The create's operation, or None when a node of that name already exists (409)."""
        rid = str(uuid.uuid5(REQUEST_NAMESPACE, f"{spec.attempt_id}/{spec.zone}/tpu/{rank}"))
        return self.client.request(
            "POST",
            f"{self._location(spec.zone or '')}/nodes",
            params={"nodeId": name, "requestId": rid},
            json=self.node_body(spec, rank, name),
            missing_ok=(409,),
        )

    def _wait(self, operation: dict[str, Any]) -> dict[str, Any]:
        deadline = time.monotonic() + self.operation_timeout
        while not operation.get("done"):
            if time.monotonic() > deadline:
                raise TransientCloudError(f"TPU operation {operation.get('name')} still running")
            time.sleep(self.poll_seconds)
            operation = self.client.request("GET", str(operation["name"]))
        error = operation.get("error")
        if error:
            status, http_status = _RPC_CODES.get(int(error.get("code", 2)), ("UNKNOWN", 400))
            raise classify_status(status, str(error.get("message", "")), http_status)
        return operation

    def _delete(self, zone: str, name: str) -> None:
        self.client.request("DELETE", f"{self._location(zone)}/nodes/{name}", missing_ok=(404,))

    def _location(self, zone: str) -> str:
        return f"projects/{self.project}/locations/{zone}"

    def _nodes(self, zone: str) -> list[dict[str, Any]]:
        """Every node in a zone (`-`: in every zone), every page."""
        found: list[dict[str, Any]] = []
        params: dict[str, Any] = {}
        while True:
            page = self.client.request("GET", f"{self._location(zone)}/nodes", params=params) or {}
            found.extend(page.get("nodes") or [])
            if not page.get("nextPageToken"):
                return found
            params["pageToken"] = page["nextPageToken"]

    def _workers(self, label: str, value: str) -> list[Node]:
        workers = [
            worker
            for node in self._nodes("-")
            if (node.get("labels") or {}).get(gcp_label(label)) == value
            for worker in _node_workers(node)
        ]
        return sorted(workers, key=lambda n: n.instance_id)


def _live(node: dict[str, Any]) -> bool:
    return node.get("state") in LIVE_STATES


def _zone_of(node: dict[str, Any]) -> str:
    """`projects/p/locations/us-central1-a/nodes/x` → `us-central1-a`."""
    parts = str(node.get("name", "")).split("/")
    return parts[3] if len(parts) > 3 else ""


def _node_workers(node: dict[str, Any]) -> list[Node]:
    labels = dict(node.get("labels") or {})
    zone = _zone_of(node)
    name = str(node["name"]).rsplit("/", 1)[-1]
    endpoints = node.get("networkEndpoints") or [{}]
    state = "running" if _live(node) else "terminated"  # CREATING counts: it is ours, and it will bill
    return [
        Node(
            instance_id=f"{name}-w{worker:03d}",
            cluster_id=labels.get(CLUSTER_TAG, ""),
            job_id=labels.get(JOB_TAG, ""),
            ip=str(endpoint.get("ipAddress", "")),
            state=state,
            cloud="gcp",
            region=zone.rsplit("-", 1)[0],
            zone=zone,
            instance_type=TPU_INSTANCE_TYPE,
            use_spot=bool((node.get("schedulingConfig") or {}).get("spot")),
            tags={
                **labels,
                "tpu-state": str(node.get("state", "")),
                "tpu-accelerator": str(node.get("acceleratorType")),
            },
        )
        for worker, endpoint in enumerate(endpoints)
    ]


class GcpCloud:
    """GCP: Compute Engine VMs, and TPU VMs for candidates whose instance type is `TPU-VM`."""

    name = "gcp"

    def __init__(self, compute: GcpCompute, tpus: GcpTpuVms) -> None:
        self.compute = compute
        self.tpus = tpus

    @classmethod
    def from_env(cls) -> GcpCloud:
        config = GcpConfig.from_env()
        return cls(GcpCompute.from_config(config), GcpTpuVms.from_config(config))

    def launch(self, spec: LaunchSpec) -> list[Node]:
        if spec.instance_type == TPU_INSTANCE_TYPE:
            return self.tpus.launch(spec)
        return self.compute.launch(spec)

    def terminate(self, cluster_id: str) -> None:
        self.compute.terminate(cluster_id)
        self.tpus.terminate(cluster_id)

    def describe(self, cluster_id: str) -> list[Node]:
        return sorted(
            self.compute.describe(cluster_id) + self.tpus.describe(cluster_id), key=lambda n: n.instance_id
        )

    def list_owned(self) -> list[Node]:
        return self.compute.list_owned() + self.tpus.list_owned()

    def leftover_clusters(self) -> list[tuple[str, str]]:
        return self.compute.leftover_clusters()

    def stop(self, cluster_id: str) -> None:
        """Compute Engine VMs only: clusters on TPU VMs are refused before (shared/clusters/stopping.py)."""
        self.compute.stop(cluster_id)

    def start(self, cluster_id: str, agent_env: dict[str, str]) -> list[Node]:
        return self.compute.start(cluster_id, agent_env)
