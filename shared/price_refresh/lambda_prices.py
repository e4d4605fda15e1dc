"""Lambda Cloud prices from `GET /api/v1/instance-types` (API key as a Bearer token).

This API describes the machines too (vCPUs, memory, GPU count and model), so its answer is whole
offerings: a type the catalog knows is repriced in every region the catalog lists for it, and a type the
catalog lacks is added in the catalog's Lambda regions (the API's prices do not vary by region; the
regions it lists are only those with capacity right now, which would make versions churn).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import httpx

from shared.catalog.accelerators import canonical_name
from shared.catalog.offering import Offering
from shared.clouds.rest_client import new_http_client
from shared.price_refresh.quotes import PriceSourceError, ProviderPrices

DEFAULT_URL = "https://cloud.lambda.ai/api/v1"
_GPU_MEMORY = re.compile(r"(\d+)\s*GB")


class LambdaPriceFetcher:
    cloud = "lambda"

    def __init__(self, api_key: str, url: str = DEFAULT_URL, client: httpx.Client | None = None) -> None:
        self.api_key = api_key
        self.url = url.rstrip("/")
        self.client = client or new_http_client(30.0)

    def fetch(self, base: Sequence[Offering]) -> ProviderPrices:
        answer = self.client.get(
            f"{self.url}/instance-types", headers={"Authorization": f"Bearer {self.api_key}"}
        )
        if answer.status_code != 200:
            raise PriceSourceError(f"HTTP {answer.status_code}: {_error_message(answer)}")
        try:
            data = answer.json()["data"]
            items = [(entry["instance_type"], entry.get("regions_with_capacity_available", []))
                     for entry in data.values()]  # fmt: skip
        except (ValueError, KeyError, TypeError, AttributeError):
            raise PriceSourceError(f"not an instance-types answer: {answer.text[:200]}") from None
        return ProviderPrices(self.cloud, f"Lambda Cloud {self.url}/instance-types",
                              described=tuple(described_offerings(items, base)))  # fmt: skip


def _error_message(answer: httpx.Response) -> str:
    try:
        error = answer.json()["error"]
        return f"{error.get('code')}: {error.get('message')}"
    except (ValueError, KeyError, TypeError, AttributeError):
        return answer.text[:200]


def described_offerings(
    items: list[tuple[dict[str, Any], list[dict[str, Any]]]], base: Sequence[Offering]
) -> list[Offering]:
    """Offerings from (instance_type, regions_with_capacity_available) pairs of the API's answer."""
    known: dict[str, list[Offering]] = {}
    for o in base:
        known.setdefault(o.instance_type, []).append(o)
    catalog_regions = sorted({o.region for o in base})
    offerings: list[Offering] = []
    for spec, capacity in items:
        try:
            name = str(spec["name"])
            price = float(spec["price_cents_per_hour"]) / 100
            specs = spec.get("specs", {})
            vcpus, memory, gpus = (
                float(specs["vcpus"]),
                float(specs["memory_gib"]),
                float(specs.get("gpus", 0)),
            )
        except (KeyError, TypeError, ValueError):
            raise PriceSourceError(f"unreadable instance type: {spec!r}"[:300]) from None
        if price <= 0:
            continue
        rows = known.get(name)
        if rows:
            offerings.extend(
                o._replace(
                    vcpus=vcpus,
                    memory_gib=memory,
                    price=price,
                    accelerator_count=gpus or o.accelerator_count,
                )
                for o in rows
            )
            continue
        accelerator, acc_memory = _gpu(spec) if gpus else (None, None)
        regions = catalog_regions or sorted(str(r["name"]) for r in capacity)
        offerings.extend(
            Offering("lambda", region, None, name, accelerator, gpus, acc_memory, vcpus, memory, price, None)
            for region in regions
        )
    return offerings


def _gpu(spec: dict[str, Any]) -> tuple[str | None, float | None]:
    """("A100", 40.0) from a gpu_description like "A100 (40 GB PCIe)"."""
    text = str(spec.get("gpu_description") or spec.get("description") or "")
    words = re.sub(r"^\d+x\s+", "", text).split()
    if not words:
        return None, None
    found = _GPU_MEMORY.search(text)
    memory = float(found.group(1)) if found else None
    name = words[0]
    if name == "A100" and memory == 80:
        name = "A100-80GB"
    return canonical_name(name), memory
