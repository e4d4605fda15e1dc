"""RunPod over its GraphQL API (https://api.runpod.io/graphql).

Credentials: `RUNPOD_API_KEY`, else `api_key` in `~/.runpod/config.toml` (the runpod CLI's file, profile
`default`). `SKYLESS_RUNPOD_API_URL` overrides the endpoint (tests).

Instance types are the catalog's `<n>x_<GPU>_<SECURE|COMMUNITY>`; the region is the RunPod data center.
Each node is one pod named `skyless-<cluster>-<rank>` (RunPod has no tags: the name carries them, and
a launch skips names that already run). Spot pods bid RunPod's current minimum bid per GPU. The pod
runs the node agent's boot script, passed base64-encoded in its environment.
"""

from __future__ import annotations

import base64
import re
import tomllib
from pathlib import Path
from typing import Any

import httpx

from shared.clouds.base import CLUSTER_TAG, JOB_TAG, LaunchSpec, Node
from shared.clouds.errors import (
    CloudAuthError,
    CloudError,
    InvalidLaunchError,
    NoCapacityError,
    QuotaError,
    TransientCloudError,
)
from shared.clouds.node_names import node_name, tags_from_name
from shared.clouds.rest_client import RestClient, body_of, error_for_status
from shared.clouds.spec_fields import container_image_for, image_for
from shared.clouds.startup_script import startup_script
from shared.config.clouds import RunPodConfig

DEFAULT_URL = "https://api.runpod.io/graphql"
CONFIG_FILE = Path("~/.runpod/config.toml")
DEFAULT_IMAGE = "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04"
DEFAULT_DISK_GB = 50
MAX_PORTS = 64
# Catalog GPU names -> RunPod gpuTypeId (the ids RunPod's API lists under gpuTypes).
GPU_TYPE_IDS = {
    "A100-80GB": "NVIDIA A100 80GB PCIe",
    "A100-80GB-SXM": "NVIDIA A100-SXM4-80GB",
    "A40": "NVIDIA A40",
    "H100": "NVIDIA H100 PCIe",
    "H100-PCIe": "NVIDIA H100 PCIe",
    "H100-SXM": "NVIDIA H100 80GB HBM3",
    "H100-NVL": "NVIDIA H100 NVL",
    "H200-SXM": "NVIDIA H200",
    "L4": "NVIDIA L4",
    "L40": "NVIDIA L40",
    "L40S": "NVIDIA L40S",
    "RTX3090": "NVIDIA GeForce RTX 3090",
    "RTX4090": "NVIDIA GeForce RTX 4090",
    "RTXA6000": "NVIDIA RTX A6000",
    "RTX6000-Ada": "NVIDIA RTX 6000 Ada Generation",
    "MI300X": "AMD Instinct MI300X OAM",
    "B200": "NVIDIA B200",
}
INSTANCE_TYPE = re.compile(r"^(?P<count>\d+)x_(?P<gpu>.+)_(?P<cloud>SECURE|COMMUNITY|ALL)$")
POD_FIELDS = (
    "id name desiredStatus imageName gpuCount costPerHr env runtime { ports { ip isIpPublic privatePort } }"
)
DEPLOY = {
    False: "mutation Deploy($input: PodFindAndDeployOnDemandInput!) "
    f"{{ podFindAndDeployOnDemand(input: $input) {{ {POD_FIELDS} }} }}",
    True: "mutation Bid($input: PodRentInterruptableInput!) "
    f"{{ podRentInterruptable(input: $input) {{ {POD_FIELDS} }} }}",
}
PODS = f"query Pods {{ myself {{ pods {{ {POD_FIELDS} }} }} }}"
TERMINATE = "mutation Terminate($input: PodTerminateInput!) { podTerminate(input: $input) }"
MINIMUM_BID = (
    "query Bid($id: String!, $lowest: LowestPriceInput!) "
    "{ gpuTypes(input: {id: $id}) { id lowestPrice(input: $lowest) "
    "{ minimumBidPrice uninterruptablePrice } } }"
)
CAPACITY_WORDS = ("no longer any instances available", "no available", "bid price is too low")
AUTH_WORDS = ("unauthorized", "api key", "not authenticated", "funds", "balance is too low")
QUOTA_WORDS = ("quota", "limit")
TRANSIENT_WORDS = ("try again later", "timeout", "rate limit", "too many requests")


