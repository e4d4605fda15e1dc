"""The versioned catalog in the bucket (moto server), the refresh run, and the optimize function's
cached view of it: refresh → new version → the next plan uses the new price; unchanged prices make no
new version; a failing provider keeps its previous prices and the failure is recorded."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

import pytest
from conftest import QueueDriver
from fakes_pricing.azure_retail import RetailPricesApi, vm_item
from fakes_pricing.lambda_cloud import InstanceTypesApi
from fakes_pricing.server import FakeServer

from functions.catalog_refresh.handler import handler as refresh_handler
from functions.optimize.handler import handler as optimize_handler
from shared.aws.object_store import S3ObjectStore
from shared.catalog.model import Catalog, build_catalog, default_sources
from shared.catalog.offering import Offering
from shared.config import Settings
from shared.jobs.planning import plan_of
from shared.jobs.submission import SubmitJob, submit_job
from shared.price_refresh.merge import offering_key
from shared.price_refresh.quotes import PriceQuote, PriceSourceError, ProviderPrices
from shared.price_refresh.refresh import refresh_catalog
from shared.price_refresh.versioned_catalog import (
    LAST_REFRESH_KEY,
    LATEST_KEY,
    StoredCatalogLoader,
    read_latest,
    read_manifest,
    read_version,
)
from shared.store.jobs import DynamoJobStore as JobStore
from shared.wiring import wiring_for

D2 = Offering("azure", "eastus", None, "Standard_D2s_v5", None, 0, None, 2, 8, 0.096, 0.0192)
D2_WEST = Offering("azure", "westus2", None, "Standard_D2s_v5", None, 0, None, 2, 8, 0.096, 0.0192)
A10 = Offering("lambda", "us-east-1", None, "gpu_1x_a10", "A10", 1, 24, 30, 200, 0.75, None)
BASE = Catalog([D2, D2_WEST, A10])


class Quoting:
    """A price source of our own port that answers fixed quotes, or fails."""

    def __init__(self, cloud: str, *quotes: PriceQuote, error: Exception | None = None) -> None:
        self.cloud = cloud
        self.quotes = quotes
        self.error = error
        self.asked: list[int] = []

    def fetch(self, base: Sequence[Offering]) -> ProviderPrices:
        self.asked.append(len(base))
        if self.error is not None:
            raise self.error
        return ProviderPrices(self.cloud, "fixed quotes", self.quotes)


def versions(objects: S3ObjectStore) -> list[str]:
    return sorted({k.split("/")[1] for k in objects.list_keys("catalog/") if k.endswith("/manifest.json")})


def test_a_refresh_writes_a_version_with_its_sources_and_time_then_moves_latest(stack: Settings):
    objects = S3ObjectStore(stack)
    azure = Quoting("azure", PriceQuote("eastus", None, "Standard_D2s_v5", 0.09, 0.011))
    report = refresh_catalog(objects, [azure], base=BASE)
    assert report.new_version and azure.asked == [2]
    latest = read_latest(objects)
    assert latest is not None and latest.version == report.version
    stored = read_version(objects, latest.version)
    assert set(stored) == {"azure"}  # only refreshed clouds: the others stay built-in
    assert {(o.region, o.price, o.spot_price) for o in stored["azure"]} == {
        ("eastus", 0.09, 0.011), ("westus2", 0.096, 0.0192)}  # fmt: skip
    manifest = read_manifest(objects, latest.version)
    assert manifest["created_at"] == report.checked_at and manifest["previous"] is None
    azure_status = manifest["clouds"]["azure"]
    assert azure_status == {
        "status": "refreshed", "source": "fixed quotes", "fetched_at": azure_status["fetched_at"],
        "quotes": 1, "repriced": 1, "unmatched": 0, "added": 0, "problems": [], "rows": 2}  # fmt: skip


def test_unchanged_prices_make_no_new_version_but_the_check_is_recorded(stack: Settings):
    objects = S3ObjectStore(stack)
    azure = Quoting("azure", PriceQuote("eastus", None, "Standard_D2s_v5", 0.09, 0.011))
    first = refresh_catalog(objects, [azure], base=BASE)
    pointer_before = objects.get_text(LATEST_KEY)
    second = refresh_catalog(objects, [azure], base=BASE)
    assert not second.new_version and second.version == first.version
    assert objects.get_text(LATEST_KEY) == pointer_before and len(versions(objects)) == 1
    assert json.loads(objects.get_text(LAST_REFRESH_KEY) or "{}")["checked_at"] == second.checked_at
    azure.quotes = (PriceQuote("eastus", None, "Standard_D2s_v5", 0.08, None),)
    third = refresh_catalog(objects, [azure], base=BASE)
    assert third.new_version and len(versions(objects)) == 2
    assert read_manifest(objects, third.version or "")["previous"] == first.version


def test_a_failing_provider_keeps_its_previous_prices_and_others_still_refresh(stack: Settings):
    objects = S3ObjectStore(stack)
    lambda_ok = Quoting("lambda", PriceQuote("us-east-1", None, "gpu_1x_a10", 0.86))
    refresh_catalog(objects, [lambda_ok, Quoting("azure", error=PriceSourceError("HTTP 503"))], base=BASE)
    first = read_latest(objects)
    assert first is not None
    assert set(read_version(objects, first.version)) == {"lambda"}  # azure never refreshed: built-in stays

    lambda_down = Quoting("lambda", error=PriceSourceError("HTTP 401: global/invalid-api-key"))
    azure_ok = Quoting("azure", PriceQuote("westus2", None, "Standard_D2s_v5", 0.07))
    report = refresh_catalog(objects, [lambda_down, azure_ok], base=BASE)
    stored = read_version(objects, report.version or "")
    assert [o.price for o in stored["lambda"]] == [0.86]  # kept from the previous version
    assert {o.region: o.price for o in stored["azure"]} == {"eastus": 0.096, "westus2": 0.07}
    status = read_manifest(objects, report.version or "")["clouds"]["lambda"]
    assert status["status"] == "failed" and "invalid-api-key" in status["error"]
    assert status["prices_from"] == first.version


def test_prices_of_rows_a_provider_did_not_quote_this_time_are_carried_forward(stack: Settings):
    objects = S3ObjectStore(stack)
    refresh_catalog(
        objects, [Quoting("azure", PriceQuote("eastus", None, "Standard_D2s_v5", 0.05))], base=BASE
    )
    report = refresh_catalog(
        objects, [Quoting("azure", PriceQuote("westus2", None, "Standard_D2s_v5", 0.06))], base=BASE
    )
    stored = read_version(objects, report.version or "")
    assert {o.region: o.price for o in stored["azure"]} == {"eastus": 0.05, "westus2": 0.06}


class Scaling:
    """Quotes every row it is asked about at `factor` times its base price, naming its accelerator."""

    def __init__(self, cloud: str, factor: float) -> None:
        self.cloud = cloud
        self.factor = factor

    def fetch(self, base: Sequence[Offering]) -> ProviderPrices:
        quotes = tuple(PriceQuote(o.region, o.zone, o.instance_type, round(o.price * self.factor, 6),
                                  gpus=(o.accelerator, o.accelerator_count)) for o in base)  # fmt: skip
        return ProviderPrices(self.cloud, "scaled", quotes)


def test_refreshing_the_whole_built_in_catalog_twice_with_the_same_prices_makes_one_version(stack: Settings):
    objects = S3ObjectStore(stack)
    fetchers = [Scaling(cloud, 0.9) for cloud in ("aws", "azure", "gcp", "lambda", "runpod")]
    first = refresh_catalog(objects, fetchers)
    second = refresh_catalog(objects, fetchers)
    assert first.new_version and not second.new_version and len(versions(objects)) == 1
    stored = read_version(objects, first.version or "")
    # GCP sells one N1 host with several GPUs: each row keeps its own price
    base = {offering_key(o): o.price for o in build_catalog(default_sources()).by_cloud("gcp")}
    assert len(base) == len(stored["gcp"])
    assert all(o.price == round(base[offering_key(o)] * 0.9, 6) for o in stored["gcp"])


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_loader_asks_latest_once_per_ttl_and_rebuilds_only_when_the_version_moves(stack: Settings):
    objects = S3ObjectStore(stack)
    clock = Clock()
    loader = StoredCatalogLoader(objects, ttl=30, clock=clock)
    built_in = loader.catalog()
    assert loader.version is None and loader.pointer_reads == 1
    assert loader.catalog() is built_in and loader.pointer_reads == 1  # within the TTL: no GET

    report = refresh_catalog(objects, [Quoting("azure", PriceQuote("eastus", None, "Standard_D2s_v5", 0.05))])
    assert loader.catalog() is built_in  # still within the TTL
    clock.now += 31
    refreshed = loader.catalog()
    assert loader.version == report.version and loader.builds == 1
    eastus = [o for o in refreshed.by_instance_type("azure", "Standard_D2s_v5") if o.region == "eastus"]
    assert [o.price for o in eastus] == [0.05]
    assert refreshed.origins["azure"].startswith("refreshed") and refreshed.origins["aws"] == "built-in"
    clock.now += 31
    assert loader.catalog() is refreshed and (loader.pointer_reads, loader.builds) == (3, 1)


def test_the_loader_keeps_its_catalog_when_latest_names_a_broken_version(stack: Settings):
    objects = S3ObjectStore(stack)
    loader = StoredCatalogLoader(objects, ttl=0)
    refresh_catalog(objects, [Quoting("azure", PriceQuote("eastus", None, "Standard_D2s_v5", 0.05))])
    good = loader.catalog()
    objects.put_text(LATEST_KEY, json.dumps({"version": "nope", "content_hash": "x", "created_at": "now"}))
    assert loader.catalog() is good


TASK = """
name: refresh-e2e
resources:
  cloud: azure
  region: eastus
  instance_type: Standard_D2s_v5
