"""Each pricing source against its API: AWS EC2 on moto's server, the Price List API and the REST/GraphQL
clouds on local fake servers speaking their real shapes (paging included); errors are PriceSourceErrors."""

from __future__ import annotations

import pytest
from fakes_pricing.aws_pricing import PriceListApi, ec2_product
from fakes_pricing.azure_retail import RetailPricesApi, vm_item
from fakes_pricing.gcp_billing import SkusApi
from fakes_pricing.gcp_billing import sku as gcp_sku
from fakes_pricing.lambda_cloud import InstanceTypesApi, instance_type
from fakes_pricing.runpod_graphql import GraphqlApi, gpu_type
from fakes_pricing.server import FakeServer, Request

from shared.catalog.offering import Offering
from shared.config import Settings
from shared.errors import UserError
from shared.price_refresh import azure_prices
from shared.price_refresh.aws_prices import AwsPriceFetcher
from shared.price_refresh.azure_prices import AzurePriceFetcher
from shared.price_refresh.gcp_prices import GcpPriceFetcher
from shared.price_refresh.lambda_prices import LambdaPriceFetcher
from shared.price_refresh.price_sources import price_fetchers
from shared.price_refresh.quotes import PriceQuote, PriceSourceError
from shared.price_refresh.runpod_prices import RunPodPriceFetcher


def row(cloud: str, region: str, zone: str | None, itype: str, price: float = 1.0, spot: float | None = None,
        acc: str | None = None, count: float = 0) -> Offering:  # fmt: skip
    return Offering(cloud, region, zone, itype, acc, count, None, 4, 16, price, spot)


AWS_BASE = [
    row("aws", "us-east-1", "us-east-1a", "m5.large", 0.2, 0.05),
    row("aws", "us-east-1", "us-east-1b", "m5.large", 0.2, 0.05),
    row("aws", "us-west-2", "us-west-2a", "c5.xlarge", 0.3, 0.1),
]


def test_aws_spot_comes_per_zone_from_ec2_and_on_demand_per_region_from_the_price_list(moto_endpoint: str):
    products = [
        ec2_product("us-east-1", "m5.large", "0.0960000000"),
        ec2_product("us-east-1", "m5.large", "0.1200000000", operatingSystem="Windows"),
        ec2_product("us-east-1", "m5.xlarge", "0.1920000000"),  # not in the catalog: not asked about
        ec2_product("us-east-1", "m5.large", "0.1000000000", tenancy="Dedicated"),
        ec2_product("us-west-2", "c5.xlarge", "0.1700000000"),
    ]
    api = PriceListApi(products, page_size=1)
    with FakeServer(api) as pricing:
        prices = AwsPriceFetcher(moto_endpoint, pricing.url).fetch(AWS_BASE)
    on_demand = {(q.region, q.instance_type): q.price for q in prices.quotes if q.zone is None}
    assert on_demand == {("us-east-1", "m5.large"): 0.096, ("us-west-2", "c5.xlarge"): 0.17}
    spot = {(q.zone, q.instance_type): q.spot_price for q in prices.quotes if q.zone is not None}
    # moto answers its synthetic 0.00001 for each zone that offers the type; the zones are EC2's
    assert spot[("us-east-1a", "m5.large")] == 0.00001 and ("us-west-2a", "c5.xlarge") in spot
    assert {z for z, t in spot if t == "m5.large"} <= {f"us-east-1{c}" for c in "abcdef"}
    assert all(z.startswith("us-west-2") for z, t in spot if t == "c5.xlarge")
    assert prices.problems == ()
    targets = [r.headers["x-amz-target"] for r in pricing.requests]
    assert set(targets) == {"AWSPriceListService.GetProducts"} and len(targets) == 3  # 2 pages + 1


def test_aws_fails_as_a_whole_only_when_every_region_fails(moto_endpoint: str):
    def refuse(_: object) -> tuple[int, object]:
        return 400, {"__type": "AccessDeniedException", "Message": "User is not authorized"}

    with FakeServer(refuse) as pricing, pytest.raises(PriceSourceError, match="every region failed"):
        AwsPriceFetcher(moto_endpoint, pricing.url).fetch(AWS_BASE)