def classify_message(message: str) -> CloudError:
    text = message.lower()
    for words, kind in (
        (AUTH_WORDS, CloudAuthError),  # first: "not enough funds" is about the account, not capacity
        (CAPACITY_WORDS, NoCapacityError),
        (TRANSIENT_WORDS, TransientCloudError),
        (QUOTA_WORDS, QuotaError),
    ):
        if any(word in text for word in words):
            return kind(message)
    return InvalidLaunchError(message)


def classify_runpod_http_error(response: httpx.Response) -> CloudError:
    body = body_of(response)
    errors = body.get("errors") if isinstance(body, dict) else None
    message = "; ".join(str(e.get("message")) for e in errors or []) or response.text[:300]
    return error_for_status(response.status_code, f"{response.status_code}: {message}")


def api_key_from_file() -> str | None:
    """The key `runpod config` keeps in ~/.runpod/config.toml."""
    path = CONFIG_FILE.expanduser()
    if path.exists():
        try:
            config = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError:
            return None
        profile = config.get("default", config)  # the profile, or a flat file (as skyless check reads it)
        return profile.get("api_key") if isinstance(profile, dict) else None
    return None


def expand_ports(ports: tuple[str, ...]) -> list[int]:
    """RunPod exposes single ports only: `"10000-10002"` -> 10000, 10001, 10002."""
    expanded: list[int] = []
    for port in ports:
        low, _, high = str(port).partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise InvalidLaunchError(f"port {port!r} is not a number or a range")
        expanded.extend(range(int(low), int(high or low) + 1))
    if len(expanded) > MAX_PORTS:
        raise InvalidLaunchError(
            f"RunPod exposes at most {MAX_PORTS} ports; the task asks for {len(expanded)}"
        )
    return expanded


def parse_instance_type(instance_type: str) -> tuple[int, str, str]:
    """`2x_H100-SXM_SECURE` -> (2, "NVIDIA H100 80GB HBM3", "SECURE")."""
    match = INSTANCE_TYPE.match(instance_type)
    if match is None or match["gpu"] not in GPU_TYPE_IDS:
        raise InvalidLaunchError(
            f"RunPod instance type {instance_type!r} is not <n>x_<GPU>_<SECURE|COMMUNITY>"
        )
    return int(match["count"]), GPU_TYPE_IDS[match["gpu"]], match["cloud"]


