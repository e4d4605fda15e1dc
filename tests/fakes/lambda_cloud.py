"""Lambda Cloud API v1 (https://cloud.lambdalabs.com/api/v1): instances, launch, terminate, ssh-keys,
with the documented `{"error": {"code", "message", "suggestion"}}` bodies."""

from __future__ import annotations

import base64
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from werkzeug.wrappers import Request, Response

from fakes.http_server import FakeServer, json_response

API_KEY = "secret_test-lambda-key"
BASE_PATH = "/api/v1"


def _error(status: int, code: str, message: str, suggestion: str | None = None) -> Response:
    body: dict[str, Any] = {"code": code, "message": message}
    if suggestion:
        body["suggestion"] = suggestion
    return json_response({"error": body}, status=status)


@dataclass
class FakeLambdaCloud:
    api_key: str = API_KEY
    url: str = ""  # the API base URL, set when the server starts
    instances: dict[str, dict[str, Any]] = field(default_factory=dict)
    ssh_keys: list[dict[str, str]] = field(default_factory=list)
    no_capacity: set[str] = field(default_factory=set)  # region names, "region/instance type" or "*"
    quota_exceeded: set[str] = field(default_factory=set)  # instance type names
    capacity_left: dict[str, int] = field(default_factory=dict)  # region -> instances it can still start
    throttle_next: int = 0  # answer this many requests with 429
    requests: list[tuple[str, str]] = field(default_factory=list)
    launches: list[dict[str, Any]] = field(default_factory=list)  # every accepted launch body
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, request: Request) -> Response:
        with self.lock:
            self.requests.append((request.method, request.path))
            if self.throttle_next > 0:
                self.throttle_next -= 1
                return _error(429, "global/too-many-requests", "Too many requests.", "Try again later.")
            if not self._authorized(request):
                return _error(
                    401, "global/invalid-api-key", "API key was invalid, expired, or deleted.",
                    "Check your API key or create a new one, then try again.",
                )  # fmt: skip
            path = request.path.removeprefix(BASE_PATH)
            route = (request.method, path)
            if route == ("GET", "/instances"):
                return json_response({"data": self._list()})
            if route == ("POST", "/instance-operations/launch"):
                return self._launch(request.get_json(silent=True) or {})
            if route == ("POST", "/instance-operations/terminate"):
                return self._terminate(request.get_json(silent=True) or {})
            if route == ("GET", "/ssh-keys"):
                return json_response({"data": self.ssh_keys})
            if route == ("POST", "/ssh-keys"):
                return self._add_key(request.get_json(silent=True) or {})
            return _error(404, "global/object-does-not-exist", f"No route {request.method} {request.path}.")

    def _authorized(self, request: Request) -> bool:
        header = request.headers.get("Authorization", "")
        if header == f"Bearer {self.api_key}":
            return True
        if header.startswith("Basic "):
            user = base64.b64decode(header[6:]).decode().partition(":")[0]
            return user == self.api_key
        return False

    def _list(self) -> list[dict[str, Any]]:
        for record in list(self.instances.values()):
            if record["status"] == "terminating":
                del self.instances[record["id"]]  # gone by the next listing
            elif record["status"] == "booting":
                record["status"] = "active"
        return [dict(r) for r in self.instances.values()]

    def _launch(self, body: dict[str, Any]) -> Response:
        region, itype = body.get("region_name"), body.get("instance_type_name")
        keys = body.get("ssh_key_names")
        quantity = body.get("quantity", 1)
        if not isinstance(region, str) or not isinstance(itype, str):
            return _error(
                400, "global/invalid-parameters", "region_name and instance_type_name are required."
            )
        if not isinstance(keys, list) or len(keys) != 1:
            return _error(400, "global/invalid-parameters", "Must provide exactly one SSH key.")
        if keys[0] not in {k["name"] for k in self.ssh_keys}:
            return _error(404, "global/object-does-not-exist", f"SSH key {keys[0]!r} does not exist.")
        if not isinstance(quantity, int) or quantity < 1:
            return _error(400, "global/invalid-parameters", "quantity must be a positive integer.")
        if {"*", region, f"{region}/{itype}"} & self.no_capacity:
            return _error(
                400, "instance-operations/launch/insufficient-capacity",
                "Not enough capacity to fulfill launch request.",
                "Choose an instance type with more availability, or try again later.",
            )  # fmt: skip
        if self.capacity_left.get(region, quantity) < quantity:
            return _error(
                400, "instance-operations/launch/insufficient-capacity",
                "Not enough capacity to fulfill launch request.",
            )  # fmt: skip
        if region in self.capacity_left:
            self.capacity_left[region] -= quantity
        if itype in self.quota_exceeded:
            return _error(
                400, "global/quota-exceeded", "Quota exceeded.", "Contact Support to increase your quota."
            )
        self.launches.append(body)
        ids = []
        for _ in range(quantity):
            instance_id = uuid.uuid4().hex
            octet = len(self.instances) % 250 + 2
            self.instances[instance_id] = {
                "id": instance_id,
                "name": body.get("name"),
                "ip": f"198.51.100.{octet}",
                "private_ip": f"10.0.0.{octet}",
                "status": "booting",
                "ssh_key_names": keys,
                "file_system_names": body.get("file_system_names", []),
                "region": {"name": region, "description": region},
                "instance_type": {"name": itype, "description": itype, "price_cents_per_hour": 129},
                "hostname": f"{region}-{octet}",
                "is_reserved": False,
                "user_data": body.get("user_data"),
            }
            ids.append(instance_id)
        return json_response({"data": {"instance_ids": ids}})

    def _terminate(self, body: dict[str, Any]) -> Response:
        ids = body.get("instance_ids")
        if not isinstance(ids, list) or not ids:
            return _error(400, "global/invalid-parameters", "instance_ids must be a non-empty list.")
        missing = [i for i in ids if i not in self.instances]
        if missing:
            return _error(404, "global/object-does-not-exist", f"Instances not found: {missing}.")
        for instance_id in ids:
            self.instances[instance_id]["status"] = "terminating"
        return json_response({"data": {"terminated_instances": [dict(self.instances[i]) for i in ids]}})

    def _add_key(self, body: dict[str, Any]) -> Response:
        name = body.get("name")
        if not isinstance(name, str) or any(k["name"] == name for k in self.ssh_keys):
            return _error(400, "global/invalid-parameters", "A unique key name is required.")
        key = {
            "id": uuid.uuid4().hex,
            "name": name,
            "public_key": body.get("public_key") or "ssh-ed25519 AAAA",
        }
        self.ssh_keys.append(key)
        answer = dict(key)
        if not body.get("public_key"):
            answer["private_key"] = (
                "-----BEGIN OPENSSH PRIVATE KEY-----\nfake\n-----END OPENSSH PRIVATE KEY-----\n"
            )
        return json_response({"data": answer})

    def live(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.instances.values() if r["status"] not in ("terminating", "terminated")]


def start_fake_lambda() -> tuple[FakeLambdaCloud, FakeServer]:
    fake = FakeLambdaCloud()
    server = FakeServer(fake.handle).start()
    fake.url = server.url + BASE_PATH
    return fake, server