run: echo hi
"""


@pytest.fixture
def retail_api() -> Iterator[tuple[RetailPricesApi, str]]:
    api = RetailPricesApi([], page_size=1)
    with FakeServer(api) as server:
        api.base_url = server.url
        yield api, f"{server.url}/api/retail/prices"


def planned_price(settings: Settings, queues: QueueDriver) -> float:
    job_id = submit_job(wiring_for(settings), SubmitJob.from_text(owner="alice", task_text=TASK)).job_id
    answer = optimize_handler(queues.event(queues.receive("optimize")), None)
    assert answer == {"batchItemFailures": []}
    job = JobStore(settings).get(job_id)
    plan = plan_of(job) if job else None
    assert plan is not None
    return plan.tasks[0].chosen.hourly_price


def test_refresh_then_the_optimize_handlers_next_plan_uses_the_new_price(
    stack: Settings,
    queues: QueueDriver,
    retail_api: tuple[RetailPricesApi, str],
    monkeypatch: pytest.MonkeyPatch,
):
    api, url = retail_api
    monkeypatch.setenv("SKYLESS_CATALOG_TTL_SECONDS", "0")
    monkeypatch.setenv("SKYLESS_PRICE_CLOUDS", "azure,lambda")
    monkeypatch.setenv("SKYLESS_AZURE_PRICES_URL", url)
    monkeypatch.setenv("LAMBDA_API_KEY", "wrong")
    with FakeServer(InstanceTypesApi({}, "right")) as lambda_api:
        monkeypatch.setenv("SKYLESS_LAMBDA_API_URL", f"{lambda_api.url}/api/v1")
        assert planned_price(stack, queues) == 0.096  # the built-in list price

        api.items = [
            vm_item("eastus", "Standard_D2s_v5", 0.0815),
            vm_item("eastus", "Standard_D2s_v5", 0.01, spot=True),
        ]
        first = refresh_handler(
            {"source": "aws.scheduler", "detail-type": "Scheduled Event", "detail": {}}, None
        )
        assert first["new_version"] and first["clouds"]["azure"]["status"] == "refreshed"
        assert (
            first["clouds"]["lambda"]["status"] == "failed"
            and "invalid-api-key" in first["clouds"]["lambda"]["error"]
        )
        assert planned_price(stack, queues) == 0.0815

        again = refresh_handler({}, None)  # the same schedule delivered twice, or prices that did not move
        assert not again["new_version"] and again["version"] == first["version"]
        assert len(versions(S3ObjectStore(stack))) == 1

        api.items = [vm_item("eastus", "Standard_D2s_v5", 0.07)]
        moved = refresh_handler({}, None)
        assert moved["new_version"] and moved["version"] != first["version"]
        assert planned_price(stack, queues) == 0.07


def test_a_refresh_after_a_broken_version_starts_from_the_built_in_prices(stack: Settings):
    objects = S3ObjectStore(stack)
    first = refresh_catalog(
        objects, [Quoting("azure", PriceQuote("eastus", None, "Standard_D2s_v5", 0.05))], base=BASE
    )
    objects.put_text(f"catalog/{first.version}/azure.csv", "not,a,catalog\n")
    second = refresh_catalog(
        objects, [Quoting("azure", PriceQuote("westus2", None, "Standard_D2s_v5", 0.06))], base=BASE
    )
    assert second.new_version
    assert {o.region: o.price for o in read_version(objects, second.version or "")["azure"]} == {
        "eastus": 0.096, "westus2": 0.06}  # fmt: skip
