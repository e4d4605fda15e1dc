"""RunPod's GraphQL endpoint answering the `gpuTypes` query (and GraphQL errors for anything else)."""

from __future__ import annotations

from typing import Any

from fakes_pricing.server import Request


def gpu_type(
    gpu_id: str,
    display: str,
    memory: int,
    secure: float | None,
    community: float | None,
    secure_spot: float | None,
    community_spot: float | None,
    bid: float,
) -> dict[str, Any]:
    return {
        "id": gpu_id, "displayName": display, "memoryInGb": memory,
        "securePrice": secure, "communityPrice": community,
        "secureSpotPrice": secure_spot, "communitySpotPrice": community_spot,
        "lowestPrice": {"minimumBidPrice": bid, "uninterruptablePrice": community or secure},
    }  # fmt: skip


class GraphqlApi:
    def __init__(self, gpu_types: list[dict[str, Any]], api_key: str) -> None:
        self.gpu_types = gpu_types
        self.api_key = api_key

    def __call__(self, request: Request) -> tuple[int, Any]:
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            return 401, {"errors": [{"message": "Unauthorized"}]}
        query = (request.json() or {}).get("query", "")
        if "gpuTypes" not in query:
            return 400, {"errors": [{"message": "Cannot query field on type Query",
                                     "extensions": {"code": "GRAPHQL_VALIDATION_FAILED"}}]}  # fmt: skip
        return 200, {"data": {"gpuTypes": self.gpu_types}}
