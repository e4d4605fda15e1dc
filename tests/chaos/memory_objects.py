"""The bucket, in memory: task files and secrets of the run's jobs (logs are not shipped by simulated
agents; presigned URLs are never fetched)."""

from __future__ import annotations

from typing import Any


class MemoryObjects:
    def __init__(self) -> None:
        self.objects: dict[str, str] = {}

    def put_text(self, key: str, text: str) -> None:
        self.objects[key] = text

    def get_text(self, key: str) -> str | None:
        return self.objects.get(key)

    def list_keys(self, prefix: str, after: str | None = None) -> list[str]:
        return sorted(k for k in self.objects if k.startswith(prefix) and (after is None or k > after))

    def presigned_get(self, key: str, expires_seconds: int = 3600) -> str:
        return f"https://bucket.invalid/{key}"

    def presigned_put(self, key: str, expires_seconds: int = 3600) -> str:
        return f"https://bucket.invalid/{key}?put"

    def presigned_post(self, key_prefix: str, expires_seconds: int = 86400) -> dict[str, Any]:
        return {"url": "https://bucket.invalid/", "fields": {"key": key_prefix + "${filename}"}}
