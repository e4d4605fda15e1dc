"""The bucket (S3): task files too big for a record, logs, workdir tarballs. A port and its adapter."""

from __future__ import annotations

from functools import cached_property
from typing import Any, Protocol

from botocore.exceptions import ClientError

from shared.aws.sessions import aws_client
from shared.config import Settings


class ObjectStore(Protocol):
    def put_text(self, key: str, text: str) -> None: ...
    def get_text(self, key: str) -> str | None: ...
    def list_keys(self, prefix: str, after: str | None = None) -> list[str]: ...
    def presigned_get(self, key: str, expires_seconds: int = 3600) -> str: ...
    def presigned_put(self, key: str, expires_seconds: int = 3600) -> str: ...
    def presigned_post(self, key_prefix: str, expires_seconds: int = 86400) -> dict[str, Any]: ...


class S3ObjectStore:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.bucket = settings.bucket

    @cached_property
    def _s3(self) -> Any:
        return aws_client("s3", self.settings)

    def put_text(self, key: str, text: str) -> None:
        self._s3.put_object(
            Bucket=self.bucket, Key=key, Body=text.encode("utf-8"), ServerSideEncryption="AES256"
        )

    def get_text(self, key: str) -> str | None:
        try:
            body = self._s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except ClientError as error:
            if error.response["Error"]["Code"] in ("NoSuchKey", "404"):
                return None
            raise
        return body.decode("utf-8", errors="replace")

    def list_keys(self, prefix: str, after: str | None = None) -> list[str]:
        """Keys under `prefix` in order, strictly after `after` when given."""
        keys: list[str] = []
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
        if after:
            kwargs["StartAfter"] = after
        for page in self._s3.get_paginator("list_objects_v2").paginate(**kwargs):
            keys.extend(item["Key"] for item in page.get("Contents", []))
        return keys

    def presigned_get(self, key: str, expires_seconds: int = 3600) -> str:
        return self._s3.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": key}, ExpiresIn=expires_seconds
        )

    def presigned_put(self, key: str, expires_seconds: int = 3600) -> str:
        return self._s3.generate_presigned_url(
            "put_object", Params={"Bucket": self.bucket, "Key": key}, ExpiresIn=expires_seconds
        )

    def presigned_post(self, key_prefix: str, expires_seconds: int = 86400) -> dict[str, Any]:
        """{url, fields}: a form upload allowed for any key starting with `key_prefix`."""
        post = self._s3.generate_presigned_post(
            Bucket=self.bucket,
            Key=key_prefix + "${filename}",
            Conditions=[["starts-with", "$key", key_prefix]],
            ExpiresIn=expires_seconds,
        )
        return {"url": post["url"], "fields": post["fields"]}
