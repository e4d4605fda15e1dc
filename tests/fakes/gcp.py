"""GCP Compute Engine v1 (instances insert/list/aggregatedList/delete, zone operations) and an OAuth
token endpoint that checks a service account's RS256 JWT, with the documented error bodies: HTTP
errors `{"error": {"code", "message", "errors": [{"reason", ...}]}}` and operation errors
`{"error": {"errors": [{"code": "ZONE_RESOURCE_POOL_EXHAUSTED", ...}]}, "httpErrorStatusCode": 503}`."""

from __future__ import annotations

import base64
import functools
import itertools
import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from werkzeug.wrappers import Request, Response

from fakes.gcp_tpu import FakeTpuApi
from fakes.http_server import FakeServer, json_response

PROJECT = "skyless-test"
STATIC_TOKEN = "ya29.static-test-token"
REFRESH_TOKEN = "1//fake-refresh-token"
CLIENT_EMAIL = "skyless@skyless-test.iam.gserviceaccount.com"
NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
MACHINE_TYPE = re.compile(r"^(n1|n2|n2d|e2|c2|c3|g2|a2|a3|a4|m1)-[a-z]+-\d+g?$")
LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
PORTS = re.compile(r"^\d{1,5}(-\d{1,5})?$")
NAME_FILTER = re.compile(r'^name eq "(.+)"$')
FILTER = re.compile(r'^labels\.([a-z0-9_-]+)\s*=\s*"?([^"\s]*)"?$')
COMPUTE = re.compile(r"^/compute/v1/projects/(?P<project>[^/]+)/(?P<rest>.+)$")


@functools.cache
def _service_account_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _http_error(status: int, reason: str, message: str) -> Response:
    body = {
        "code": status,
        "message": message,
        "errors": [{"message": message, "domain": "global", "reason": reason}],
    }
    return json_response({"error": body}, status=status)


