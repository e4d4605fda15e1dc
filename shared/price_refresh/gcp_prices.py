"""GCP prices from the Cloud Billing Catalog API (Compute Engine: `services/6F81-5844-456A/skus`).

GCP does not price machine types: it prices a family's vCPU-hour and GiB-hour ("N1 Predefined Instance
Core running in Americas", "... Ram ...") and each GPU-hour ("Nvidia Tesla T4 GPU running in ..."), per
region, on demand and spot ("Spot Preemptible ..."). A row costs vCPUs x core + GiB x RAM (+ count x GPU)
with the vCPUs and memory the catalog gives it; a row with a part unpriced keeps its price. Pages of up
to 5000 SKUs follow `nextPageToken`. An API key (`key=`) is all the API needs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

import httpx

from shared.catalog.offering import Offering
from shared.clouds.rest_client import new_http_client
from shared.price_refresh.quotes import PriceQuote, PriceSourceError, ProviderPrices

DEFAULT_URL = "https://cloudbilling.googleapis.com/v1"
COMPUTE_SERVICE = "services/6F81-5844-456A"
MAX_PAGES = 100
_EXCLUDED = ("Custom", "Sole Tenancy", "Extended", "Commitment", "Reserved", "DWS", "Premium", "Workstation")
_MACHINE = re.compile(
    r"^(?P<family>[A-Z][A-Z0-9]*)(?: AMD| Arm| Intel| Predefined)? Instance (?P<part>Core|Ram) running in"
)
_GPU = re.compile(r"^Nvidia (?:Tesla )?(?P<gpu>.+?) GPU running in")
# The GPU as SKU descriptions name it → skyless's canonical accelerator name.
GPU_NAMES = {
    "T4": "T4", "P4": "P4", "P100": "P100", "V100": "V100", "K80": "K80", "L4": "L4",
    "A100": "A100", "A100 80GB": "A100-80GB", "H100 80GB": "H100", "H100 80GB Mega": "H100-MEGA",
    "H200 141GB": "H200", "B200": "B200",
}  # fmt: skip

PriceKey = tuple[str, str, bool]  # (region, "n1:core" | "n1:ram" | "gpu:T4", spot)


class GcpPriceFetcher:
    cloud = "gcp"

    def __init__(self, api_key: str, url: str = DEFAULT_URL, client: httpx.Client | None = None) -> None:
        self.api_key = api_key
        self.url = url.rstrip("/")
        self.client = client or new_http_client(60.0)

    def fetch(self, base: Sequence[Offering]) -> ProviderPrices:
        regions = {o.region for o in base}
        unit_prices = component_prices(self._skus(), regions)
        quotes = []
        for o in base:
            price, spot = row_price(o, unit_prices, False), row_price(o, unit_prices, True)
            if price is not None or spot is not None:
                quotes.append(PriceQuote(o.region, o.zone, o.instance_type, price, spot,
                                         gpus=(o.accelerator, o.accelerator_count)))  # fmt: skip
        return ProviderPrices(self.cloud, f"Cloud Billing Catalog {COMPUTE_SERVICE}", tuple(quotes))

    def _skus(self) -> Iterator[dict[str, Any]]:
        token = ""
        for _ in range(MAX_PAGES):
            params = {"key": self.api_key, "pageSize": "5000"}
            if token:
                params["pageToken"] = token
            answer = self.client.get(f"{self.url}/{COMPUTE_SERVICE}/skus", params=params)
            try:
                page = answer.json()
            except ValueError:
                raise PriceSourceError(f"HTTP {answer.status_code}: {answer.text[:200]}") from None
            if answer.status_code != 200:
                error = page.get("error", {}) if isinstance(page, dict) else {}
                raise PriceSourceError(
                    f"HTTP {answer.status_code}: {error.get('status')}: {error.get('message')}"
                )
            yield from page.get("skus", [])
            token = page.get("nextPageToken") or ""
            if not token:
                return
        raise PriceSourceError(f"more than {MAX_PAGES} pages of SKUs")


def _unit_price(sku: dict[str, Any]) -> float | None:
    try:
        rates = sku["pricingInfo"][0]["pricingExpression"]["tieredRates"]
        money = max(rates, key=lambda r: float(r.get("startUsageAmount", 0)))["unitPrice"]
        return int(money.get("units") or 0) + int(money.get("nanos") or 0) / 1e9
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def component_prices(skus: Iterator[dict[str, Any]], regions: set[str]) -> dict[PriceKey, float]:
    """Core, RAM and GPU hourly prices per region, on demand and spot, from Compute Engine SKUs."""
    prices: dict[PriceKey, float] = {}
    for sku in skus:
        category = sku.get("category", {})
        usage = category.get("usageType")
        if category.get("resourceFamily") != "Compute" or usage not in ("OnDemand", "Preemptible"):
            continue
        description = str(sku.get("description", ""))
        if any(word in description for word in _EXCLUDED):
            continue
        name = re.sub(r"^(Spot )?Preemptible ", "", description)
        machine, gpu = _MACHINE.match(name), _GPU.match(name)
        if machine is not None:
            part = f"{machine.group('family').lower()}:{machine.group('part').lower()}"
        elif gpu is not None and gpu.group("gpu") in GPU_NAMES:
            part = f"gpu:{GPU_NAMES[gpu.group('gpu')]}"
        else:
            continue
        price = _unit_price(sku)
        if price is None or price <= 0:
            continue
        for region in set(sku.get("serviceRegions", [])) & regions:
            prices[(region, part, usage == "Preemptible")] = price
    return prices


def row_price(o: Offering, prices: dict[PriceKey, float], spot: bool) -> float | None:
    family = o.instance_type.split("-", 1)[0]
    core = prices.get((o.region, f"{family}:core", spot))
    ram = prices.get((o.region, f"{family}:ram", spot))
    if core is None or ram is None:
        return None
    total = o.vcpus * core + o.memory_gib * ram
    if o.accelerator is not None:
        gpu = prices.get((o.region, f"gpu:{o.accelerator}", spot))
        if gpu is None:
            return None
        total += o.accelerator_count * gpu
    return round(total, 6)