AZURE_BASE = [
    row("azure", "eastus", None, "Standard_D2s_v5", 0.1, 0.02),
    row("azure", "eastus", None, "Standard_NC24ads_A100_v4", 3.6, 1.0, "A100-80GB", 1),
    row("azure", "westeurope", None, "Standard_D2s_v5", 0.11, 0.03),
]


def test_azure_reads_every_page_and_keeps_only_linux_pay_as_you_go_prices():
    items = [
        vm_item("eastus", "Standard_D2s_v5", 0.096),
        vm_item("eastus", "Standard_D2s_v5", 0.192, windows=True),
        vm_item("eastus", "Standard_D2s_v5", 0.0191, spot=True),
        vm_item("eastus", "Standard_D2s_v5", 0.0192, low_priority=True),
        vm_item("eastus", "Standard_D2s_v5", 0.09, since="2025-01-01T00:00:00Z"),  # superseded
        vm_item("eastus", "Standard_NC24ads_A100_v4", 3.673),
        vm_item("eastus", "Standard_NC24ads_A100_v4", 0.9, spot=True),
        vm_item("eastus", "Standard_D4s_v5", 0.192),  # not asked for
        vm_item("westeurope", "Standard_D2s_v5", 0.115),
    ]
    api = RetailPricesApi(items, page_size=2)
    with FakeServer(api) as server:
        api.base_url = server.url
        prices = AzurePriceFetcher(f"{server.url}/api/retail/prices").fetch(AZURE_BASE)
    assert set(prices.quotes) == {
        PriceQuote("eastus", None, "Standard_D2s_v5", 0.096, 0.0191),
        PriceQuote("eastus", None, "Standard_NC24ads_A100_v4", 3.673, 0.9),
        PriceQuote("westeurope", None, "Standard_D2s_v5", 0.115, None),
    }
    eastus = [r for r in server.requests if "eastus" in r.query.get("$filter", "")]
    assert len(eastus) == 4  # 7 eastus items asked for, 2 per page
    assert all("armSkuName eq 'Standard_D4s_v5'" not in r.query["$filter"] for r in server.requests)


def test_azure_error_page_is_a_price_source_error():
    with FakeServer(lambda _: (200, {})) as server:
        server.fail_with = (429, {"Error": {"Code": "TooManyRequests", "Message": "slow down"}})
        with pytest.raises(PriceSourceError, match="HTTP 429"):
            AzurePriceFetcher(f"{server.url}/api/retail/prices").fetch(AZURE_BASE)


LAMBDA_BASE = [
    Offering("lambda", "us-east-1", None, "gpu_1x_a100", "A100", 1, 40, 30, 200, 1.29, None),
    Offering("lambda", "us-west-1", None, "gpu_1x_a100", "A100", 1, 40, 30, 200, 1.29, None),
]


def test_lambda_reprices_known_types_everywhere_and_adds_new_types_in_the_catalogs_regions():
    types = {
        "gpu_1x_a100": instance_type("gpu_1x_a100", 149, 30, 200, 1, "A100 (40 GB PCIe)", ["us-east-1"]),
        "gpu_1x_b200_sxm6": instance_type("gpu_1x_b200_sxm6", 499, 26, 225, 1, "B200 (180 GB SXM6)", []),
    }
    with FakeServer(InstanceTypesApi(types, "key-1")) as server:
        prices = LambdaPriceFetcher("key-1", f"{server.url}/api/v1").fetch(LAMBDA_BASE)
    by_place = {(o.region, o.instance_type): o for o in prices.described}
    assert by_place[("us-west-1", "gpu_1x_a100")].price == 1.49  # no capacity there now, still repriced
    new = by_place[("us-east-1", "gpu_1x_b200_sxm6")]
    assert (new.accelerator, new.accelerator_count, new.accelerator_memory_gib, new.vcpus, new.price) == (
        "B200", 1, 180, 26, 4.99)  # fmt: skip
    assert {r for r, _ in by_place} == {"us-east-1", "us-west-1"}


def test_lambda_bad_key_is_a_price_source_error_with_the_apis_message():
    with (
        FakeServer(InstanceTypesApi({}, "right")) as server,
        pytest.raises(PriceSourceError, match="invalid-api-key"),
    ):
        LambdaPriceFetcher("wrong", f"{server.url}/api/v1").fetch(LAMBDA_BASE)