@dataclass
class FakeGcp:
    project: str = PROJECT
    url: str = ""
    instances: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (zone, name)
    operations: dict[str, dict[str, Any]] = field(default_factory=dict)
    request_ids: dict[str, str] = field(default_factory=dict)  # requestId -> operation name
    tokens: set[str] = field(default_factory=lambda: {STATIC_TOKEN})
    firewalls: dict[str, dict[str, Any]] = field(default_factory=dict)
    stockout_zones: set[str] = field(default_factory=set)
    quota_regions: set[str] = field(default_factory=set)
    capacity_left: dict[str, int] = field(default_factory=dict)  # zone -> VMs it can still start
    throttle_next: int = 0
    page_size: int = 500
    inserts: list[dict[str, Any]] = field(default_factory=list)  # every accepted insert body
    token_grants: int = 0
    after_stopping: dict[tuple[str, str], str] = field(default_factory=dict)  # what STOPPING becomes
    power_calls: list[tuple[str, str]] = field(default_factory=list)  # ("stop" | "start", name) that acted
    slow_stops: bool = False  # VMs being stopped stay STOPPING
    lock: threading.Lock = field(default_factory=threading.Lock)
    ids: itertools.count = field(default_factory=lambda: itertools.count(1000))

    def __post_init__(self) -> None:
        self.key = _service_account_key()
        self.tpu = FakeTpuApi(self.project)  # the TPU API, under /tpu/v2 (fakes/gcp_tpu.py)

    def service_account_info(self) -> dict[str, str]:
        pem = self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()
        return {
            "type": "service_account",
            "project_id": self.project,
            "private_key_id": "fake-key-1",
            "private_key": pem,
            "client_email": CLIENT_EMAIL,
            "token_uri": f"{self.url}/token",
        }

    # -- routing ---------------------------------------------------------------------------

    def handle(self, request: Request) -> Response:
        with self.lock:
            if request.path == "/token" and request.method == "POST":
                return self._token(request)
            if self.throttle_next > 0:
                self.throttle_next -= 1
                return _http_error(429, "rateLimitExceeded", "Rate Limit Exceeded")
            header = request.headers.get("Authorization", "")
            if header.removeprefix("Bearer ") not in self.tokens:
                return _http_error(401, "authError", "Request had invalid authentication credentials.")
            if request.path.startswith("/tpu/v2/"):
                return self.tpu.handle(request)
            match = COMPUTE.match(request.path)
            if match is None or match["project"] != self.project:
                return _http_error(404, "notFound", f"The resource '{request.path}' was not found")
            parts = match["rest"].split("/")
            if parts[:2] == ["aggregated", "instances"] and request.method == "GET":
                return self._list(request, zone=None)
            if parts[0] == "global":
                return self._global(request, parts[1:])
            if len(parts) >= 3 and parts[0] == "zones":
                zone, kind, rest = parts[1], parts[2], parts[3:]
                if kind == "operations" and len(rest) == 1 and request.method == "GET":
                    return self._operation(rest[0])
                if kind == "instances" and not rest and request.method == "GET":
                    return self._list(request, zone=zone)
                if kind == "instances" and not rest and request.method == "POST":
                    return self._insert(request, zone)
                if kind == "instances" and len(rest) == 1 and request.method == "DELETE":
                    return self._delete(zone, rest[0])
                if kind == "instances" and len(rest) == 2 and request.method == "POST":
                    return self._power(zone, rest[0], rest[1])
            return _http_error(404, "notFound", f"The resource '{request.path}' was not found")

    def _global(self, request: Request, parts: list[str]) -> Response:
        if parts[:1] == ["operations"] and len(parts) == 2 and request.method == "GET":
            return self._operation(parts[1])
        if parts == ["firewalls"] and request.method == "GET":
            match = NAME_FILTER.match(request.args.get("filter", ""))
            names = [n for n in sorted(self.firewalls) if match is None or re.fullmatch(match[1], n)]
            return json_response(
                {"kind": "compute#firewallList", "items": [self.firewalls[n] for n in names]}
            )
        if parts == ["firewalls"] and request.method == "POST":
            return self._insert_firewall(request)
        if parts[:1] == ["firewalls"] and len(parts) == 2 and request.method == "DELETE":
            if self.firewalls.pop(parts[1], None) is None:
                return _http_error(
                    404, "notFound", f"The resource 'global/firewalls/{parts[1]}' was not found"
                )
            return json_response(self._new_operation("global", "delete", f"firewalls/{parts[1]}", None))
        return _http_error(404, "notFound", f"The resource '{request.path}' was not found")

    def _insert_firewall(self, request: Request) -> Response:
        request_id = request.args.get("requestId")
        if request_id and request_id in self.request_ids:
            return json_response(self.operations[self.request_ids[request_id]])
        body = request.get_json(silent=True) or {}
        name = str(body.get("name", ""))
        allowed = body.get("allowed") or []
        ports_ok = all(
            a.get("IPProtocol") in ("tcp", "udp") and all(PORTS.match(str(p)) for p in a.get("ports", []))
            for a in allowed
        )
        tags_ok = all(NAME.match(str(t)) for t in body.get("targetTags") or [])
        if (
            not NAME.match(name)
            or not allowed
            or not ports_ok
            or not tags_ok
            or body.get("direction") != "INGRESS"
        ):
            return _http_error(400, "invalid", f"Invalid value for field 'resource': firewall {body}")
        if name in self.firewalls:
            return _http_error(409, "alreadyExists", f"The resource 'global/firewalls/{name}' already exists")
        self.firewalls[name] = body
        operation = self._new_operation("global", "insert", f"firewalls/{name}", None)
        if request_id:
            self.request_ids[request_id] = operation["name"]
        return json_response(operation)

    def authorized_user_info(self) -> dict[str, str]:
        """What `gcloud auth application-default login` writes (plus a token_uri aimed at the fake)."""
        return {
            "type": "authorized_user",
            "client_id": "fake-client.apps.googleusercontent.com",
            "client_secret": "fake-client-secret",
            "refresh_token": REFRESH_TOKEN,
            "quota_project_id": self.project,
            "token_uri": f"{self.url}/token",
        }

    def _token(self, request: Request) -> Response:
        if request.form.get("grant_type") == "refresh_token":
            if request.form.get("refresh_token") != REFRESH_TOKEN:
                return json_response({"error": "invalid_grant", "error_description": "Bad Request"}, 400)
            return self._grant()
        if request.form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return json_response({"error": "unsupported_grant_type"}, status=400)
        try:
            header, claims, signature = request.form.get("assertion", "").split(".")
            self.key.public_key().verify(
                _b64decode(signature), f"{header}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256()
            )
            payload = json.loads(_b64decode(claims))
        except (ValueError, InvalidSignature):
            return json_response(
                {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}, 400
            )
        if payload.get("iss") != CLIENT_EMAIL or payload.get("aud") != f"{self.url}/token":
            return json_response({"error": "invalid_grant", "error_description": "Invalid JWT claims."}, 400)
        if payload.get("exp", 0) < time.time():
            return json_response({"error": "invalid_grant", "error_description": "Token has expired."}, 400)
        return self._grant()

    def _grant(self) -> Response:
        self.token_grants += 1
        token = f"ya29.granted-{self.token_grants}"
        self.tokens.add(token)
        return json_response({"access_token": token, "expires_in": 3599, "token_type": "Bearer"})

    # -- instances -------------------------------------------------------------------------

    def _insert(self, request: Request, zone: str) -> Response:
        request_id = request.args.get("requestId")
        if request_id and request_id in self.request_ids:
            return json_response(self.operations[self.request_ids[request_id]])
        body = request.get_json(silent=True) or {}
        problem = self._invalid(body, zone)
        if problem:
            return _http_error(400, "invalid", problem)
        name = body["name"]
        if (zone, name) in self.instances:
            message = f"The resource 'projects/{self.project}/zones/{zone}/instances/{name}' already exists"
            return _http_error(409, "alreadyExists", message)
        error = self._launch_fault(zone, body)
        operation = self._new_operation(f"zones/{zone}", "insert", f"instances/{name}", error)
        if request_id:
            self.request_ids[request_id] = operation["name"]
        if error is None:
            self.inserts.append(body)
            self.instances[(zone, name)] = self._instance(zone, body)
        return json_response(operation)

    def _invalid(self, body: dict[str, Any], zone: str) -> str | None:
        name = body.get("name", "")
        if not NAME.match(str(name)):
            return f"Invalid value for field 'resource.name': '{name}'. Must match '{NAME.pattern}'"
        machine = str(body.get("machineType", ""))
        prefix = f"zones/{zone}/machineTypes/"
        if not machine.startswith(prefix) or not MACHINE_TYPE.match(machine.removeprefix(prefix)):
            return (
                f"Invalid value for field 'resource.machineType': '{machine}'. Machine type does not exist."
            )
        for key, value in (body.get("labels") or {}).items():
            if not LABEL_KEY.match(key) or not LABEL_VALUE.match(str(value)):
                return f"Invalid value for field 'resource.labels': '{key}={value}'."
        scheduling = body.get("scheduling") or {}
        has_gpu = bool(body.get("guestAccelerators")) or machine.removeprefix(prefix).startswith(
            ("a2-", "a3-", "g2-")
        )
        if has_gpu and scheduling.get("onHostMaintenance") != "TERMINATE":
            return "Instances with guest accelerators do not support live migration."
        if scheduling.get("provisioningModel") == "SPOT" and (
            scheduling.get("automaticRestart") is not False
            or scheduling.get("onHostMaintenance") != "TERMINATE"
        ):
            return "Invalid value for field 'resource.scheduling': Spot VMs cannot restart or migrate."
        if not all(NAME.match(str(t)) for t in (body.get("tags") or {}).get("items", [])):
            return f"Invalid value for field 'resource.tags.items': {body.get('tags')}"
        disks = body.get("disks") or []
        if not disks or not disks[0].get("initializeParams", {}).get("sourceImage"):
            return "Invalid value for field 'resource.disks': a boot disk with a source image is required."
        return None

    def _launch_fault(self, zone: str, body: dict[str, Any]) -> dict[str, Any] | None:
        region = zone.rsplit("-", 1)[0]
        if zone in self.stockout_zones or self.capacity_left.get(zone, 1) < 1:
            message = (
                f"The zone 'projects/{self.project}/zones/{zone}' does not have enough resources "
                "available to fulfill the request.  Try a different zone, or try again later."
            )
            return {"code": "ZONE_RESOURCE_POOL_EXHAUSTED", "message": message, "status": 503}
        if region in self.quota_regions:
            message = f"Quota 'NVIDIA_T4_GPUS' exceeded.  Limit: 0.0 in region {region}."
            return {"code": "QUOTA_EXCEEDED", "message": message, "status": 403}
        if zone in self.capacity_left:
            self.capacity_left[zone] -= 1
        return None

    def _instance(self, zone: str, body: dict[str, Any]) -> dict[str, Any]:
        number = next(self.ids)
        zone_url = f"{self.url}/compute/v1/projects/{self.project}/zones/{zone}"
        return {
            **body,
            "kind": "compute#instance",
            "id": str(number),
            "zone": zone_url,
            "machineType": f"{zone_url}/machineTypes/{body['machineType'].rsplit('/', 1)[-1]}",
            "status": "PROVISIONING",
            "networkInterfaces": [
                {
                    "network": body.get("networkInterfaces", [{}])[0].get(
                        "network", "global/networks/default"
                    ),
                    "networkIP": f"10.128.{number // 250 % 250}.{number % 250 + 2}",
                    "accessConfigs": [{"type": "ONE_TO_ONE_NAT", "natIP": f"34.1.{number % 250}.7"}],
                }
            ],
            "selfLink": f"{zone_url}/instances/{body['name']}",
        }

    def _delete(self, zone: str, name: str) -> Response:
        instance = self.instances.get((zone, name))
        if instance is None:
            return _http_error(
                404,
                "notFound",
                f"The resource 'projects/{self.project}/zones/{zone}/instances/{name}' was not found",
            )
        instance["status"] = "STOPPING"
        self.after_stopping[(zone, name)] = "DELETED"
        return json_response(self._new_operation(f"zones/{zone}", "delete", f"instances/{name}", None))

    def _power(self, zone: str, name: str, verb: str) -> Response:
        """instances.stop and instances.start as GCE answers them: stopping a VM that is not running does
        nothing; starting one that is still stopping is `resourceNotReady`; a stopped VM is TERMINATED."""
        instance = self.instances.get((zone, name))
        if instance is None or instance["status"] == "DELETED" or verb not in ("stop", "start"):
            return _http_error(
                404,
                "notFound",
                f"The resource 'projects/{self.project}/zones/{zone}/instances/{name}' was not found",
            )
        if verb == "stop" and instance["status"] in ("PROVISIONING", "STAGING", "RUNNING"):
            instance["status"] = "STOPPING"
            self.after_stopping[(zone, name)] = "TERMINATED"
            self.power_calls.append(("stop", name))
        if verb == "start":
            if instance["status"] == "STOPPING":
                return _http_error(400, "resourceNotReady", f"The resource '{name}' is not ready")
            if instance["status"] == "TERMINATED":
                instance["status"] = "PROVISIONING"
                self.power_calls.append(("start", name))
        return json_response(self._new_operation(f"zones/{zone}", verb, f"instances/{name}", None))

    def _list(self, request: Request, zone: str | None) -> Response:
        for key, instance in list(self.instances.items()):
            if instance["status"] == "STOPPING":  # deleted, or stopped, by the next listing
                if self.slow_stops and self.after_stopping.get(key) == "TERMINATED":
                    continue
                instance["status"] = self.after_stopping.pop(key, "DELETED")
            elif instance["status"] == "DELETED":
                del self.instances[key]
            elif instance["status"] == "PROVISIONING":
                instance["status"] = "RUNNING"
        text = request.args.get("filter", "")
        match = FILTER.match(text.strip())
        if text and match is None:
            return _http_error(400, "invalid", f"Invalid list filter expression '{text}'.")
        chosen = [
            i for (z, _), i in sorted(self.instances.items())
            if i["status"] != "DELETED" and (zone is None or z == zone)
            and (match is None or (i.get("labels") or {}).get(match[1]) == match[2])
        ]  # fmt: skip
        start = int(request.args.get("pageToken") or 0)
        page = chosen[start : start + self.page_size]
        body: dict[str, Any] = {"kind": "compute#instanceList"}
        if start + self.page_size < len(chosen):
            body["nextPageToken"] = str(start + self.page_size)
        if zone is not None:
            body["items"] = [dict(i) for i in page]
            return json_response(body)
        scoped: dict[str, Any] = {}
        for instance in page:
            key = "zones/" + instance["zone"].rsplit("/", 1)[-1]
            scoped.setdefault(key, {"instances": []})["instances"].append(dict(instance))
        scoped.setdefault(
            "zones/us-central1-f", {"warning": {"code": "NO_RESULTS_ON_PAGE", "message": "none"}}
        )
        body["items"] = scoped
        return json_response(body)

    # -- operations ------------------------------------------------------------------------

    def _new_operation(
        self, scope: str, kind: str, target: str, error: dict[str, Any] | None
    ) -> dict[str, Any]:
        """`scope` is `zones/<zone>` or `global`; `target` is `instances/<name>` or `firewalls/<name>`."""
        op_name = f"operation-{next(self.ids)}"
        scope_url = f"{self.url}/compute/v1/projects/{self.project}/{scope}"
        operation: dict[str, Any] = {
            "kind": "compute#operation",
            "name": op_name,
            "operationType": kind,
            "targetLink": f"{scope_url}/{target}",
            "status": "PENDING",
            "selfLink": f"{scope_url}/operations/{op_name}",
            "_error": error,
        }
        if scope != "global":
            operation["zone"] = scope_url
        self.operations[op_name] = operation
        return {k: v for k, v in operation.items() if not k.startswith("_")}

    def _operation(self, op_name: str) -> Response:
        operation = self.operations.get(op_name)
        if operation is None:
            return _http_error(404, "notFound", f"The resource 'operations/{op_name}' was not found")
        operation["status"] = "RUNNING" if operation["status"] == "PENDING" else "DONE"
        error = operation["_error"]
        if operation["status"] == "DONE" and error:
            operation["error"] = {"errors": [{"code": error["code"], "message": error["message"]}]}
            operation["httpErrorStatusCode"] = error["status"]
        return json_response({k: v for k, v in operation.items() if not k.startswith("_")})

    def live(self) -> list[dict[str, Any]]:
        with self.lock:
            return [i for i in self.instances.values() if i["status"] in ("PROVISIONING", "RUNNING")]


def start_fake_gcp() -> tuple[FakeGcp, FakeServer]:
    fake = FakeGcp()
    server = FakeServer(fake.handle).start()
    fake.url = server.url
    return fake, server