class RunPod:
    name = "runpod"

    def __init__(self, api_key: str | None, base_url: str = DEFAULT_URL) -> None:
        self.api_key = api_key
        self.client = RestClient(base_url, self._headers, classify_runpod_http_error)

    @classmethod
    def from_env(cls) -> RunPod:
        return cls.from_config(RunPodConfig.from_env())

    @classmethod
    def from_config(cls, config: RunPodConfig) -> RunPod:
        return cls(config.api_key or api_key_from_file(), base_url=config.api_url or DEFAULT_URL)

    def _headers(self) -> dict[str, str]:
        if not self.api_key:
            raise CloudAuthError("no RunPod API key: set RUNPOD_API_KEY or run `runpod config`")
        return {"Authorization": f"Bearer {self.api_key}"}

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        body = self.client.request("POST", "", json={"query": query, "variables": variables or {}}) or {}
        if body.get("errors"):
            raise classify_message("; ".join(str(e.get("message")) for e in body["errors"]))
        return dict(body.get("data") or {})

    # -- the protocol ----------------------------------------------------------------------

    def launch(self, spec: LaunchSpec) -> list[Node]:
        count, gpu_type, cloud_type = parse_instance_type(spec.instance_type)
        running = {n.instance_id: n for n in self.describe(spec.cluster_id) if n.state == "running"}
        started: list[str] = []
        try:
            for rank in range(spec.num_nodes):
                name = node_name(spec.cluster_id, rank)
                if name in running and self._same_place(running[name], spec):
                    continue
                started.append(self._deploy(spec, name, count, gpu_type, cloud_type))
        except CloudError:
            for pod_id in started:  # all or nothing
                self._terminate_pod(pod_id)
            raise
        return [
            n for n in self.describe(spec.cluster_id) if n.state == "running" and self._same_place(n, spec)
        ]

    def terminate(self, cluster_id: str) -> None:
        for node in self.describe(cluster_id):
            self._terminate_pod(node.tags["runpod-pod-id"])

    def describe(self, cluster_id: str) -> list[Node]:
        return [n for n in self.list_owned() if n.cluster_id == cluster_id]

    def list_owned(self) -> list[Node]:
        pods = (self.graphql(PODS).get("myself") or {}).get("pods") or []
        nodes = (self._node(p) for p in pods)
        return sorted((n for n in nodes if n is not None), key=lambda n: n.instance_id)

    # -- pods ------------------------------------------------------------------------------

    def pod_input(
        self, spec: LaunchSpec, name: str, count: int, gpu_type: str, cloud_type: str
    ) -> dict[str, Any]:
        boot = startup_script(spec, pinned_id=name, container=False)  # the agent runs inside the image
        image = container_image_for(spec) or image_for(spec) or DEFAULT_IMAGE  # the pod is the image
        env = {
            "SKYLESS_BOOT": base64.b64encode(boot.encode()).decode(),
            "SKYLESS_REGION": spec.region,
            "SKYLESS_INSTANCE_TYPE": spec.instance_type,
            "SKYLESS_SPOT": "1" if spec.use_spot else "0",
        }
        pod: dict[str, Any] = {
            "name": name,
            "imageName": image,
            "gpuTypeId": gpu_type,
            "gpuCount": count,
            "cloudType": cloud_type,
            "dataCenterId": spec.region,
            "containerDiskInGb": spec.disk_size_gb or DEFAULT_DISK_GB,
            "volumeInGb": 0,
            "minVcpuCount": 4 * count,
            "dockerArgs": 'bash -c \'echo "$SKYLESS_BOOT" | base64 -d > /tmp/skyless-boot.sh && '
            "bash /tmp/skyless-boot.sh && sleep infinity'",
            "env": [{"key": k, "value": v} for k, v in env.items()],
        }
        if spec.ports:
            pod["ports"] = ",".join(f"{port}/tcp" for port in expand_ports(spec.ports))
        return pod

    def _deploy(self, spec: LaunchSpec, name: str, count: int, gpu_type: str, cloud_type: str) -> str:
        pod_input = self.pod_input(spec, name, count, gpu_type, cloud_type)
        if spec.use_spot:
            pod_input["bidPerGpu"] = self._minimum_bid(gpu_type, count, cloud_type, spec.region)
        field = "podRentInterruptable" if spec.use_spot else "podFindAndDeployOnDemand"
        pod = self.graphql(DEPLOY[spec.use_spot], {"input": pod_input}).get(field)
        if not pod:
            raise NoCapacityError(f"RunPod returned no pod for {spec.instance_type} in {spec.region}")
        return str(pod["id"])

    def _minimum_bid(self, gpu_type: str, count: int, cloud_type: str, region: str) -> float:
        lowest = {"gpuCount": count, "secureCloud": cloud_type == "SECURE", "dataCenterId": region}
        types = self.graphql(MINIMUM_BID, {"id": gpu_type, "lowest": lowest}).get("gpuTypes") or []
        price = (types[0].get("lowestPrice") or {}).get("minimumBidPrice") if types else None
        if not price:
            raise NoCapacityError(f"RunPod has no spot {gpu_type} x{count} in {region} to bid on")
        return float(price)

    def _terminate_pod(self, pod_id: str) -> None:
        try:
            self.graphql(TERMINATE, {"input": {"podId": pod_id}})
        except InvalidLaunchError as error:
            if "not found" not in error.message.lower():  # already gone is what we wanted
                raise

    @staticmethod
    def _same_place(node: Node, spec: LaunchSpec) -> bool:
        return (node.region, node.instance_type, node.use_spot) == (
            spec.region,
            spec.instance_type,
            spec.use_spot,
        )

    @staticmethod
    def _node(pod: dict[str, Any]) -> Node | None:
        tags = tags_from_name(pod.get("name") or "")
        if tags is None:
            return None
        env = dict(str(e).partition("=")[::2] for e in pod.get("env") or [])
        ports = (pod.get("runtime") or {}).get("ports") or []
        private = [p["ip"] for p in ports if p.get("ip") and not p.get("isIpPublic")]
        public = [p["ip"] for p in ports if p.get("ip") and p.get("isIpPublic")]
        return Node(
            instance_id=pod["name"],
            cluster_id=tags[CLUSTER_TAG],
            job_id=tags[JOB_TAG],
            ip=(private or public or [""])[0],
            state="running" if pod.get("desiredStatus") == "RUNNING" else "terminated",
            cloud="runpod",
            region=env.get("SKYLESS_REGION", ""),
            zone=None,
            instance_type=env.get("SKYLESS_INSTANCE_TYPE", ""),
            use_spot=env.get("SKYLESS_SPOT") == "1",
            tags={**tags, "runpod-pod-id": str(pod["id"])},
        )
