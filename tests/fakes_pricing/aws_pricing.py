"""The AWS Price List Query API (`AWSPriceListService.GetProducts`, JSON 1.1 over POST /), which moto
does not implement. Products are held as Price List JSON documents; TERM_MATCH filters on attributes;
pages of `page_size` with a NextToken."""

from __future__ import annotations

import json
from typing import Any

from fakes_pricing.server import Request


def ec2_product(region: str, instance_type: str, usd_per_hour: str, **attributes: str) -> dict[str, Any]:
    """One EC2 product as the Price List API returns it (trimmed to the fields that matter)."""
    sku = f"SKU{abs(hash((region, instance_type, tuple(attributes.items())))) % 10**8:08d}"
    attrs = {
        "instanceType": instance_type, "regionCode": region, "operatingSystem": "Linux", "tenancy": "Shared",
        "preInstalledSw": "NA", "capacitystatus": "Used", "licenseModel": "No License required",
        "servicecode": "AmazonEC2", "location": region, "vcpu": "2", "memory": "8 GiB", **attributes,
    }  # fmt: skip
    term = f"{sku}.JRTCKXETXF"
    description = f"${usd_per_hour} per On Demand Linux {instance_type} Instance Hour"
    return {
        "product": {"productFamily": "Compute Instance", "attributes": attrs, "sku": sku},
        "serviceCode": "AmazonEC2",
        "terms": {
            "OnDemand": {
                term: {
                    "priceDimensions": {
                        f"{term}.6YS6EN2CT7": {
                            "unit": "Hrs", "endRange": "Inf", "beginRange": "0", "appliesTo": [],
                            "description": description,
                            "rateCode": f"{term}.6YS6EN2CT7", "pricePerUnit": {"USD": usd_per_hour},
                        }
                    },
                    "sku": sku, "effectiveDate": "2026-11-01T00:00:00Z", "offerTermCode": "JRTCKXETXF",
                    "termAttributes": {},
                }
            }
        },
        "version": "20261101000000",
        "publicationDate": "2026-11-01T00:00:00Z",
    }  # fmt: skip


class PriceListApi:
    def __init__(self, products: list[dict[str, Any]], page_size: int = 2) -> None:
        self.products = products
        self.page_size = page_size

    def __call__(self, request: Request) -> tuple[int, Any]:
        target = request.headers.get("x-amz-target", "")
        if request.method != "POST" or target != "AWSPriceListService.GetProducts":
            return 400, {"__type": "InvalidParameterException", "Message": f"unsupported {target!r}"}
        body = request.json()
        if body.get("ServiceCode") != "AmazonEC2":
            return 400, {"__type": "InvalidParameterException", "Message": "Input provided for ServiceCode"}
        wanted = {(f["Field"], f["Value"]) for f in body.get("Filters", []) if f["Type"] == "TERM_MATCH"}
        matches = [p for p in self.products
                   if all(p["product"]["attributes"].get(k) == v for k, v in wanted)]  # fmt: skip
        start = int(body.get("NextToken") or 0)
        page = matches[start : start + self.page_size]
        answer: dict[str, Any] = {"FormatVersion": "aws_v1", "PriceList": [json.dumps(p) for p in page]}
        if start + self.page_size < len(matches):
            answer["NextToken"] = str(start + self.page_size)
        return 200, answer
