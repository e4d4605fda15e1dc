"""Azure Blob Storage: containers of one storage account through the official client, node credentials
as service SAS tokens signed with the account's key.

A node's SAS names one container (`sr=c`) and, for read-only mounts, only read and list; it expires
after `credential_seconds`. A SAS cannot name a prefix of a container on a flat-namespace account
(directory SAS, `sr=d`, exists only with a hierarchical namespace), so a mount of a prefix is refused
rather than handed the whole container.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from shared.config.channels import StorageConfig
from shared.storage.store_errors import StoreError

CREDENTIAL_SECONDS = StorageConfig.credential_seconds

CLOCK_SKEW = timedelta(minutes=5)  # a SAS starts a little in the past: the node's clock may be behind


@dataclass
class AzureBlobBackend:
    """One storage account (`account`, its `key`); `endpoint_url` is its blob service (None: Azure's
    `https://<account>.blob.core.windows.net`; Azurite's is `http://host:port/<account>`)."""

    account: str
    key: str
    endpoint_url: str | None = None
    credential_seconds: int = CREDENTIAL_SECONDS
    store_label: str = "azure"

    @property
    def service_url(self) -> str:
        return (self.endpoint_url or f"https://{self.account}.blob.core.windows.net").rstrip("/")

    def container(self, name: str) -> Any:
        from azure.storage.blob import ContainerClient  # the Azure store only: not on every launch's path

        credential = {"account_name": self.account, "account_key": self.key}
        return ContainerClient(self.service_url, name, credential=credential)

    def exists(self, bucket: str) -> bool:
        from azure.core.exceptions import AzureError

        try:
            return bool(self.container(bucket).exists())
        except AzureError as error:
            raise StoreError(f"container {bucket} is not reachable ({_code(error)})") from None

    def create(self, bucket: str) -> None:
        from azure.core.exceptions import AzureError, ResourceExistsError

        try:
            self.container(bucket).create_container()
        except ResourceExistsError:
            return  # containers are the account's own: an existing one is ours
        except AzureError as error:
            raise StoreError(f"could not create container {bucket}: {_code(error)}") from None

    def delete(self, bucket: str) -> None:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            self.container(bucket).delete_container()  # Azure deletes the blobs with it
        except ResourceNotFoundError:
            return

    def node_access(self, bucket: str, prefix: str, *, read_only: bool, session: str) -> dict[str, Any]:
        from azure.storage.blob import ContainerSasPermissions, generate_container_sas

        if prefix:
            raise StoreError(
                f"an Azure SAS cannot be limited to {prefix}/ of container {bucket} (a flat-namespace "
                "account gives a whole container or one blob): mount the whole container"
            )
        now = datetime.now(UTC)
        expiry = now + timedelta(seconds=self.credential_seconds)
        permission = ContainerSasPermissions(
            read=True,
            list=True,
            **({} if read_only else {"write": True, "create": True, "add": True, "delete": True}),
        )
        token = generate_container_sas(
            self.account,
            bucket,
            account_key=self.key,
            permission=permission,
            start=now - CLOCK_SKEW,
            expiry=expiry,
            protocol="https" if self.service_url.startswith("https://") else None,
        )
        return {
            "api": "azure",
            "endpoint": self.service_url,
            "account": self.account,
            "credentials": {
                "sas_url": f"{self.service_url}/{bucket}?{token}",
                "expiration": expiry.strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
        }


def _code(error: Exception) -> str:
    return str(
        getattr(error, "error_code", None) or getattr(error, "status_code", None) or type(error).__name__
    )
