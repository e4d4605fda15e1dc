"""Google Cloud Storage: buckets through the official client, node credentials as downscoped tokens.

A node's token is the control plane's own GCP token exchanged at Google's STS for one that carries a
Credential Access Boundary: one bucket, objects under one prefix (listing only under it), and
`roles/storage.objectViewer` (read-only mounts) or `roles/storage.objectAdmin`. It lives as long as the
token it came from (at most an hour); the agent asks for a fresh one before it expires.
The control plane's token comes from the same place the GCP provider's does (shared.clouds.gcp_auth).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from shared.config.channels import StorageConfig
from shared.storage.store_errors import StoreError

CREDENTIAL_SECONDS = StorageConfig.credential_seconds

GCS_API = "https://storage.googleapis.com"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
READER, WRITER = "inRole:roles/storage.objectViewer", "inRole:roles/storage.objectAdmin"


def access_boundary(bucket: str, prefix: str, *, read_only: bool) -> dict[str, Any]:
    """The Credential Access Boundary for `bucket/prefix` (the prefix as one object, everything under
    `prefix/`, and listings that ask only under it); the whole bucket when `prefix` is empty."""
    rule: dict[str, Any] = {
        "availableResource": f"//storage.googleapis.com/projects/_/buckets/{bucket}",
        "availablePermissions": [READER if read_only else WRITER],
    }
    if prefix:
        objects = f"projects/_/buckets/{bucket}/objects/{prefix}"
        rule["availabilityCondition"] = {
            "title": f"only {prefix}/",
            "expression": (
                f"resource.name == '{objects}' || resource.name.startsWith('{objects}/') || "
                f"api.getAttribute('storage.googleapis.com/objectListPrefix', '').startsWith('{prefix}/')"
            ),
        }
    return {"accessBoundary": {"accessBoundaryRules": [rule]}}


@dataclass
class GCSBackend:
    """GCS, or a GCS-compatible endpoint (`endpoint_url`: an emulator). `tokens` gives the control
    plane's access token (shared.clouds.gcp_auth.GcpTokenSource, or anything with `token()`)."""

    tokens: Any
    project: str | None = None
    endpoint_url: str | None = None
    sts_url: str = "https://sts.googleapis.com/v1/token"
    credential_seconds: int = CREDENTIAL_SECONDS
    store_label: str = "gcs"

    def client(self) -> Any:
        import google.cloud.storage as storage  # the GCS store only: not on every launch's import path
        from google.oauth2.credentials import Credentials

        options = {"api_endpoint": self.endpoint_url} if self.endpoint_url else None
        return storage.Client(
            project=self.project or "_", credentials=Credentials(self.tokens.token()), client_options=options
        )

    def exists(self, bucket: str) -> bool:
        from google.api_core import exceptions

        try:
            self.client().get_bucket(bucket)
        except exceptions.NotFound:
            return False
        except exceptions.GoogleAPIError as error:
            raise StoreError(f"bucket {bucket} exists but is not reachable ({_code(error)})") from None
        return True

    def create(self, bucket: str) -> None:
        from google.api_core import exceptions

        client = self.client()
        new = client.bucket(bucket)
        new.iam_configuration.uniform_bucket_level_access_enabled = True  # access by IAM alone, no ACLs
        try:
            client.create_bucket(new)
        except exceptions.Conflict:
            if not self.exists(bucket):
                raise StoreError(f"the bucket name {bucket} is taken by another project") from None
        except exceptions.GoogleAPIError as error:
            raise StoreError(f"could not create bucket {bucket}: {_code(error)}") from None

    def set_expiry(self, bucket: str, days: int) -> None:
        """The bucket's lifecycle: one Delete rule on objects older than `days` (replaces its rules)."""
        from google.api_core import exceptions

        try:
            found = self.client().get_bucket(bucket)
            found.lifecycle_rules = [{"action": {"type": "Delete"}, "condition": {"age": days}}]
            found.patch()
        except exceptions.GoogleAPIError as error:
            raise StoreError(f"could not set the lifecycle of bucket {bucket}: {_code(error)}") from None

    def region_of(self, bucket: str) -> str | None:
        """The bucket's location, lowercased: `us-central1`, or a multi-region (`us`, `eu`)."""
        from google.api_core import exceptions

        try:
            location = self.client().get_bucket(bucket).location
        except exceptions.GoogleAPIError as error:
            raise StoreError(f"where bucket {bucket} lives is not readable ({_code(error)})") from None
        return str(location).lower() if location else None

    def listed_gb(self, bucket: str, prefix: str = "", max_objects: int = 10_000) -> tuple[float, bool]:
        from google.api_core import exceptions

        total, seen = 0, 0
        try:
            blobs = self.client().list_blobs(
                bucket, prefix=f"{prefix}/" if prefix else None, max_results=max_objects + 1
            )
            for blob in blobs:
                if seen == max_objects:
                    return total / 1e9, False
                total, seen = total + int(blob.size or 0), seen + 1
        except exceptions.GoogleAPIError as error:
            raise StoreError(f"bucket {bucket} is not listable ({_code(error)})") from None
        return total / 1e9, True

    def delete(self, bucket: str) -> None:
        from google.api_core import exceptions

        client = self.client()
        try:
            for blob in client.list_blobs(bucket):
                blob.delete()
            client.bucket(bucket).delete()
        except exceptions.NotFound:
            return

    def node_access(self, bucket: str, prefix: str, *, read_only: bool, session: str) -> dict[str, Any]:
        import httpx

        boundary = access_boundary(bucket, prefix, read_only=read_only)
        form = {
            "grant_type": TOKEN_EXCHANGE,
            "subject_token_type": ACCESS_TOKEN_TYPE,
            "requested_token_type": ACCESS_TOKEN_TYPE,
            "subject_token": self._source_token(),
            "options": json.dumps(boundary, separators=(",", ":")),
        }
        try:
            answer = httpx.post(self.sts_url, data=form, timeout=30)
        except httpx.TransportError as error:
            raise StoreError(f"Google STS unreachable for {bucket}: {error}") from None
        if answer.status_code != 200:
            raise StoreError(f"Google STS refused a downscoped token for {bucket}: HTTP {answer.status_code}")
        body = answer.json()
        source_ends = getattr(self.tokens, "expires_at", None)  # a downscoped token dies with its source
        left = body.get("expires_in") or (source_ends - time.time() if source_ends else None)
        seconds = min(float(left or self.credential_seconds), self.credential_seconds)
        expiration = datetime.fromtimestamp(time.time() + seconds, UTC)
        return {
            "api": "gcs",
            "endpoint": self.endpoint_url or GCS_API,
            "credentials": {"access_token": body["access_token"], "expiration": _rfc3339(expiration)},
        }

    def _source_token(self) -> str:
        try:
            return str(self.tokens.token())
        except Exception as error:  # the GCP provider's auth errors: no key, refused, unreachable
            raise StoreError(f"no GCP token to downscope: {error}") from None


def _code(error: Exception) -> str:
    return str(getattr(error, "code", None) or type(error).__name__)


def _rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