RUNPOD_BASE = [
    Offering("runpod", "US-TX-3", None, "1x_H100-SXM_SECURE", "H100", 1, 80, 20, 125, 2.69, 1.75),
    Offering("runpod", "US-TX-3", None, "8x_H100-SXM_SECURE", "H100", 8, 80, 160, 1000, 21.52, 14.0),
    Offering("runpod", "US-TX-3", None, "1x_L4_SECURE", "L4", 1, 24, 8, 50, 0.43, 0.22),
    Offering("runpod", "EU-RO-1", None, "1x_RTX4090_COMMUNITY", "RTX4090", 1, 24, 8, 50, 0.34, None),
]


def test_runpod_rows_cost_their_gpu_count_times_the_tiers_per_gpu_price():
    gpus = [
        gpu_type("NVIDIA H100 80GB HBM3", "H100 SXM", 80, 2.99, 2.69, 1.99, 1.59, 1.5),
        gpu_type("NVIDIA GeForce RTX 4090", "RTX 4090", 24, 0.69, 0.34, None, None, 0.2),
        gpu_type("NVIDIA B200", "B200", 180, 5.99, None, None, None, 3.0),  # no catalog rows: not added
    ]
    with FakeServer(GraphqlApi(gpus, "rp")) as server:
        prices = RunPodPriceFetcher("rp", f"{server.url}/graphql").fetch(RUNPOD_BASE)
    assert set(prices.quotes) == {
        PriceQuote("US-TX-3", None, "1x_H100-SXM_SECURE", 2.99, 1.99),
        PriceQuote("US-TX-3", None, "8x_H100-SXM_SECURE", 23.92, 15.92),
        PriceQuote("EU-RO-1", None, "1x_RTX4090_COMMUNITY", 0.34, 0.2),  # spot: the minimum bid
    }
    assert "gpuTypes" in server.requests[0].json()["query"]


def test_runpod_graphql_errors_are_price_source_errors():
    with FakeServer(GraphqlApi([], "rp")) as server, pytest.raises(PriceSourceError, match="Unauthorized"):
        RunPodPriceFetcher("nope", f"{server.url}/graphql").fetch(RUNPOD_BASE)


def test_sources_default_to_aws_and_azure_plus_the_clouds_whose_keys_are_set():
    settings = Settings(prefix="p")
    chosen = price_fetchers(settings, {"RUNPOD_API_KEY": "rp", "LAMBDA_API_KEY": ""})
    assert [f.cloud for f in chosen][:2] == ["aws", "azure"] and "runpod" in [f.cloud for f in chosen]
    named = price_fetchers(settings, {"SKYLESS_PRICE_CLOUDS": "azure, lambda", "LAMBDA_API_KEY": "k"})
    assert [f.cloud for f in named] == ["azure", "lambda"]


def test_an_unknown_price_cloud_is_a_user_error_naming_the_setting():
    with pytest.raises(UserError) as caught:
        price_fetchers(Settings(prefix="p"), {"SKYLESS_PRICE_CLOUDS": "aws,vast"})
    assert caught.value.field == "SKYLESS_PRICE_CLOUDS" and "vast" in str(caught.value)


GCP_BASE = [
    Offering("gcp", "us-central1", "us-central1-a", "n1-standard-8", None, 0, None, 8, 30, 0.38, 0.08),
    Offering("gcp", "us-central1", "us-central1-a", "n1-standard-8", "T4", 1, 16, 8, 30, 0.73, 0.22),
    Offering("gcp", "us-central1", "us-central1-b", "a2-highgpu-1g", "A100", 1, 40, 12, 85, 3.67, 1.21),
    Offering("gcp", "europe-west4", "europe-west4-a", "n1-standard-8", None, 0, None, 8, 30, 0.41, 0.09),
]


