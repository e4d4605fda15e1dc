"""The Azure Retail Prices API (GET /api/retail/prices): OData `$filter` on the fields skyless uses
(`eq` joined by `and`/`or`, one parenthesised group), pages of `page_size` with an absolute NextPageLink."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

from fakes_pricing.server import Request

_TERM = re.compile(r"(\w+) eq '([^']*)'")
_FILTER_FIELDS = {"priceType": "type"}  # filter names that differ from the item's field names


def vm_item(region: str, size: str, price: float, *, spot: bool = False, windows: bool = False,
            low_priority: bool = False, since: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:  # fmt: skip
    """One Virtual Machines meter as the Retail Prices API returns it."""
    short = size.removeprefix("Standard_").replace("_", " ")
    suffix = " Spot" if spot else " Low Priority" if low_priority else ""
    series = f"Virtual Machines {short.split()[0][0]}s Series" + (" Windows" if windows else "")
    return {
        "currencyCode": "USD", "tierMinimumUnits": 0.0, "retailPrice": price, "unitPrice": price,
        "armRegionName": region, "location": region, "effectiveStartDate": since,
        "meterId": f"meter-{region}-{size}-{suffix}-{windows}", "meterName": short + suffix,
        "productId": "DZH318Z0BQPS", "skuId": "DZH318Z0BQPS/00TG", "productName": series,
        "skuName": short + suffix, "serviceName": "Virtual Machines", "serviceId": "DZH313Z7MMC8",
        "serviceFamily": "Compute", "unitOfMeasure": "1 Hour", "type": "Consumption",
        "isPrimaryMeterRegion": True, "armSkuName": size,
    }  # fmt: skip


def _matches(item: dict[str, Any], odata_filter: str) -> bool:
    """`a eq 'x' and b eq 'y' and (c eq 'z' or c eq 'w')`: every and-part must hold; or-groups any."""
    group = re.search(r"\((.*)\)", odata_filter)
    required = _TERM.findall(re.sub(r"\(.*\)", "", odata_filter))
    if not all(str(item.get(_FILTER_FIELDS.get(k, k))) == v for k, v in required):
        return False
    if group is None:
        return True
    return any(str(item.get(k)) == v for k, v in _TERM.findall(group.group(1)))


class RetailPricesApi:
    def __init__(self, items: list[dict[str, Any]], page_size: int = 3) -> None:
        self.items = items
        self.page_size = page_size
        self.base_url = ""  # set by the test once the server has a port

    def __call__(self, request: Request) -> tuple[int, Any]:
        if request.path != "/api/retail/prices":
            return 404, {"error": {"code": "NotFound", "message": "not found"}}
        odata_filter = request.query.get("$filter", "")
        if odata_filter.count("(") != odata_filter.count(")"):
            message = f"Invalid OData filter: {odata_filter}"
            return 400, {"Error": {"Code": "InvalidFilter", "Message": message}}
        matches = [i for i in self.items if _matches(i, odata_filter)]
        skip = int(request.query.get("$skip", "0"))
        page = matches[skip : skip + self.page_size]
        next_link = None
        if skip + self.page_size < len(matches):
            query = {**request.query, "$skip": str(skip + self.page_size)}
            next_link = f"{self.base_url}{request.path}?{urlencode(query)}"
        return 200, {
            "BillingCurrency": "USD", "CustomerEntityId": "Default", "CustomerEntityType": "Retail",
            "Items": page, "NextPageLink": next_link, "Count": len(page),
        }  # fmt: skip
