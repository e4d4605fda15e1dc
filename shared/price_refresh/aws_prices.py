"""AWS prices: spot per zone from EC2 `DescribeSpotPriceHistory`, on-demand per region from the Price List
API (`pricing:GetProducts`, served from us-east-1). Linux, shared tenancy, no pre-installed software.

One region failing (not opted in, throttled) leaves that region's prices as they were; AWS as a whole
fails only when every region does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from shared.catalog.offering import Offering
from shared.price_refresh.quotes import PriceQuote, PriceSourceError, ProviderPrices
from shared.price_refresh.regional import quotes_by_region

SOURCE = "ec2:DescribeSpotPriceHistory + pricing:GetProducts"
PRICING_REGION = "us-east-1"
_LINUX = "Linux/UNIX"
_ON_DEMAND_FILTERS = {
    "operatingSystem": "Linux",
    "tenancy": "Shared",
    "preInstalledSw": "NA",
    "capacitystatus": "Used",
}
_RETRIES = Config(retries={"max_attempts": 4, "mode": "standard"})


class AwsPriceFetcher:
    cloud = "aws"

    def __init__(self, endpoint_url: str | None = None, pricing_endpoint_url: str | None = None) -> None:
        self.endpoint_url = endpoint_url  # EC2 (moto in tests and local mode)
        self.pricing_endpoint_url = pricing_endpoint_url or endpoint_url

    def _client(self, service: str, region: str, endpoint_url: str | None) -> Any:
        return boto3.client(service, region_name=region, endpoint_url=endpoint_url, config=_RETRIES)

    def fetch(self, base: Sequence[Offering]) -> ProviderPrices:
        types_by_region: dict[str, set[str]] = {}
        for o in base:
            types_by_region.setdefault(o.region, set()).add(o.instance_type)
        pricing = self._client("pricing", PRICING_REGION, self.pricing_endpoint_url)
        # clients are thread-safe once made; making them is not (the default session)
        ec2 = {region: self._client("ec2", region, self.endpoint_url) for region in types_by_region}

        def region_quotes(region: str) -> list[PriceQuote]:
            types = types_by_region[region]
            return spot_quotes(ec2[region], region, sorted(types)) + on_demand_quotes(pricing, region, types)

        quotes, problems = quotes_by_region(
            types_by_region, region_quotes, (ClientError, BotoCoreError, PriceSourceError)
        )
        return ProviderPrices(self.cloud, SOURCE, tuple(quotes), problems=tuple(problems))


def spot_quotes(ec2: Any, region: str, instance_types: list[str]) -> list[PriceQuote]:
    """The current Linux spot price of each (zone, type): the newest entry of the history."""
    newest: dict[tuple[str, str], tuple[datetime, float]] = {}
    pages = ec2.get_paginator("describe_spot_price_history").paginate(
        InstanceTypes=instance_types, ProductDescriptions=[_LINUX], StartTime=datetime.now(UTC)
    )
    for page in pages:
        for entry in page.get("SpotPriceHistory", []):
            if not str(entry.get("ProductDescription", "")).startswith(_LINUX):
                continue
            key = (entry["AvailabilityZone"], entry["InstanceType"])
            at = _as_datetime(entry["Timestamp"])
            price = float(entry["SpotPrice"])
            if key not in newest or at > newest[key][0]:
                newest[key] = (at, price)
    return [PriceQuote(region, zone, itype, spot_price=price) for (zone, itype), (_, price) in newest.items()]


def _as_datetime(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")[:32])


def on_demand_quotes(pricing: Any, region: str, instance_types: set[str]) -> list[PriceQuote]:
    filters = [{"Type": "TERM_MATCH", "Field": "regionCode", "Value": region}]
    filters += [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in _ON_DEMAND_FILTERS.items()]
    quotes = []
    pages = pricing.get_paginator("get_products").paginate(
        ServiceCode="AmazonEC2", Filters=filters, FormatVersion="aws_v1"
    )
    for page in pages:
        for item in page.get("PriceList", []):
            parsed = parse_price_list_item(item)
            if parsed is not None and parsed[0] in instance_types:
                quotes.append(PriceQuote(region, None, parsed[0], price=parsed[1]))
    return quotes


def parse_price_list_item(item: str | dict[str, Any]) -> tuple[str, float] | None:
    """(instance type, on-demand $/h) of one Price List product, or None if it has no hourly price."""
    try:
        product = json.loads(item) if isinstance(item, str) else item
        itype = product["product"]["attributes"]["instanceType"]
        prices = list(_hourly_usd(product["terms"].get("OnDemand", {})))
    except (ValueError, KeyError, TypeError) as error:
        raise PriceSourceError(f"unreadable Price List item: {error}") from None
    positive = [p for p in prices if p > 0]
    return (itype, min(positive)) if positive else None


def _hourly_usd(on_demand: dict[str, Any]) -> Iterator[float]:
    for term in on_demand.values():
        for dimension in term.get("priceDimensions", {}).values():
            usd = dimension.get("pricePerUnit", {}).get("USD")
            if dimension.get("unit") in ("Hrs", "Hours") and usd is not None:
                yield float(usd)