def test_gcp_prices_a_row_from_its_familys_core_and_ram_and_its_gpus_over_every_page():
    skus = [
        gcp_sku("N1 Predefined Instance Core running in Americas", ["us-central1", "us-east1"], 0.031611),
        gcp_sku("N1 Predefined Instance Ram running in Americas", ["us-central1"], 0.004237, unit="GiBy.h"),
        gcp_sku("Spot Preemptible N1 Predefined Instance Core running in Americas", ["us-central1"], 0.00698,
                usage="Preemptible"),
        gcp_sku("Spot Preemptible N1 Predefined Instance Ram running in Americas", ["us-central1"], 0.00094,
                usage="Preemptible", unit="GiBy.h"),
        gcp_sku("Nvidia Tesla T4 GPU running in Americas", ["us-central1"], 0.35),
        gcp_sku("Commitment v1: N1 Predefined Instance Core in Americas for 1 Year", ["us-central1"], 0.019,
                usage="Commit1Yr"),
        gcp_sku("Custom Instance Core running in Americas", ["us-central1"], 0.033),
        gcp_sku("A2 Instance Core running in Americas", ["us-central1"], 0.031611),
        gcp_sku("A2 Instance Ram running in Americas", ["us-central1"], 0.004237, unit="GiBy.h"),
        gcp_sku("Nvidia Tesla A100 GPU running in Americas", ["us-central1"], 2.933908),
        gcp_sku("Storage PD Capacity", ["us-central1"], 0.04, family="Storage"),
    ]  # fmt: skip
    with FakeServer(SkusApi(skus, "gk", page_size=3)) as server:
        prices = GcpPriceFetcher("gk", f"{server.url}/v1").fetch(GCP_BASE)
    assert set(prices.quotes) == {
        PriceQuote("us-central1", "us-central1-a", "n1-standard-8", 0.379998, 0.08404, gpus=(None, 0)),
        PriceQuote(
            "us-central1", "us-central1-a", "n1-standard-8", 0.729998, None, gpus=("T4", 1)
        ),  # no spot T4 SKU
        PriceQuote("us-central1", "us-central1-b", "a2-highgpu-1g", 3.673385, None, gpus=("A100", 1)),
    }  # europe-west4 has no N1 SKU in this answer: its row is not quoted
    assert len(server.requests) == 4 and server.requests[1].query["pageToken"] == "3"


def test_gcp_bad_api_key_is_a_price_source_error_with_googles_status():
    with (
        FakeServer(SkusApi([], "right")) as server,
        pytest.raises(PriceSourceError, match="INVALID_ARGUMENT"),
    ):
        GcpPriceFetcher("wrong", f"{server.url}/v1").fetch(GCP_BASE)


def test_azure_reads_a_whole_region_when_the_catalog_has_many_sizes_there(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(azure_prices, "MAX_SIZES_FILTERED", 1)
    items = [
        vm_item("eastus", "Standard_D2s_v5", 0.096),
        vm_item("eastus", "Standard_D4s_v5", 0.192),  # not a catalog size: read, then dropped
        vm_item("eastus", "Standard_NC24ads_A100_v4", 3.673),
    ]
    api = RetailPricesApi(items, page_size=2)
    with FakeServer(api) as server:
        api.base_url = server.url
        prices = AzurePriceFetcher(f"{server.url}/api/retail/prices").fetch(AZURE_BASE[:2])
    assert {(q.instance_type, q.price) for q in prices.quotes} == {
        ("Standard_D2s_v5", 0.096), ("Standard_NC24ads_A100_v4", 3.673)}  # fmt: skip
    assert all("armSkuName" not in r.query.get("$filter", "") for r in server.requests)


def test_one_failing_region_is_a_problem_and_the_others_still_count():
    api = RetailPricesApi([vm_item("eastus", "Standard_D2s_v5", 0.09)])

    def westeurope_down(request: Request) -> tuple[int, object]:
        if "westeurope" in request.query.get("$filter", ""):
            return 503, {"Error": {"Code": "ServiceUnavailable", "Message": "try later"}}
        return api(request)

    with FakeServer(westeurope_down) as server:
        api.base_url = server.url
        prices = AzurePriceFetcher(f"{server.url}/api/retail/prices").fetch(AZURE_BASE)
    assert [q.region for q in prices.quotes] == ["eastus"]
    assert len(prices.problems) == 1 and prices.problems[0].startswith("westeurope: HTTP 503")
