"""RunPod's GraphQL API (POST /graphql): `podFindAndDeployOnDemand`, `podRentInterruptable`,
`podTerminate`, `myself { pods }` and `gpuTypes { lowestPrice }`. Operations are recognised by their
top-level field and read their arguments from `variables` (how the provider sends them); input objects
are checked against the fields of RunPod's input types, as a GraphQL server would. Errors are GraphQL
`errors[].message` with HTTP 200 (capacity, balance, limits) or HTTP 400 (validation) / 401 (API key)."""

from __future__ import annotations

import itertools
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from werkzeug.wrappers import Request, Response

from fakes.http_server import FakeServer, json_response

API_KEY = "rpa_TESTKEY"
ON_DEMAND_FIELDS = {
    "aiApiId", "allowedCudaVersions", "cloudType", "containerDiskInGb", "countryCode", "dataCenterId",
    "deployCost", "dockerArgs", "env", "globalNetwork", "gpuCount", "gpuTypeId", "gpuTypeIdList", "imageName",
    "minDisk", "minDownload", "minMemoryInGb", "minUpload", "minVcpuCount", "name", "networkVolumeId", "port",
    "ports", "startJupyter", "startSsh", "stopAfter", "supportPublicIp", "templateId", "terminateAfter",
    "volumeInGb", "volumeKey", "volumeMountPath",
}  # fmt: skip
INTERRUPTABLE_FIELDS = (ON_DEMAND_FIELDS - {"aiApiId", "deployCost", "gpuTypeIdList", "supportPublicIp"}) | {
    "bidPerGpu"
}
NO_CAPACITY = (
    "There are no longer any instances available with the requested specifications. "
    "Please refresh and try again."
)
OPERATION = re.compile(
    r"\b(podFindAndDeployOnDemand|podRentInterruptable|podTerminate|myself|gpuTypes)\s*[({]"
)


def _errors(message: str, path: str | None = None, status: int = 200) -> Response:
    error: dict[str, Any] = {"message": message, "locations": [{"line": 1, "column": 1}]}
    if path:
        error["path"] = [path]
    return json_response({"errors": [error], "data": {path: None} if path else None}, status=status)


