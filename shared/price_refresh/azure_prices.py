"""Azure prices from the public Retail Prices API (no credentials): on-demand and spot Linux VM prices
per region, asked for the catalog's VM sizes only, following `NextPageLink` until the last page.

An item is a Linux pay-as-you-go VM price when `type` is Consumption, `unitOfMeasure` is "1 Hour", its
product name has no "Windows" and its SKU no "Low Priority"; "Spot" in the SKU name marks a spot price.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import httpx

from shared.catalog.offering import Offering
from shared.clouds.rest_client import new_http_client
from shared.price_refresh.quotes import PriceQuote, PriceSourceError, ProviderPrices
from shared.price_refresh.regional import quotes_by_region

DEFAULT_URL = "https://prices.azure.com/api/retail/prices"
API_VERSION = "2023-01-01-preview"
SIZES_PER_QUERY = 15  # keeps each $filter well under URL limits
MAX_SIZES_FILTERED = 45  # more sizes than this in a region: read the region's whole price list instead
MAX_PAGES = 200


class AzurePriceFetcher:
    cloud = "azure"

    def __init__(self, url: str = DEFAULT_URL, client: httpx.Client | None = None) -> None:
        self.url = url
        self.client = client or new_http_client(30.0)

    def fetch(self, base: Sequence[Offering]) -> ProviderPrices:
        sizes_by_region: dict[str, set[str]] = {}
        for o in base:
            sizes_by_region.setdefault(o.region, set()).add(o.instance_type)
        quotes, problems = quotes_by_region(
            sizes_by_region,
            lambda region: self._region_quotes(region, sorted(sizes_by_region[region])),
            (httpx.HTTPError, PriceSourceError),
        )
        return ProviderPrices(self.cloud, f"Azure Retail Prices API ({self.url})", tuple(quotes),
                              problems=tuple(problems))  # fmt: skip

    def _region_quotes(self, region: str, sizes: list[str]) -> list[PriceQuote]:
        on_demand: dict[str, tuple[str, float]] = {}
        spot: dict[str, tuple[str, float]] = {}
        if len(sizes) > MAX_SIZES_FILTERED:  # fewer requests to read the whole region and keep ours
            filters = [retail_filter(region, ())]
        else:
            filters = [
                retail_filter(region, sizes[i : i + SIZES_PER_QUERY])
                for i in range(0, len(sizes), SIZES_PER_QUERY)
            ]
        wanted = set(sizes)
        for odata_filter in filters:
            for item in self._items(odata_filter):
                parsed = parse_retail_item(item)
                if parsed is None or parsed[0] not in wanted:
                    continue
                size, is_spot, price, since = parsed
                prices = spot if is_spot else on_demand
                if size not in prices or since > prices[size][0]:
                    prices[size] = (since, price)
        return [
            PriceQuote(region, None, size, price=on_demand[size][1] if size in on_demand else None,
                       spot_price=spot[size][1] if size in spot else None)
            for size in sorted(set(on_demand) | set(spot))
        ]  # fmt: skip

    def _items(self, odata_filter: str) -> Iterator[dict[str, Any]]:
        """Every item of a query, page after page (`NextPageLink` is absolute and carries the filter)."""
        url: str | None = self.url
        params: dict[str, str] | None = {"api-version": API_VERSION, "$filter": odata_filter}
        for _ in range(MAX_PAGES):
            if url is None:
                return
            answer = self.client.get(url, params=params)
            if answer.status_code != 200:
                raise PriceSourceError(f"HTTP {answer.status_code} from {url}: {answer.text[:200]}")
            try:
                page = answer.json()
                items = page["Items"]
            except (ValueError, KeyError, TypeError):
                raise PriceSourceError(f"not a Retail Prices page: {answer.text[:200]}") from None
            yield from items
            url, params = page.get("NextPageLink") or None, None
        raise PriceSourceError(f"more than {MAX_PAGES} pages for {odata_filter!r}")


def retail_filter(region: str, sizes: Sequence[str]) -> str:
    """Linux and Windows, on demand, spot and low priority alike: the API cannot filter on OS."""
    text = f"serviceName eq 'Virtual Machines' and priceType eq 'Consumption' and armRegionName eq '{region}'"
    if sizes:
        text += " and (" + " or ".join(f"armSkuName eq '{size}'" for size in sizes) + ")"
    return text


def parse_retail_item(item: dict[str, Any]) -> tuple[str, bool, float, str] | None:
    """(VM size, is spot, $/h, effective since) of a Linux pay-as-you-go VM price; None for anything else."""
    try:
        if item.get("type") != "Consumption" or item.get("unitOfMeasure") != "1 Hour":
            return None
        sku_name = str(item.get("skuName", ""))
        if "Windows" in str(item.get("productName", "")) or "Low Priority" in sku_name:
            return None
        price = float(item["retailPrice"])
        size = str(item["armSkuName"])
    except (KeyError, TypeError, ValueError):
        return None
    if price <= 0 or not size:
        return None
    return size, "Spot" in sku_name, price, str(item.get("effectiveStartDate", ""))
