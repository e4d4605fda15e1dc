"""The bucket, in memory: task files and secrets of the run's jobs, uploads and their error reports (logs are
not shipped by simulated agents; presigned URLs are never fetched). ETags are the MD5 of the bytes, as S3's
are for an object put in one part."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from shared.aws.object_store import StoredObject


class MemoryObjects:
    def __init__(self) -> None:
        self.objects: dict[str, str] = {}
        self.metadata: dict[str, dict[str, str]] = {}

    def put_text(self, key: str, text: str) -> None:
        self.objects[key] = text
        self.metadata.pop(key, None)

    def put_object(self, key: str, text: str, metadata: dict[str, str] | None = None) -> str:
        """What an uploader's PUT does (with `x-amz-meta-*` metadata); answers the ETag."""
        self.put_text(key, text)
        self.metadata[key] = {k.lower(): v for k, v in (metadata or {}).items()}
        return self.etag(key)

    def etag(self, key: str) -> str:
        return hashlib.md5(self.objects[key].encode()).hexdigest()

    def put_json(self, key: str, value: Any) -> None:
        self.put_text(key, json.dumps(value, indent=2))

    def get_text(self, key: str) -> str | None:
        return self.objects.get(key)

    def read_version(self, key: str, etag: str, max_bytes: int) -> StoredObject | None:
        if key not in self.objects or self.etag(key) != etag:
            return None
        return StoredObject(self.objects[key].encode()[: max_bytes + 1], dict(self.metadata.get(key, {})))

    def delete(self, key: str) -> None:
        self.objects.pop(key, None)
        self.metadata.pop(key, None)

    def list_keys(self, prefix: str, after: str | None = None) -> list[str]:
        return sorted(k for k in self.objects if k.startswith(prefix) and (after is None or k > after))

    def presigned_get(self, key: str, expires_seconds: int = 3600) -> str:
        return f"https://bucket.invalid/{key}"

    def presigned_put(self, key: str, expires_seconds: int = 3600) -> str:
        return f"https://bucket.invalid/{key}?put"

    def presigned_post(self, key_prefix: str, expires_seconds: int = 86400) -> dict[str, Any]:
        return {"url": "https://bucket.invalid/", "fields": {"key": key_prefix + "${filename}"}}
