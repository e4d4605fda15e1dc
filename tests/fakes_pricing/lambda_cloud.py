"""Lambda Cloud's GET /api/v1/instance-types, Bearer-authenticated, with its error body for a bad key."""

from __future__ import annotations

from typing import Any

from fakes_pricing.server import Request


def instance_type(name: str, cents: int, vcpus: int, memory_gib: int, gpus: int, gpu: str,
                  regions: list[str]) -> dict[str, Any]:  # fmt: skip
    description = f"{gpus}x {gpu}" if gpus else f"{vcpus}x CPU"
    return {
        "instance_type": {
            "name": name, "description": description, "gpu_description": gpu,
            "price_cents_per_hour": cents,
            "specs": {"vcpus": vcpus, "memory_gib": memory_gib, "storage_gib": 512, "gpus": gpus},
        },
        "regions_with_capacity_available": [{"name": r, "description": r} for r in regions],
    }  # fmt: skip


class InstanceTypesApi:
    def __init__(self, types: dict[str, dict[str, Any]], api_key: str) -> None:
        self.types = types
        self.api_key = api_key

    def __call__(self, request: Request) -> tuple[int, Any]:
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            return 401, {"error": {"code": "global/invalid-api-key",
                                   "message": "API key was invalid, expired, or deleted."}}  # fmt: skip
        if request.method != "GET" or request.path != "/api/v1/instance-types":
            return 404, {"error": {"code": "global/object-does-not-exist", "message": "Not found"}}
        return 200, {"data": self.types}
