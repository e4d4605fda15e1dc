"""Lambda Cloud over its REST API v1 (https://cloud.lambdalabs.com/api/v1).

Credentials: `LAMBDA_API_KEY`, else `api_key = ...` in `~/.lambda_cloud/lambda_keys` (SkyPilot's file).
`SKYLESS_LAMBDA_SSH_KEY_NAME` names the SSH key to install (default: the first key of the account, or
a key named `skyless` created on first use). `SKYLESS_LAMBDA_API_URL` overrides the endpoint (tests).

Lambda has no tags and no client tokens: each node is launched alone, named `skyless-<cluster>-<rank>`,
and a launch first looks for live instances with those names (that is the idempotency).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from shared.clouds.base import CLUSTER_TAG, JOB_TAG, LaunchSpec, Node
from shared.clouds.errors import CloudAuthError, CloudError, InvalidLaunchError, NoCapacityError, QuotaError
from shared.clouds.node_names import node_name, tags_from_name
from shared.clouds.rest_client import RestClient, body_of, error_for_status
from shared.clouds.startup_script import startup_script
from shared.config.clouds import LambdaConfig

DEFAULT_URL = "https://cloud.lambdalabs.com/api/v1"
KEYS_FILE = Path("~/.lambda_cloud/lambda_keys")
GONE = ("terminating", "terminated")
AUTH_CODES = ("global/invalid-api-key", "global/account-inactive", "global/forbidden")


def classify_lambda_error(response: httpx.Response) -> CloudError:
    error = body_of(response).get("error") or {}
    code = str(error.get("code", ""))
    text = f"{code or response.status_code}: {error.get('message', response.text[:300])}"
    if error.get("suggestion"):
        text += f" ({error['suggestion']})"
    if code.endswith("insufficient-capacity"):
        return NoCapacityError(text)
    if code == "global/quota-exceeded":
        return QuotaError(text)
    if code in AUTH_CODES:
        return CloudAuthError(text)
    return error_for_status(response.status_code, text)


def api_key_from_file() -> str | None:
    """The key SkyPilot's Lambda Cloud setup keeps in ~/.lambda_cloud/lambda_keys."""
    path = KEYS_FILE.expanduser()
    if path.exists():
        for line in path.read_text().splitlines():
            name, sep, value = line.partition("=")
            if sep and name.strip() == "api_key":
                return value.strip()
    return None


class LambdaCloud:
    name = "lambda"

    def __init__(
        self, api_key: str | None, base_url: str = DEFAULT_URL, ssh_key_name: str | None = None
    ) -> None:
        self.api_key = api_key
        self.ssh_key_name = ssh_key_name
        self.client = RestClient(base_url, self._headers, classify_lambda_error)

    @classmethod
    def from_env(cls) -> LambdaCloud:
        return cls.from_config(LambdaConfig.from_env())

    @classmethod
    def from_config(cls, config: LambdaConfig) -> LambdaCloud:
        return cls(
            config.api_key or api_key_from_file(),
            base_url=config.api_url or DEFAULT_URL,
            ssh_key_name=config.ssh_key_name,
        )

    def _headers(self) -> dict[str, str]:
        if not self.api_key:
            raise CloudAuthError("no Lambda Cloud API key: set LAMBDA_API_KEY or ~/.lambda_cloud/lambda_keys")
        return {"Authorization": f"Bearer {self.api_key}"}

    # -- the protocol ----------------------------------------------------------------------

    def launch(self, spec: LaunchSpec) -> list[Node]:
        if spec.use_spot:
            raise InvalidLaunchError("Lambda Cloud has no spot instances")
        live = {i["name"]: i for i in self._instances() if i["status"] not in GONE}
        launched: list[str] = []
        try:
            for rank in range(spec.num_nodes):
                name = node_name(spec.cluster_id, rank)
                found = live.get(name)
                if found and self._same_place(found, spec):
                    continue
                launched.extend(self._launch_one(spec, name))
        except CloudError:
            if launched:  # all or nothing: a half-launched cluster must not outlive the failure
                self._terminate_ids(launched)
            raise
        return [
            n for n in self.describe(spec.cluster_id)
            if n.state == "running" and n.region == spec.region and n.instance_type == spec.instance_type
        ]  # fmt: skip

    def terminate(self, cluster_id: str) -> None:
        ids = [n.tags["lambda-instance-id"] for n in self.describe(cluster_id) if n.state != "terminated"]
        if ids:
            self._terminate_ids(ids)

    def describe(self, cluster_id: str) -> list[Node]:
        return [n for n in self.list_owned() if n.cluster_id == cluster_id]

    def list_owned(self) -> list[Node]:
        nodes = [self._node(i) for i in self._instances()]
        return sorted((n for n in nodes if n is not None), key=lambda n: n.instance_id)

    # -- API calls -------------------------------------------------------------------------

    def _instances(self) -> list[dict[str, Any]]:
        return list(self.client.request("GET", "instances")["data"])

    def _launch_one(self, spec: LaunchSpec, name: str) -> list[str]:
        body = {
            "region_name": spec.region,
            "instance_type_name": spec.instance_type,
            "ssh_key_names": [self._ssh_key()],
            "quantity": 1,
            "name": name,
            "user_data": startup_script(spec, pinned_id=name, run_as="ubuntu"),
        }
        return list(
            self.client.request("POST", "instance-operations/launch", json=body)["data"]["instance_ids"]
        )

    def _terminate_ids(self, ids: list[str]) -> None:
        try:
            self.client.request("POST", "instance-operations/terminate", json={"instance_ids": ids})
        except InvalidLaunchError:
            # Some id vanished meanwhile (404): terminate the rest one by one, ignoring the gone.
            for instance_id in ids:
                self.client.request(
                    "POST",
                    "instance-operations/terminate",
                    json={"instance_ids": [instance_id]},
                    missing_ok=(404,),
                )

    def _ssh_key(self) -> str:
        if self.ssh_key_name:
            return self.ssh_key_name
        keys = self.client.request("GET", "ssh-keys")["data"]
        if keys:
            self.ssh_key_name = str(keys[0]["name"])
        else:
            self.ssh_key_name = str(
                self.client.request("POST", "ssh-keys", json={"name": "skyless"})["data"]["name"]
            )
        return self.ssh_key_name

    @staticmethod
    def _same_place(instance: dict[str, Any], spec: LaunchSpec) -> bool:
        return (
            instance["region"]["name"] == spec.region
            and instance["instance_type"]["name"] == spec.instance_type
        )

    @staticmethod
    def _node(instance: dict[str, Any]) -> Node | None:
        tags = tags_from_name(instance.get("name") or "")
        if tags is None:
            return None
        return Node(
            instance_id=instance["name"],
            cluster_id=tags[CLUSTER_TAG],
            job_id=tags[JOB_TAG],
            ip=instance.get("private_ip") or instance.get("ip") or "",
            state="terminated" if instance["status"] in GONE else "running",
            cloud="lambda",
            region=instance["region"]["name"],
            zone=None,
            instance_type=instance["instance_type"]["name"],
            use_spot=False,
            tags={**tags, "lambda-instance-id": instance["id"]},
        )
