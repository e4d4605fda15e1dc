"""Azure: the Microsoft identity platform token endpoint (client credentials) and the Resource Manager
calls the provider makes: resource groups, virtual networks, public IPs, NICs and VMs (PUT, GET lists
with `nextLink`, DELETE with deleteOption cascades), tag-filtered resource lists, and long-running
operations answered through `Azure-AsyncOperation`. Errors are ARM's `{"error": {"code", "message"}}`."""

from __future__ import annotations

import base64
import binascii
import itertools
import re
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from werkzeug.wrappers import Request, Response

from fakes.http_server import FakeServer, json_response

SUBSCRIPTION = "00000000-0000-0000-0000-0000000000aa"
TENANT = "11111111-1111-1111-1111-111111111111"
CLIENT_ID = "22222222-2222-2222-2222-222222222222"
CLIENT_SECRET = "fake-secret"
VM_SIZE = re.compile(r"^Standard_[A-Z][A-Za-z0-9_]+$")
PROVIDER_PATH = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)/resourcegroups/(?P<group>[^/]+)/providers/"
    r"(?P<kind>microsoft\.[a-z]+/[a-z]+)/(?P<name>[^/]+)$"
)
TAG_FILTER = re.compile(r"^tagName eq '(?P<name>[^']+)' and tagValue eq '(?P<value>[^']*)'$")
KINDS = {
    "microsoft.network/virtualnetworks": "Microsoft.Network/virtualNetworks",
    "microsoft.network/publicipaddresses": "Microsoft.Network/publicIPAddresses",
    "microsoft.network/networkinterfaces": "Microsoft.Network/networkInterfaces",
    "microsoft.compute/virtualmachines": "Microsoft.Compute/virtualMachines",
    "microsoft.network/networksecuritygroups": "Microsoft.Network/networkSecurityGroups",
}
VM_ACTION_PATH = re.compile(
    r"^/subscriptions/[^/]+/resourcegroups/(?P<group>[^/]+)/providers/microsoft\.compute/virtualmachines/"
    r"(?P<name>[^/]+)/(?P<action>deallocate|start|powerOff)$",
    re.IGNORECASE,
)
VM_KIND = "Microsoft.Compute/virtualMachines"
NIC_KIND = "Microsoft.Network/networkInterfaces"
IP_KIND = "Microsoft.Network/publicIPAddresses"
NSG_KIND = "Microsoft.Network/networkSecurityGroups"


def _public_ip_id(ip_configuration: dict[str, Any]) -> str:
    public_ip = (ip_configuration.get("properties") or {}).get("publicIPAddress") or {}
    return str(public_ip.get("id", "")).lower()


def arm_error(status: int, code: str, message: str) -> Response:
    return json_response({"error": {"code": code, "message": message}}, status=status)


