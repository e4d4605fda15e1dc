"""RunPod prices from its GraphQL API (`gpuTypes`): per-GPU secure, community and spot prices.

The catalog's RunPod rows are `<n>x_<GPU>_<SECURE|COMMUNITY>` per data center; RunPod prices a GPU
the same in every data center, so a row costs n times the per-GPU price of its cloud tier. Spot is the
tier's spot price, else `lowestPrice.minimumBidPrice`. GPUs the catalog has no rows for are not added
(the API does not say what vCPUs and memory a pod gets).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import httpx

from shared.catalog.offering import Offering
from shared.clouds.rest_client import new_http_client
from shared.price_refresh.quotes import PriceQuote, PriceSourceError, ProviderPrices

DEFAULT_URL = "https://api.runpod.io/graphql"
GPU_TYPES_QUERY = """query GpuTypes {
  gpuTypes {
    id
    displayName
    memoryInGb
    securePrice
    communityPrice
    secureSpotPrice
    communitySpotPrice
    lowestPrice(input: {gpuCount: 1}) { minimumBidPrice uninterruptablePrice }
  }
}"""
# The GPU part of our instance type names → RunPod's gpuTypeId (as SkyPilot's RunPod catalog names them).
GPU_IDS: dict[str, str] = {
    "A100-80GB": "NVIDIA A100 80GB PCIe",
    "A100-80GB-SXM": "NVIDIA A100-SXM4-80GB",
    "H100-PCIe": "NVIDIA H100 PCIe",
    "H100": "NVIDIA H100 PCIe",
    "H100-SXM": "NVIDIA H100 80GB HBM3",
    "H100-NVL": "NVIDIA H100 NVL",
    "H200-SXM": "NVIDIA H200",
    "L40S": "NVIDIA L40S",
    "L40": "NVIDIA L40",
    "L4": "NVIDIA L4",
    "A40": "NVIDIA A40",
    "A6000": "NVIDIA RTX A6000",
    "RTX4090": "NVIDIA GeForce RTX 4090",
    "RTX3090": "NVIDIA GeForce RTX 3090",
    "RTXA4000": "NVIDIA RTX A4000",
    "RTXA5000": "NVIDIA RTX A5000",
}
_ROW_NAME = re.compile(r"^(\d+)x_(.+)_(SECURE|COMMUNITY)$")


class RunPodPriceFetcher:
    cloud = "runpod"

    def __init__(self, api_key: str, url: str = DEFAULT_URL, client: httpx.Client | None = None) -> None:
        self.api_key = api_key
        self.url = url
        self.client = client or new_http_client(30.0)

    def fetch(self, base: Sequence[Offering]) -> ProviderPrices:
        answer = self.client.post(
            self.url,
            json={"query": GPU_TYPES_QUERY},
            headers={"Authorization": f"Bearer {self.api_key}"},
        )
        try:
            body = answer.json()
        except ValueError:
            raise PriceSourceError(f"HTTP {answer.status_code}: {answer.text[:200]}") from None
        if answer.status_code != 200 or body.get("errors"):
            messages = [str(e.get("message")) for e in body.get("errors") or [] if isinstance(e, dict)]
            raise PriceSourceError(f"HTTP {answer.status_code}: {'; '.join(messages) or answer.text[:200]}")
        try:
            gpu_types = {str(g["id"]): g for g in body["data"]["gpuTypes"]}
        except (KeyError, TypeError):
            raise PriceSourceError(f"not a gpuTypes answer: {answer.text[:200]}") from None
        return ProviderPrices(
            self.cloud, f"RunPod GraphQL gpuTypes ({self.url})", tuple(quotes_for(base, gpu_types))
        )


def _positive(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def quotes_for(base: Sequence[Offering], gpu_types: dict[str, dict[str, Any]]) -> list[PriceQuote]:
    """A quote for every catalog row whose GPU the answer prices."""
    quotes = []
    for o in base:
        match = _ROW_NAME.match(o.instance_type)
        if match is None:
            continue
        count, gpu, tier = int(match.group(1)), match.group(2), match.group(3).lower()
        gpu_type = gpu_types.get(GPU_IDS.get(gpu, gpu))
        if gpu_type is None:
            continue
        lowest = gpu_type.get("lowestPrice") or {}
        price = _positive(gpu_type.get(f"{tier}Price"))
        spot = _positive(gpu_type.get(f"{tier}SpotPrice")) or _positive(lowest.get("minimumBidPrice"))
        if price is None and spot is None:
            continue
        quotes.append(
            PriceQuote(o.region, o.zone, o.instance_type,
                       price=round(price * count, 6) if price else None,
                       spot_price=round(spot * count, 6) if spot else None)
        )  # fmt: skip
    return quotes
