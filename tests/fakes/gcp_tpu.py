"""Cloud TPU API v2 (nodes create/get/list/delete, long-running operations) served by FakeGcp under
`/tpu/v2`, so it shares the fake's OAuth tokens. Documented shapes: a node
`{name: projects/p/locations/<zone>/nodes/<id>, acceleratorType, runtimeVersion, state, labels, metadata,
networkEndpoints: [{ipAddress, port}], schedulingConfig}`; an operation `{name, done, error?, response?}`
with `error` a google.rpc.Status (`{code: 8, message: "There is no more capacity in the zone ..."}`);
HTTP errors `{"error": {"code", "message", "status"}}`. `locations/-` lists every zone.

Knobs: `no_capacity_zones` (the create's operation fails with RESOURCE_EXHAUSTED), `quota_zones` (the
create answers 429 with a quota message), `hosts` (worker VMs per accelerator type, default 1)."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any

from werkzeug.wrappers import Request, Response

from fakes.http_server import json_response

NODE_ID = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
ACCELERATOR = re.compile(r"^v(2|3|4|5litepod|5p|6e)-\d+$")
LABEL = re.compile(r"^[a-z0-9_-]{0,63}$")
PATH = re.compile(r"^/tpu/v2/projects/(?P<project>[^/]+)/(?P<rest>.+)$")


def _status_error(http: int, status: str, message: str) -> Response:
    return json_response({"error": {"code": http, "message": message, "status": status}}, status=http)


@dataclass
class FakeTpuApi:
    project: str
    nodes: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (zone, node id)
    operations: dict[str, dict[str, Any]] = field(default_factory=dict)
    request_ids: dict[str, str] = field(default_factory=dict)
    creates: list[dict[str, Any]] = field(default_factory=list)  # every accepted create body
    no_capacity_zones: set[str] = field(default_factory=set)
    quota_zones: set[str] = field(default_factory=set)
    hosts: dict[str, int] = field(default_factory=lambda: {"v5litepod-16": 4, "v4-16": 2})
    page_size: int = 50
    ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    def handle(self, request: Request) -> Response:
        match = PATH.match(request.path)
        if match is None or match["project"] != self.project:
            return _status_error(404, "NOT_FOUND", f"Resource '{request.path}' was not found")
        parts = match["rest"].split("/")
        if (
            len(parts) >= 4
            and parts[0] == "locations"
            and parts[2] == "operations"
            and request.method == "GET"
        ):
            return self._operation("/".join(["projects", self.project, *parts]))
        if len(parts) >= 3 and parts[0] == "locations" and parts[2] == "nodes":
            zone, rest = parts[1], parts[3:]
            if not rest and request.method == "GET":
                return self._list(request, zone)
            if not rest and request.method == "POST":
                return self._create(request, zone)
            if len(rest) == 1 and request.method == "GET":
                node = self.nodes.get((zone, rest[0]))
                return (
                    json_response(node)
                    if node
                    else _status_error(404, "NOT_FOUND", f"node {rest[0]} not found")
                )
            if len(rest) == 1 and request.method == "DELETE":
                return self._delete(zone, rest[0])
        return _status_error(404, "NOT_FOUND", f"Resource '{request.path}' was not found")

    def _create(self, request: Request, zone: str) -> Response:
        request_id = request.args.get("requestId")
        if request_id and request_id in self.request_ids:
            return json_response(self._public(self.operations[self.request_ids[request_id]]))
        node_id = request.args.get("nodeId", "")
        body = request.get_json(silent=True) or {}
        problem = self._invalid(node_id, body)
        if problem:
            return _status_error(400, "INVALID_ARGUMENT", problem)
        if (zone, node_id) in self.nodes:
            return _status_error(409, "ALREADY_EXISTS", f"node {node_id} already exists")
        if zone in self.quota_zones:
            message = f"Quota limit 'TPUV5sLitepodPerProjectPerZoneForTPUAPI' has been exceeded in {zone}."
            return _status_error(429, "RESOURCE_EXHAUSTED", message)
        error = None
        if zone in self.no_capacity_zones:
            error = {
                "code": 8,
                "message": f'There is no more capacity in the zone "{zone}"; you can try in another zone',
            }
        else:
            self.creates.append({"zone": zone, "nodeId": node_id, **body})
            self.nodes[(zone, node_id)] = self._node(zone, node_id, body)
        operation = self._new_operation(zone, error)
        if request_id:
            self.request_ids[request_id] = operation["name"]
        return json_response(self._public(operation))

    def _invalid(self, node_id: str, body: dict[str, Any]) -> str | None:
        if not NODE_ID.match(node_id):
            return f"Invalid node id '{node_id}'"
        if not ACCELERATOR.match(str(body.get("acceleratorType", ""))):
            return f"Invalid acceleratorType '{body.get('acceleratorType')}'"
        if not body.get("runtimeVersion"):
            return "runtimeVersion is required"
        for key, value in (body.get("labels") or {}).items():
            if not LABEL.match(key) or not LABEL.match(str(value)):
                return f"Invalid label {key}={value}"
        metadata = body.get("metadata") or {}
        if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
            return "metadata must map strings to strings"
        return None

    def _node(self, zone: str, node_id: str, body: dict[str, Any]) -> dict[str, Any]:
        number = next(self.ids)
        hosts = self.hosts.get(body["acceleratorType"], 1)
        return {
            **body,
            "name": f"projects/{self.project}/locations/{zone}/nodes/{node_id}",
            "state": "CREATING",
            "networkEndpoints": [
                {"ipAddress": f"10.130.{number % 250}.{worker + 2}", "port": 8470} for worker in range(hosts)
            ],
        }

    def _delete(self, zone: str, node_id: str) -> Response:
        node = self.nodes.get((zone, node_id))
        if node is None:
            return _status_error(404, "NOT_FOUND", f"node {node_id} not found")
        node["state"] = "DELETING"
        return json_response(self._public(self._new_operation(zone, None)))

    def _list(self, request: Request, zone: str) -> Response:
        for key, node in list(self.nodes.items()):  # time passes between listings
            if node["state"] == "CREATING":
                node["state"] = "READY"
            elif node["state"] == "DELETING":
                del self.nodes[key]
        chosen = [n for (z, _), n in sorted(self.nodes.items()) if zone in ("-", z)]
        start = int(request.args.get("pageToken") or 0)
        body: dict[str, Any] = {"nodes": [dict(n) for n in chosen[start : start + self.page_size]]}
        if start + self.page_size < len(chosen):
            body["nextPageToken"] = str(start + self.page_size)
        return json_response(body)

    def _new_operation(self, zone: str, error: dict[str, Any] | None) -> dict[str, Any]:
        name = f"projects/{self.project}/locations/{zone}/operations/operation-{next(self.ids)}"
        operation = {"name": name, "done": False, "_error": error, "_zone": zone}
        self.operations[name] = operation
        return operation

    def _operation(self, name: str) -> Response:
        operation = self.operations.get(name)
        if operation is None:
            return _status_error(404, "NOT_FOUND", f"operation {name} not found")
        operation["done"] = True
        for node in self.nodes.values():
            if node["state"] == "CREATING" and node["name"].split("/")[3] == operation["_zone"]:
                node["state"] = "READY"
        return json_response(self._public(operation))

    @staticmethod
    def _public(operation: dict[str, Any]) -> dict[str, Any]:
        body = {k: v for k, v in operation.items() if not k.startswith("_")}
        if operation["done"] and operation["_error"]:
            body["error"] = operation["_error"]
        return body

    def live(self) -> list[dict[str, Any]]:
        return [n for n in self.nodes.values() if n["state"] in ("CREATING", "READY")]
