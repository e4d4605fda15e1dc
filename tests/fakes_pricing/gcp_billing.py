"""The Cloud Billing Catalog API's `GET /v1/services/{id}/skus`: API key in `key=`, pages of `pageSize`
with `nextPageToken`, Google's error body for a bad key."""

from __future__ import annotations

from typing import Any

from fakes_pricing.server import Request


def sku(description: str, regions: list[str], usd: float, *, usage: str = "OnDemand", unit: str = "h",
        family: str = "Compute") -> dict[str, Any]:  # fmt: skip
    units, nanos = int(usd), round((usd - int(usd)) * 1e9)
    sku_id = f"{abs(hash((description, tuple(regions), usage))) % 10**12:012X}"
    return {
        "name": f"services/6F81-5844-456A/skus/{sku_id}", "skuId": sku_id, "description": description,
        "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": family,
                     "resourceGroup": "N1Standard", "usageType": usage},
        "serviceRegions": regions,
        "pricingInfo": [{
            "summary": "", "effectiveTime": "2026-11-20T12:00:00Z", "currencyConversionRate": 1,
            "pricingExpression": {
                "usageUnit": unit, "displayQuantity": 1, "baseUnitConversionFactor": 3600,
                "usageUnitDescription": "hour", "baseUnit": "s", "baseUnitDescription": "second",
                "tieredRates": [{"startUsageAmount": 0,
                                 "unitPrice": {"currencyCode": "USD", "units": str(units), "nanos": nanos}}],
            },
            "aggregationInfo": {"aggregationLevel": "ACCOUNT", "aggregationInterval": "DAILY",
                                "aggregationCount": 1},
        }],
        "serviceProviderName": "Google",
        "geoTaxonomy": {"type": "MULTI_REGIONAL", "regions": regions},
    }  # fmt: skip


class SkusApi:
    def __init__(self, skus: list[dict[str, Any]], api_key: str, page_size: int = 2) -> None:
        self.skus = skus
        self.api_key = api_key
        self.page_size = page_size

    def __call__(self, request: Request) -> tuple[int, Any]:
        if request.query.get("key") != self.api_key:
            return 400, {"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                                   "status": "INVALID_ARGUMENT"}}  # fmt: skip
        if request.path != "/v1/services/6F81-5844-456A/skus":
            return 404, {
                "error": {"code": 404, "message": "Requested entity was not found.", "status": "NOT_FOUND"}
            }
        size = min(int(request.query.get("pageSize", "5000")), self.page_size)
        start = int(request.query.get("pageToken") or 0)
        answer: dict[str, Any] = {"skus": self.skus[start : start + size], "nextPageToken": ""}
        if start + size < len(self.skus):
            answer["nextPageToken"] = str(start + size)
        return 200, answer
