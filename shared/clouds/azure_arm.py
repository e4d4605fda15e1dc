"""Azure Resource Manager over REST: a client-credentials token (Microsoft identity platform v2.0),
JSON calls with `api-version`, long-running operations polled through `Azure-AsyncOperation`, and ARM
error codes mapped to the taxonomy.

Credentials are the variables azure-identity's EnvironmentCredential reads: `AZURE_TENANT_ID`,
`AZURE_CLIENT_ID`, `AZURE_CLIENT_SECRET`, and `AZURE_AUTHORITY_HOST` (default
https://login.microsoftonline.com; tests point it at a fake). Without a full service principal, an
`az login` session is used through `az account get-access-token`, and the subscription defaults to the
CLI's default one (~/.azure/azureProfile.json, or `$AZURE_CONFIG_DIR`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from shared.clouds.errors import (
    CloudAuthError,
    CloudError,
    NoCapacityError,
    QuotaError,
    TransientCloudError,
)
from shared.clouds.rest_client import RestClient, body_of, error_for_status, new_http_client
from shared.config.clouds import AzureConfig

DEFAULT_AUTHORITY = "https://login.microsoftonline.com"
DEFAULT_ARM_URL = "https://management.azure.com"
SCOPE = "https://management.azure.com/.default"
CAPACITY_CODES = {
    "SkuNotAvailable",
    "AllocationFailed",
    "ZonalAllocationFailed",
    "OverconstrainedAllocationRequest",
    "OverconstrainedZonalAllocationRequest",
}
QUOTA_CODES = {"QuotaExceeded", "OperationNotAllowed"}  # OperationNotAllowed counts only with quota text
AUTH_CODES = {
    "AuthorizationFailed",
    "InvalidAuthenticationToken",
    "ExpiredAuthenticationToken",
    "AuthenticationFailed",
    "SubscriptionNotFound",
    "InvalidAuthenticationTokenTenant",
}
TRANSIENT_CODES = {"TooManyRequests", "RetryableError", "InternalServerError", "ServerTimeout", "Conflict"}
HELP = (
    "run `az login`, or set AZURE_TENANT_ID, AZURE_CLIENT_ID, AZURE_CLIENT_SECRET and AZURE_SUBSCRIPTION_ID"
)


def cli_default_subscription(config_dir: Path | None = None) -> str | None:
    """az's default subscription, from its profile in `config_dir` (default ~/.azure)."""
    folder = config_dir or Path.home() / ".azure"
    try:
        profile = json.loads((folder / "azureProfile.json").read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return None
    default = next((s for s in profile.get("subscriptions") or [] if s.get("isDefault")), None)
    return str(default["id"]) if default and default.get("id") else None


def classify_arm_codes(code: str, message: str, status: int) -> CloudError:
    text = f"{code}: {message}" if code else message
    inner = code.split("/")[-1]
    if inner in CAPACITY_CODES:
        return NoCapacityError(text)
    if inner == "QuotaExceeded" or (inner in QUOTA_CODES and "quota" in message.lower()):
        return QuotaError(text)
    if inner in AUTH_CODES:
        return CloudAuthError(text)
    if inner in TRANSIENT_CODES:
        return TransientCloudError(text)
    return error_for_status(status, text)


def classify_arm_error(response: httpx.Response) -> CloudError:
    error = body_of(response).get("error") or {}
    if not isinstance(error, dict):
        return error_for_status(response.status_code, f"{response.status_code}: {error}")
    return classify_arm_codes(str(error.get("code", "")), str(error.get("message", "")), response.status_code)


@dataclass
class AzureCredentials:
    tenant_id: str | None
    client_id: str | None
    client_secret: str | None
    authority: str = DEFAULT_AUTHORITY
    _token: str | None = None
    _expires_at: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def from_config(cls, config: AzureConfig) -> AzureCredentials:
        return cls(
            config.tenant_id,
            config.client_id,
            config.client_secret,
            authority=(config.authority or DEFAULT_AUTHORITY).rstrip("/"),
        )

    @property
    def has_principal(self) -> bool:
        return bool(self.tenant_id and self.client_id and self.client_secret)

    def token(self) -> str:
        with self._lock:
            if self._token is None or time.time() > self._expires_at - 60:
                self._token, self._expires_at = self._exchange() if self.has_principal else self._from_cli()
            return self._token

    def _from_cli(self) -> tuple[str, float]:
        az = shutil.which("az")
        if az is None:
            raise CloudAuthError(f"no Azure credentials: {HELP}")
        command = [
            az,
            "account",
            "get-access-token",
            "--resource",
            "https://management.azure.com/",
            "-o",
            "json",
        ]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        except subprocess.TimeoutExpired as error:
            raise TransientCloudError("`az account get-access-token` timed out") from error
        if done.returncode != 0:
            raise CloudAuthError(
                f"`az account get-access-token` failed: {done.stderr.strip()[:300]} ({HELP})"
            )
        answer = json.loads(done.stdout)
        expires = float(answer.get("expires_on") or time.time() + 300)
        return str(answer["accessToken"]), expires

    def _exchange(self) -> tuple[str, float]:
        form = {
            "grant_type": "client_credentials",
            "client_id": self.client_id or "",
            "client_secret": self.client_secret or "",
            "scope": SCOPE,
        }
        url = f"{self.authority}/{self.tenant_id}/oauth2/v2.0/token"
        try:
            with new_http_client() as http:
                response = http.post(url, data=form)
        except httpx.TransportError as error:
            raise TransientCloudError(f"Azure login: {error}") from error
        if response.status_code == 429 or response.status_code >= 500:
            raise TransientCloudError(f"Azure login answered {response.status_code}")
        body = body_of(response)
        if response.status_code != 200:
            raise CloudAuthError(f"Azure login refused: {body.get('error_description') or body.get('error')}")
        return str(body["access_token"]), time.time() + float(body.get("expires_in", 3600))


class ArmClient:
    """ARM calls under one subscription; `wait` follows a long-running operation to its end."""

    def __init__(
        self, subscription_id: str | None, credentials: AzureCredentials, base_url: str, poll_seconds: float
    ) -> None:
        self.subscription_id = subscription_id
        self.credentials = credentials
        self.poll_seconds = poll_seconds
        self.client = RestClient(base_url, self._headers, classify_arm_error)

    def _headers(self) -> dict[str, str]:
        if not self.subscription_id:
            raise CloudAuthError(f"no Azure subscription: {HELP}")
        return {"Authorization": f"Bearer {self.credentials.token()}"}

    def path(self, rest: str) -> str:
        return f"subscriptions/{self.subscription_id}/{rest.lstrip('/')}"

    def call(
        self, method: str, rest: str, api_version: str, body: Any = None, missing_ok: tuple[int, ...] = ()
    ) -> tuple[Any, str | None]:
        """(JSON body, the Azure-AsyncOperation URL to poll or None)."""
        url = rest if rest.startswith("http") else self.client.url(self.path(rest))
        try:
            response = self.client.http.request(
                method, url, params={"api-version": api_version}, json=body, headers=self._headers()
            )
        except httpx.TransportError as error:
            raise TransientCloudError(f"{method} {rest}: {error}") from error
        if response.status_code in missing_ok:
            return None, None
        if response.status_code >= 400:
            raise classify_arm_error(response)
        content = body_of(response) if response.content else None
        return content, response.headers.get("Azure-AsyncOperation")

    def list_all(
        self, rest: str, api_version: str, params: dict[str, str] | None = None
    ) -> list[dict[str, Any]]:
        """Every item of a paged ARM list (`value` + `nextLink`)."""
        items: list[dict[str, Any]] = []
        page = self.client.request(
            "GET", self.path(rest), params={"api-version": api_version, **(params or {})}
        )
        while True:
            items.extend((page or {}).get("value", []))
            link = (page or {}).get("nextLink")
            if not link:
                return items
            page = self.client.request("GET", link)

    def wait(self, operation_url: str | None, timeout: float = 900.0) -> None:
        """Poll an Azure-AsyncOperation until Succeeded; its error (Failed/Canceled) goes up mapped."""
        if operation_url is None:
            return
        deadline = time.monotonic() + timeout
        while True:
            status = self.client.request("GET", operation_url) or {}
            state = status.get("status")
            if state == "Succeeded":
                return
            if state in ("Failed", "Canceled"):
                error = status.get("error") or {}
                raise classify_arm_codes(str(error.get("code", state)), str(error.get("message", "")), 400)
            if time.monotonic() > deadline:
                raise TransientCloudError(f"Azure operation still {state} after {timeout:.0f} s")
            time.sleep(self.poll_seconds)
