"""Where buckets live, and the scoped credentials a node gets for exactly its buckets.

One backend per store, chosen by configuration (`SKYLESS_STORES`, like `SKYLESS_PROVIDERS`):
- `aws`: Amazon S3. Nodes get STS session credentials (AssumeRole of `SKYLESS_STORAGE_ROLE_ARN` with an
  inline session policy naming only that bucket and prefix; read-only mounts get no write actions).
- `r2`: Cloudflare R2 through its S3 API; nodes get R2 temporary credentials (Cloudflare's
  `temp-access-credentials` API, scoped to the bucket, its prefix and read or read-write).
- `gcs`: Google Cloud Storage (shared.storage.gcs); nodes get downscoped tokens (a Credential Access
  Boundary naming the bucket, the prefix, and a reader or writer role).
- `azure`: Azure Blob Storage, one storage account (shared.storage.azure_blob); nodes get a service SAS for
  one container, read and list only for read-only mounts.
- `local`: the local runtime's S3 endpoint (moto), with STS credentials as on AWS. Every store (s3, gcs,
  r2, azure) is simulated there, as every cloud is simulated by the local cloud.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol, runtime_checkable

from botocore.exceptions import ClientError

from shared.aws.sessions import boto3_session
from shared.config import Settings
from shared.config.channels import StorageConfig
from shared.storage.store_errors import StoreError

CREDENTIAL_SECONDS = StorageConfig.credential_seconds
WRITE_ACTIONS = ("s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts")


class BucketBackend(Protocol):
    store_label: str  # what the backend is, for messages ("aws", "r2", "local")

    def exists(self, bucket: str) -> bool:
        """True when the bucket exists and is reachable; StoreError when it exists but is not ours."""
        ...

    def create(self, bucket: str) -> None:
        """Create it; nothing when it already exists and is ours; StoreError when the name is taken."""
        ...

    def delete(self, bucket: str) -> None:
        """Delete every object and the bucket; nothing when it is already gone."""
        ...

    def node_access(self, bucket: str, prefix: str, *, read_only: bool, session: str) -> dict[str, Any]:
        """What a node needs to reach `bucket/prefix` and nothing else: api, endpoint, region,
        addressing (path | virtual) and short-lived credentials {access_key_id, secret_access_key,
        session_token, expiration (ISO 8601)}."""
        ...


@runtime_checkable
class Expirable(Protocol):
    """A backend whose buckets take a lifecycle rule (S3 and the local store, R2's S3 API, GCS; not Azure
    Blob, whose lifecycle policies belong to the storage account's management API)."""

    def set_expiry(self, bucket: str, days: int) -> None:
        """Objects expire `days` after they are written; replaces the bucket's rules; StoreError."""
        ...


def session_policy(bucket: str, prefix: str, *, read_only: bool) -> dict[str, Any]:
    """An IAM session policy allowing exactly `bucket/prefix` (the prefix itself as an object, and
    everything under `prefix/`); the whole bucket when `prefix` is empty."""
    objects = (
        [f"arn:aws:s3:::{bucket}/{prefix}", f"arn:aws:s3:::{bucket}/{prefix}/*"]
        if prefix
        else [f"arn:aws:s3:::{bucket}/*"]
    )
    listing: dict[str, Any] = {
        "Effect": "Allow",
        "Action": ["s3:ListBucket"],
        "Resource": f"arn:aws:s3:::{bucket}",
    }
    if prefix:
        listing["Condition"] = {"StringLike": {"s3:prefix": [prefix, f"{prefix}/*"]}}
    actions = ["s3:GetObject", *([] if read_only else WRITE_ACTIONS)]
    return {
        "Version": "2012-10-17",
        "Statement": [
            listing,
            {"Effect": "Allow", "Action": ["s3:GetBucketLocation"], "Resource": f"arn:aws:s3:::{bucket}"},
            {"Effect": "Allow", "Action": actions, "Resource": objects},
        ],
    }


@dataclass
class S3Backend:
    """S3 or an S3-compatible endpoint. `node_endpoint` is what nodes call (None: AWS's regional one)."""

    store_label: str
    region: str
    endpoint_url: str | None = None
    node_endpoint: str | None = None
    role_arn: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    credential_seconds: int = CREDENTIAL_SECONDS

    @cached_property
    def s3(self) -> Any:
        keys = {}
        if self.access_key_id:
            keys = {"aws_access_key_id": self.access_key_id, "aws_secret_access_key": self.secret_access_key}
        return boto3_session().client("s3", region_name=self.region, endpoint_url=self.endpoint_url, **keys)

    def exists(self, bucket: str) -> bool:
        try:
            self.s3.head_bucket(Bucket=bucket)
        except ClientError as error:
            code = str(error.response.get("Error", {}).get("Code"))
            if code in ("404", "NoSuchBucket", "NotFound"):
                return False
            raise StoreError(f"bucket {bucket} exists but is not reachable ({code})") from None
        return True

    def create(self, bucket: str) -> None:
        kwargs: dict[str, Any] = {"Bucket": bucket}
        if self.region not in ("us-east-1", "auto"):
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": self.region}
        try:
            self.s3.create_bucket(**kwargs)
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code")
            if code == "BucketAlreadyOwnedByYou":
                return
            if code == "BucketAlreadyExists":
                raise StoreError(f"the bucket name {bucket} is taken by another account") from None
            raise StoreError(f"could not create bucket {bucket}: {code}") from None

    def delete(self, bucket: str) -> None:
        try:
            for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
                keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
                if keys:
                    self.s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
            self.s3.delete_bucket(Bucket=bucket)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") not in ("NoSuchBucket", "404"):
                raise

    def set_expiry(self, bucket: str, days: int) -> None:
        """PutBucketLifecycleConfiguration: every object expires `days` after it was written, and uploads
        left unfinished are aborted after a day. Replaces the bucket's rules; idempotent."""
        rules = [
            {
                "ID": "skyless-expire",
                "Status": "Enabled",
                "Filter": {"Prefix": ""},
                "Expiration": {"Days": days},
                "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
            }
        ]
        try:
            self.s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": rules})
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code")
            raise StoreError(f"could not set the lifecycle of bucket {bucket}: {code}") from None

    def region_of(self, bucket: str) -> str | None:
        """GetBucketLocation: None and "" are us-east-1, "EU" is eu-west-1 (S3's legacy answers)."""
        if self.region == "auto":
            return None
        try:
            answer = self.s3.get_bucket_location(Bucket=bucket).get("LocationConstraint")
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code")
            raise StoreError(f"where bucket {bucket} lives is not readable ({code})") from None
        return {None: "us-east-1", "": "us-east-1", "EU": "eu-west-1"}.get(answer, answer)

    def listed_gb(self, bucket: str, prefix: str = "", max_objects: int = 10_000) -> tuple[float, bool]:
        total, seen, truncated = 0, 0, False
        try:
            pages = self.s3.get_paginator("list_objects_v2").paginate(
                Bucket=bucket,
                Prefix=f"{prefix}/" if prefix else "",
                PaginationConfig={"MaxItems": max_objects, "PageSize": 1000},
            )
            for page in pages:
                for item in page.get("Contents", []):
                    total, seen = total + int(item["Size"]), seen + 1
                truncated = bool(page.get("IsTruncated"))
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code")
            raise StoreError(f"bucket {bucket} is not listable ({code})") from None
        return total / 1e9, not (seen >= max_objects and truncated)

    def node_access(self, bucket: str, prefix: str, *, read_only: bool, session: str) -> dict[str, Any]:
        sts = boto3_session().client("sts", region_name=self.region, endpoint_url=self.endpoint_url)
        answer = sts.assume_role(
            RoleArn=self.role_arn,
            RoleSessionName=session[:64],
            Policy=json.dumps(session_policy(bucket, prefix, read_only=read_only), separators=(",", ":")),
            DurationSeconds=self.credential_seconds,
        )
        creds = answer["Credentials"]
        return {
            **self._where(),
            "credentials": {
                "access_key_id": creds["AccessKeyId"],
                "secret_access_key": creds["SecretAccessKey"],
                "session_token": creds["SessionToken"],
                "expiration": creds["Expiration"].isoformat(),
            },
        }

    def _where(self) -> dict[str, Any]:
        if self.node_endpoint:
            return {"api": "s3", "endpoint": self.node_endpoint, "region": self.region, "addressing": "path"}
        endpoint = f"https://s3.{self.region}.amazonaws.com"
        return {"api": "s3", "endpoint": endpoint, "region": self.region, "addressing": "virtual"}


@dataclass
class R2Backend(S3Backend):
    """Cloudflare R2: buckets through its S3 API, node credentials from its temporary-credentials API."""

    account_id: str = ""
    api_token: str | None = None
    api_url: str = "https://api.cloudflare.com/client/v4"

    def node_access(self, bucket: str, prefix: str, *, read_only: bool, session: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "bucket": bucket,
            "parentAccessKeyId": self.access_key_id,
            "permission": "object-read-only" if read_only else "object-read-write",
            "ttlSeconds": self.credential_seconds,
        }
        if prefix:
            body["prefixes"] = [prefix, f"{prefix}/"]
        url = f"{self.api_url.rstrip('/')}/accounts/{self.account_id}/r2/temp-access-credentials"
        import httpx  # R2 only: not on every launch's import path

        answer = httpx.post(url, json=body, headers={"Authorization": f"Bearer {self.api_token}"}, timeout=30)
        if answer.status_code != 200 or not answer.json().get("success"):
            raise StoreError(f"R2 refused temporary credentials for {bucket}: HTTP {answer.status_code}")
        result = answer.json()["result"]
        from datetime import UTC, datetime, timedelta

        expiration = datetime.now(UTC) + timedelta(seconds=self.credential_seconds)
        return {
            "api": "s3",
            "endpoint": self.endpoint_url,
            "region": "auto",
            "addressing": "path",
            "credentials": {
                "access_key_id": result["accessKeyId"],
                "secret_access_key": result["secretAccessKey"],
                "session_token": result["sessionToken"],
                "expiration": expiration.isoformat(),
            },
        }


STORE_OF_CLOUD = {
    "aws": "s3",
    "gcp": "gcs",
    "azure": "azure",
}  # where a bucket named without `store` goes; else s3


class StorageBackends:
    """Which backend serves which store (`SKYLESS_STORES`: `s3=aws,gcs=gcs,azure=azure` or `*=local`)."""

    def __init__(
        self, settings: Settings, environ: dict[str, str] | None = None, config: StorageConfig | None = None
    ) -> None:
        self.settings = settings
        self.environ = environ
        self.config = config = config or StorageConfig.from_env(environ)
        default = "*=local" if settings.providers.strip() == "*=local" else "s3=aws"
        if default == "s3=aws" and config.r2_account_id:
            default += ",r2=r2"
        stores = default if config.stores is None else config.stores
        self.mapping = dict(pair.split("=", 1) for pair in stores.split(",") if "=" in pair)

    def backend_name(self, store: str) -> str | None:
        return self.mapping.get(store) or self.mapping.get("*")

    def store_for_cloud(self, cloud: str) -> str:
        """The store of the cloud a job runs on, or s3 when that cloud's store is not configured."""
        store = STORE_OF_CLOUD.get(cloud.lower(), "s3")
        return store if self.backend_name(store) else "s3"

    def for_store(self, store: str) -> BucketBackend | None:
        name = self.backend_name(store)
        return None if name is None else self._build(name)

    def _build(self, name: str) -> BucketBackend | None:
        config, settings = self.config, self.settings
        seconds = config.credential_seconds
        if name == "local":
            return S3Backend(
                store_label="local",
                region=settings.region,
                endpoint_url=settings.endpoint_url,
                node_endpoint=settings.endpoint_url,
                role_arn=f"arn:aws:iam::123456789012:role/{settings.prefix}-storage",
                credential_seconds=seconds,
            )
        if name == "aws":
            return S3Backend(
                store_label="aws",
                region=settings.region,
                endpoint_url=config.s3_endpoint,
                node_endpoint=config.s3_endpoint,
                role_arn=config.storage_role_arn,
                credential_seconds=seconds,
            )
        if name == "r2":
            account = config.r2_account_id or ""
            return R2Backend(
                store_label="r2",
                region="auto",
                endpoint_url=config.r2_endpoint or f"https://{account}.r2.cloudflarestorage.com",
                access_key_id=config.r2_access_key_id,
                secret_access_key=config.r2_secret_access_key,
                credential_seconds=seconds,
                account_id=account,
                api_token=config.r2_api_token,
                api_url=config.cloudflare_api_url,
            )
        if name == "gcs":
            from shared.clouds.gcp_auth import GcpTokenSource, project_of
            from shared.config.clouds import GcpConfig
            from shared.storage.gcs import GCSBackend

            gcp = GcpConfig.from_env(self.environ)
            tokens = GcpTokenSource.from_config(gcp)
            return GCSBackend(
                tokens,
                project=project_of(gcp, tokens),
                endpoint_url=config.gcs_endpoint,
                sts_url=config.gcs_sts_url,
                credential_seconds=seconds,
            )
        if name == "azure" and config.azure_account and config.azure_key:
            from shared.storage.azure_blob import AzureBlobBackend

            return AzureBlobBackend(
                config.azure_account, config.azure_key, config.azure_endpoint, credential_seconds=seconds
            )
        return None
