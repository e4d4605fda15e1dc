"""The bucket (S3): task files too big for a record, logs, workdir tarballs. A port and its adapter."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

from botocore.exceptions import ClientError

from shared.aws.sessions import aws_client
from shared.config import Settings


@dataclass(frozen=True)
class StoredObject:
    body: bytes  # at most the bytes asked for, and one more when the object is bigger
    metadata: dict[str, str]  # user metadata (`x-amz-meta-*`), names lower-cased


class ObjectStore(Protocol):
    def put_text(self, key: str, text: str) -> None: ...
    def put_json(self, key: str, value: Any) -> None: ...
    def get_text(self, key: str) -> str | None: ...
    def read_version(self, key: str, etag: str, max_bytes: int) -> StoredObject | None:
        """The object while its ETag is still `etag`; None when it is gone or has been overwritten since."""
        ...

    def delete(self, key: str) -> None:
        """Delete the object; a key that is not there is not an error."""
        ...

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

    def put_json(self, key: str, value: Any) -> None:
        self._s3.put_object(
            Bucket=self.bucket,
            Key=key,
            Body=json.dumps(value, indent=2).encode(),
            ContentType="application/json",
            ServerSideEncryption="AES256",
        )

    def read_version(self, key: str, etag: str, max_bytes: int) -> StoredObject | None:
        try:
            answer = self._s3.get_object(Bucket=self.bucket, Key=key, IfMatch=f'"{etag}"')
        except ClientError as error:
            if error.response["Error"]["Code"] in ("PreconditionFailed", "412", "NoSuchKey", "404"):
                return None
            raise
        body = answer["Body"].read(max_bytes + 1)
        return StoredObject(body, {k.lower(): v for k, v in (answer.get("Metadata") or {}).items()})

    def delete(self, key: str) -> None:
        self._s3.delete_object(Bucket=self.bucket, Key=key)

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