@dataclass
class FakeAzure:
    url: str = ""
    subscription: str = SUBSCRIPTION
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)  # lower-case id -> resource
    operations: dict[str, dict[str, Any]] = field(default_factory=dict)
    tokens: set[str] = field(default_factory=set)
    sku_not_available: set[str] = field(default_factory=set)  # "region/size" or "size"
    allocation_failed_regions: set[str] = field(default_factory=set)
    capacity_left: dict[str, int] = field(default_factory=dict)  # region -> VMs it can still allocate
    quota_exceeded_sizes: set[str] = field(default_factory=set)
    forbidden: bool = False  # the principal has no role on the subscription
    throttle_next: int = 0
    page_size: int = 100
    vm_creates: list[dict[str, Any]] = field(default_factory=list)  # every VM PUT that created a VM
    power_calls: list[tuple[str, str]] = field(
        default_factory=list
    )  # ("deallocate" | "start", name) that acted
    slow_deallocations: bool = False  # VMs being deallocated stay deallocating
    disks: set[str] = field(default_factory=set)  # OS disks of live VMs
    lock: threading.Lock = field(default_factory=threading.Lock)
    ids: itertools.count = field(default_factory=lambda: itertools.count(4))

    # -- routing ---------------------------------------------------------------------------

    def handle(self, request: Request) -> Response:
        with self.lock:
            if request.path == f"/{TENANT}/oauth2/v2.0/token" and request.method == "POST":
                return self._token(request)
            if self.throttle_next > 0:
                self.throttle_next -= 1
                return arm_error(429, "TooManyRequests", "The request is being throttled.")
            if request.headers.get("Authorization", "").removeprefix("Bearer ") not in self.tokens:
                return arm_error(401, "InvalidAuthenticationToken", "The access token is invalid.")
            if not request.args.get("api-version"):
                return arm_error(
                    400, "MissingApiVersionParameter", "The api-version query parameter is required."
                )
            path = request.path.lower()
            prefix = f"/subscriptions/{self.subscription}"
            if not path.startswith(prefix):
                return arm_error(
                    404, "SubscriptionNotFound", f"The subscription '{request.path}' could not be found."
                )
            if self.forbidden and request.method != "GET":
                message = (
                    f"The client '{CLIENT_ID}' does not have authorization to perform action over scope."
                )
                return arm_error(403, "AuthorizationFailed", message)
            rest = path.removeprefix(prefix)
            if rest.startswith("/providers/") and "/operations/" in rest:
                return self._operation(rest.rsplit("/", 1)[-1])
            if rest == "/resources":
                return self._tagged(request)
            if rest in (
                "/providers/microsoft.compute/virtualmachines",
                "/providers/microsoft.network/networkinterfaces",
            ):
                kind = VM_KIND if "compute" in rest else NIC_KIND
                chosen = [r for r in self.resources.values() if r["type"] == kind]
                if kind == VM_KIND and request.args.get("statusOnly") == "true":
                    chosen = [self._with_instance_view(vm) for vm in chosen]
                chosen = [{k: v for k, v in r.items() if not k.startswith("_")} for r in chosen]
                return self._page(chosen, request)
            if rest.startswith("/resourcegroups/") and rest.count("/") == 2 and request.method == "PUT":
                return self._put_group(request, rest.rsplit("/", 1)[-1])
            action = VM_ACTION_PATH.match(path)
            if action and request.method == "POST":
                return self._power(action["group"], action["name"], action["action"])
            match = PROVIDER_PATH.match(path)
            if match and match["kind"] in KINDS:
                if request.method == "PUT":
                    return self._put(
                        request, match["group"], KINDS[match["kind"]], request.path.rsplit("/", 1)[-1]
                    )
                if request.method == "DELETE":
                    return self._delete(path)
            return arm_error(404, "ResourceNotFound", f"No route {request.method} {request.path}")

    def _token(self, request: Request) -> Response:
        form = request.form
        if (
            form.get("grant_type") != "client_credentials"
            or form.get("scope") != "https://management.azure.com/.default"
        ):
            return json_response(
                {"error": "invalid_request", "error_description": "AADSTS900144: bad grant"}, 400
            )
        if form.get("client_id") != CLIENT_ID or form.get("client_secret") != CLIENT_SECRET:
            description = "AADSTS7000215: Invalid client secret provided."
            return json_response({"error": "invalid_client", "error_description": description}, 401)
        token = f"eyJ.fake.{uuid.uuid4().hex}"
        self.tokens.add(token)
        return json_response({"token_type": "Bearer", "expires_in": 3599, "access_token": token})

    # -- resource groups and resources -----------------------------------------------------

    def _put_group(self, request: Request, group: str) -> Response:
        body = request.get_json(silent=True) or {}
        created = group not in self.groups
        self.groups[group] = {"name": group, "location": body.get("location"), "tags": body.get("tags") or {}}
        return json_response(self.groups[group], status=201 if created else 200)

    def _put(self, request: Request, group: str, kind: str, name: str) -> Response:
        if group not in self.groups:
            return arm_error(404, "ResourceGroupNotFound", f"Resource group '{group}' could not be found.")
        body = request.get_json(silent=True) or {}
        resource_id = f"/subscriptions/{self.subscription}/resourceGroups/{group}/providers/{kind}/{name}"
        existing = self.resources.get(resource_id.lower())
        if kind == VM_KIND and existing is None:
            problem = self._vm_problem(body)
            if problem:
                return problem
        if kind == NIC_KIND:
            problem = self._nic_problem(body)
            if problem:
                return problem
        resource = {
            "id": resource_id, "name": name, "type": kind, "location": body.get("location"),
            "tags": body.get("tags") or {}, "properties": dict(body.get("properties") or {}),
        }  # fmt: skip
        for extra in ("zones", "sku"):
            if extra in body:
                resource[extra] = body[extra]
        failure = None
        if kind == NIC_KIND:
            octet = next(self.ids)
            resource["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"] = (
                f"10.0.{octet // 250}.{octet % 250}"
            )
        if kind == VM_KIND:
            if existing is not None:  # an idempotent re-PUT: same VM
                return json_response(existing, status=200)
            failure = self._allocation_failure(resource)
            self.vm_creates.append(body)
            resource["properties"]["provisioningState"] = "Creating"
            resource["properties"]["vmId"] = str(uuid.uuid4())
            self.disks.add(f"{name}_OsDisk")
        else:
            resource["properties"]["provisioningState"] = "Succeeded"
        self.resources[resource_id.lower()] = resource
        headers = {"Azure-AsyncOperation": self._new_operation(resource_id, failure)}
        return json_response(resource, status=200 if existing else 201, headers=headers)

    def _vm_problem(self, body: dict[str, Any]) -> Response | None:
        region = str(body.get("location"))
        properties = body.get("properties") or {}
        size = (properties.get("hardwareProfile") or {}).get("vmSize", "")
        if not VM_SIZE.match(size):
            return arm_error(
                400, "InvalidParameter", f"The value {size} provided for the VM size is not valid."
            )
        if size in self.sku_not_available or f"{region}/{size}" in self.sku_not_available:
            message = (
                f"The requested VM size '{size}' is currently not available in location '{region}'. "
                "Please try another size or deploy to a different location or zones."
            )
            return arm_error(409, "SkuNotAvailable", message)
        if size in self.quota_exceeded_sizes:
            message = (
                "Operation could not be completed as it results in exceeding approved "
                f"{size} Family Cores quota. "
                f"Additional details - Location: {region}, Current Limit: 0, Current Usage: 0."
            )
            return arm_error(409, "OperationNotAllowed", message)
        if properties.get("priority") == "Spot" and properties.get("evictionPolicy") not in (
            "Delete",
            "Deallocate",
        ):
            return arm_error(400, "InvalidParameter", "Spot VMs need an evictionPolicy.")
        os_profile = properties.get("osProfile") or {}
        try:
            base64.b64decode(os_profile.get("customData", ""), validate=True)
        except binascii.Error:
            return arm_error(400, "InvalidParameter", "customData must be base64.")
        linux = os_profile.get("linuxConfiguration") or {}
        if linux.get("disablePasswordAuthentication") and not (linux.get("ssh") or {}).get("publicKeys"):
            return arm_error(
                400, "InvalidParameter", "An SSH key is required when password authentication is off."
            )
        for nic in (properties.get("networkProfile") or {}).get("networkInterfaces") or []:
            found = self.resources.get(str(nic.get("id", "")).lower())
            if found is None:
                return arm_error(400, "InvalidResourceReference", f"Resource {nic.get('id')} was not found.")
            if found["properties"].get("virtualMachine"):
                return arm_error(400, "NicInUse", f"Network interface {nic.get('id')} is used by another VM.")
        return None

    def _nic_problem(self, body: dict[str, Any]) -> Response | None:
        for config in (body.get("properties") or {}).get("ipConfigurations") or []:
            properties = config.get("properties") or {}
            subnet = str((properties.get("subnet") or {}).get("id", ""))
            vnet_id = subnet.lower().rsplit("/subnets/", 1)[0]
            if vnet_id not in self.resources:
                return arm_error(
                    400, "InvalidResourceReference", f"Resource {subnet} referenced by the NIC was not found."
                )
            nsg_id = str(((body.get("properties") or {}).get("networkSecurityGroup") or {}).get("id", ""))
            if nsg_id and nsg_id.lower() not in self.resources:
                return arm_error(
                    400, "InvalidResourceReference", f"Resource {nsg_id} referenced by the NIC was not found."
                )
            ip_id = str((properties.get("publicIPAddress") or {}).get("id", ""))
            if ip_id and ip_id.lower() not in self.resources:
                return arm_error(
                    400, "InvalidResourceReference", f"Resource {ip_id} referenced by the NIC was not found."
                )
        return None

    def _allocation_failure(self, resource: dict[str, Any]) -> dict[str, str] | None:
        region = resource["location"]
        if region in self.allocation_failed_regions or self.capacity_left.get(region, 1) < 1:
            message = "Allocation failed. We do not have sufficient capacity for the requested VM size"
            message += " in this region."
            return {"code": "AllocationFailed", "message": message}
        if region in self.capacity_left:
            self.capacity_left[region] -= 1
        return None

    def _delete(self, path: str) -> Response:
        resource = self.resources.get(path)
        if resource is None:
            return Response(status=204)
        properties = resource["properties"]
        if resource["type"] == NIC_KIND and self._attached_vm(resource["id"]):
            return arm_error(
                400, "NicInUse", f"Network interface {resource['id']} is used by an existing VM."
            )
        if resource["type"] == NSG_KIND and any(
            str((r["properties"].get("networkSecurityGroup") or {}).get("id", "")).lower() == path
            for r in self.resources.values() if r["type"] == NIC_KIND
        ):  # fmt: skip
            message = f"Network security group {resource['id']} is in use by a network interface."
            return arm_error(400, "InUseNetworkSecurityGroupCannotBeDeleted", message)
        if resource["type"] == IP_KIND and self._attached_nic(resource["id"]):
            return arm_error(400, "PublicIPAddressCannotBeDeleted", f"Public IP {resource['id']} is in use.")
        if resource["type"] == VM_KIND:
            properties["provisioningState"] = "Deleting"
            self.disks.discard(f"{resource['name']}_OsDisk")
            for nic in (properties.get("networkProfile") or {}).get("networkInterfaces") or []:
                if (nic.get("properties") or {}).get("deleteOption") == "Delete":
                    self._cascade_nic(str(nic["id"]).lower())
        del self.resources[path]
        return Response(
            status=202, headers={"Azure-AsyncOperation": self._new_operation(resource["id"], None)}
        )

    def _cascade_nic(self, nic_id: str) -> None:
        nic = self.resources.pop(nic_id, None)
        for config in (nic or {}).get("properties", {}).get("ipConfigurations") or []:
            public_ip = (config.get("properties") or {}).get("publicIPAddress") or {}
            if (public_ip.get("properties") or {}).get("deleteOption") == "Delete":
                self.resources.pop(str(public_ip.get("id", "")).lower(), None)

    def _attached_vm(self, nic_id: str) -> bool:
        return any(
            str(n.get("id", "")).lower() == nic_id.lower()
            for r in self.resources.values() if r["type"] == VM_KIND
            for n in (r["properties"].get("networkProfile") or {}).get("networkInterfaces") or []
        )  # fmt: skip

    def _attached_nic(self, ip_id: str) -> bool:
        return any(
            _public_ip_id(c) == ip_id.lower()
            for r in self.resources.values() if r["type"] == NIC_KIND
            for c in r["properties"].get("ipConfigurations") or []
        )  # fmt: skip

    # -- lists and operations --------------------------------------------------------------

    def _with_instance_view(self, vm: dict[str, Any]) -> dict[str, Any]:
        """A VM as `statusOnly=true` lists it: with its instance view, whose statuses hold the power state.
        A deallocation is over by the next listing, unless `slow_deallocations` holds it."""
        if vm.get("_power") == "deallocating" and not self.slow_deallocations:
            vm["_power"] = "deallocated"
        if vm.get("_power") == "starting":
            vm["_power"] = "running"
        power = vm.get("_power", "running")
        shown = {k: v for k, v in vm.items() if not k.startswith("_")}
        state = str(vm["properties"].get("provisioningState", "")).lower()
        statuses = [{"code": f"ProvisioningState/{state}"}, {"code": f"PowerState/{power}"}]
        shown["properties"] = {**vm["properties"], "instanceView": {"statuses": statuses}}
        return shown

    def _power(self, group: str, name: str, action: str) -> Response:
        """POST .../virtualMachines/{name}/deallocate | start, as ARM answers: 202 with an operation to poll;
        starting a VM that is still deallocating is a 409 Conflict."""
        resource_id = f"/subscriptions/{self.subscription}/resourceGroups/{group}/providers/{VM_KIND}/{name}"
        vm = self.resources.get(resource_id.lower())
        if vm is None or vm["properties"].get("provisioningState") == "Deleting":
            return arm_error(404, "ResourceNotFound", f"The Resource '{VM_KIND}/{name}' was not found.")
        power = vm.get("_power", "running")
        if action.lower() == "deallocate" and power in ("running", "starting"):
            vm["_power"] = "deallocating"
            self.power_calls.append(("deallocate", name))
        elif action.lower() == "start":
            if power == "deallocating":
                return arm_error(
                    409, "OperationNotAllowed", "Operation 'start' is not allowed: deallocating."
                )
            if power == "deallocated":
                vm["_power"] = "starting"
                self.power_calls.append(("start", name))
        headers = {"Azure-AsyncOperation": self._new_operation(resource_id, None)}
        return Response(status=202, headers=headers)

    def _tagged(self, request: Request) -> Response:
        match = TAG_FILTER.match(request.args.get("$filter", ""))
        if match is None:
            return arm_error(
                400, "InvalidFilterInQueryString", "Only tagName/tagValue filters are supported here."
            )
        chosen = [r for r in self.resources.values() if r["tags"].get(match["name"]) == match["value"]]
        slim = [{k: r[k] for k in ("id", "name", "type", "location", "tags")} for r in chosen]
        return self._page(slim, request)

    def _page(self, items: list[dict[str, Any]], request: Request) -> Response:
        start = int(request.args.get("$skiptoken") or 0)
        body: dict[str, Any] = {"value": items[start : start + self.page_size]}
        if start + self.page_size < len(items):
            args = {k: v for k, v in request.args.items() if k != "$skiptoken"}
            query = "&".join(f"{k}={v}" for k, v in {**args, "$skiptoken": start + self.page_size}.items())
            body["nextLink"] = f"{self.url}{request.path}?{query}"
        return json_response(body)

    def _new_operation(self, resource_id: str, failure: dict[str, str] | None) -> str:
        op_id = str(uuid.uuid4())
        self.operations[op_id] = {"resource": resource_id.lower(), "polls": 0, "failure": failure}
        where = f"subscriptions/{self.subscription}/providers/Microsoft.Compute/locations/eastus"
        return f"{self.url}/{where}/operations/{op_id}?api-version=2024-03-01"

    def _operation(self, op_id: str) -> Response:
        operation = self.operations.get(op_id)
        if operation is None:
            return arm_error(404, "NotFound", f"Operation {op_id} not found.")
        operation["polls"] += 1
        if operation["polls"] < 2:
            return json_response({"name": op_id, "status": "InProgress"})
        resource = self.resources.get(operation["resource"])
        if operation["failure"]:
            if resource is not None:
                resource["properties"]["provisioningState"] = "Failed"
            return json_response({"name": op_id, "status": "Failed", "error": operation["failure"]})
        if resource is not None and resource["properties"].get("provisioningState") == "Creating":
            resource["properties"]["provisioningState"] = "Succeeded"
        return json_response({"name": op_id, "status": "Succeeded"})

    def live(self) -> dict[str, list[str]]:
        """What would still be billed: VMs, NICs, public IPs and OS disks."""
        with self.lock:
            by_kind = {
                kind: sorted(r["name"] for r in self.resources.values() if r["type"] == kind)
                for kind in (VM_KIND, NIC_KIND, IP_KIND, NSG_KIND)
            }
            return {
                **{k: v for k, v in by_kind.items() if v},
                **({"disks": sorted(self.disks)} if self.disks else {}),
            }


def start_fake_azure() -> tuple[FakeAzure, FakeServer]:
    fake = FakeAzure()
    server = FakeServer(fake.handle).start()
    fake.url = server.url
    return fake, server