@dataclass
class FakeRunPod:
    api_key: str = API_KEY
    url: str = ""
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    no_capacity: set[str] = field(default_factory=set)  # data center ids or gpuTypeIds
    minimum_bids: dict[str, float] = field(default_factory=lambda: {"NVIDIA H100 80GB HBM3": 1.35})
    pod_limit: int | None = None  # running pods the account may have
    low_balance: bool = False
    throttle_next: int = 0
    deploys: list[dict[str, Any]] = field(default_factory=list)  # every accepted deploy input
    lock: threading.Lock = field(default_factory=threading.Lock)
    ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    def handle(self, request: Request) -> Response:
        with self.lock:
            if self.throttle_next > 0:
                self.throttle_next -= 1
                return json_response({"errors": [{"message": "Too many requests"}]}, status=429)
            key = request.args.get("api_key") or request.headers.get("Authorization", "").removeprefix(
                "Bearer "
            )
            if key != self.api_key:
                return json_response({"errors": [{"message": "Unauthorized"}]}, status=401)
            body = request.get_json(silent=True) or {}
            match = OPERATION.search(str(body.get("query", "")))
            if request.method != "POST" or request.path != "/graphql" or match is None:
                return _errors("Syntax Error: unknown operation.", status=400)
            variables = body.get("variables") or {}
            operation = match[1]
            if operation == "myself":
                return json_response({"data": {"myself": {"pods": self._list()}}})
            if operation == "gpuTypes":
                return self._gpu_types(variables)
            if operation == "podTerminate":
                return self._terminate(variables.get("input") or {})
            return self._deploy(operation, variables.get("input") or {})

    def _deploy(self, operation: str, pod_input: dict[str, Any]) -> Response:
        spot = operation == "podRentInterruptable"
        allowed = INTERRUPTABLE_FIELDS if spot else ON_DEMAND_FIELDS
        type_name = "PodRentInterruptableInput" if spot else "PodFindAndDeployOnDemandInput"
        unknown = sorted(set(pod_input) - allowed)
        if unknown:
            return _errors(
                f'Variable "$input" got invalid value; Field "{unknown[0]}" '
                f'is not defined by type "{type_name}".',
                status=400,
            )
        required = ["gpuCount", "bidPerGpu"] if spot else ["gpuCount"]
        missing = [name for name in required if name not in pod_input]
        if missing:
            return _errors(
                f'Variable "$input" got invalid value; '
                f'Field "{missing[0]}" of required type was not provided.',
                status=400,
            )
        if self.low_balance:
            return _errors("You do not have enough funds to deploy this pod. Please add credits.", operation)
        live = [p for p in self.pods.values() if p["desiredStatus"] == "RUNNING"]
        if self.pod_limit is not None and len(live) >= self.pod_limit:
            return _errors(
                f"You have reached the limit of {self.pod_limit} running pods for your account.", operation
            )
        if {pod_input.get("dataCenterId"), pod_input.get("gpuTypeId")} & self.no_capacity:
            return _errors(NO_CAPACITY, operation)
        if spot and pod_input["bidPerGpu"] < self.minimum_bids.get(pod_input.get("gpuTypeId", ""), 0.0):
            return _errors("Your bid price is too low for the requested GPU.", operation)
        self.deploys.append(pod_input)
        number = next(self.ids)
        pod_id = f"pod{number:04d}x"
        self.pods[pod_id] = {
            "id": pod_id,
            "name": pod_input.get("name") or pod_id,
            "desiredStatus": "RUNNING",
            "imageName": pod_input.get("imageName"),
            "gpuCount": pod_input["gpuCount"],
            "costPerHr": 2.99,
            "env": [f"{e['key']}={e['value']}" for e in pod_input.get("env") or []],
            "dockerArgs": pod_input.get("dockerArgs"),
            "runtime": None,  # null while the container starts
            "_ip": f"10.65.0.{number % 250 + 2}",
        }
        return json_response({"data": {operation: self._public(self.pods[pod_id])}})

    def _list(self) -> list[dict[str, Any]]:
        for pod in self.pods.values():
            if pod["runtime"] is None:
                pod["runtime"] = {
                    "ports": [{"ip": pod.get("_ip", "10.65.9.9"), "isIpPublic": False, "privatePort": 22}]
                }
        return [self._public(p) for p in self.pods.values()]

    def _terminate(self, pod_input: dict[str, Any]) -> Response:
        pod_id = pod_input.get("podId")
        if pod_id not in self.pods:
            return _errors(f"Pod not found: {pod_id}", "podTerminate")
        del self.pods[pod_id]  # terminated pods leave myself.pods at once
        return json_response({"data": {"podTerminate": None}})

    def _gpu_types(self, variables: dict[str, Any]) -> Response:
        gpu_id = variables.get("id")
        bid = self.minimum_bids.get(gpu_id or "")
        lowest = None if bid is None else {"minimumBidPrice": bid, "uninterruptablePrice": round(bid * 2, 2)}
        return json_response({"data": {"gpuTypes": [{"id": gpu_id, "lowestPrice": lowest}]}})

    @staticmethod
    def _public(pod: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in pod.items() if not k.startswith("_") and k != "dockerArgs"}

    def live(self) -> list[dict[str, Any]]:
        with self.lock:
            return [p for p in self.pods.values() if p["desiredStatus"] == "RUNNING"]


def start_fake_runpod() -> tuple[FakeRunPod, FakeServer]:
    fake = FakeRunPod()
    server = FakeServer(fake.handle).start()
    fake.url = f"{server.url}/graphql"
    return fake, server
