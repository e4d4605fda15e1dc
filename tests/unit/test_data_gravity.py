"""Data gravity in the optimizer: a task reading a bucket pays the egress of reading it from each place it
could run (by cloud, and by region when the bucket's region is known), stays beside its data unless the
saving beats the transfer, and the plan says which and why."""

from __future__ import annotations

import pytest

from shared.catalog import load_default_catalog
from shared.optimizer import plan_pipeline
from shared.optimizer.egress_prices import EGRESS_PER_GB, continent_of, transfer_per_gb
from shared.optimizer.placement import Source
from shared.task import load_pipeline

CATALOG = load_default_catalog()
A100 = load_pipeline("resources:\n  accelerators: A100:8\nrun: train\n")
T4 = load_pipeline("resources:\n  accelerators: T4:1\nrun: train\n")


def _data(
    gigabytes: float, cloud: str = "aws", region: str | None = "us-east-1", **more: float
) -> list[Source]:
    where = f"{cloud} {region}" if region else cloud
    return [Source(0, cloud, gigabytes, region, more.get("write", 0.0), f"s3://data ({where})")]


def _cheapest_alone(pipeline):  # type: ignore[no-untyped-def]
    return plan_pipeline(pipeline, CATALOG).tasks[0].chosen


def test_transfer_prices_by_cloud_region_and_continent():
    assert transfer_per_gb("aws", "us-east-1", "aws", "us-east-1") == 0.0
    assert transfer_per_gb("aws", "us-east-1", "aws", "us-west-2") == 0.02
    assert transfer_per_gb("gcp", "us-central1", "gcp", "us-east4") == 0.02
    assert transfer_per_gb("gcp", "us-central1", "gcp", "europe-west4") == 0.05
    assert transfer_per_gb("azure", "eastus2", "azure", "westeurope") == 0.05
    assert transfer_per_gb("aws", "us-east-1", "gcp", "us-central1") == EGRESS_PER_GB["aws"] == 0.09
    assert transfer_per_gb("gcp", None, "aws", None) == 0.12
    assert transfer_per_gb("cloudflare", None, "gcp", "us-central1") == 0.0  # R2: no egress fee
    assert transfer_per_gb("aws", None, "aws", "eu-west-1") == 0.0  # region unknown: only leaving the cloud
    assert transfer_per_gb("gcp", "us", "gcp", "us-east4") == 0.0  # a multi-region read from inside it
    assert transfer_per_gb("gcp", "us", "gcp", "europe-west4") == 0.05
    assert [continent_of(r) for r in ("us-east-1", "northamerica-northeast1", "eastus2", "eu-west-1",
                                      "westeurope", "asia-east1", "ap-south-1")] == [
        "na", "na", "na", "eu", "eu", "asia", "asia"]  # fmt: skip


def test_a_job_reading_two_tb_in_aws_stays_beside_it_and_the_plan_says_why():
    alone = _cheapest_alone(A100)
    assert (alone.cloud, alone.region) != ("aws", "us-east-1")  # without the data it would run elsewhere

    plan = plan_pipeline(A100, CATALOG, data=_data(2000))

    chosen = plan.tasks[0].chosen
    assert (chosen.cloud, chosen.region) == ("aws", "us-east-1") and plan.egress_cost == 0.0
    egress_there = 2000 * EGRESS_PER_GB["aws"]
    saving = chosen.estimated_cost - alone.estimated_cost
    assert saving < egress_there
    assert plan.notes == [
        "no egress: 2 TB from s3://data (aws us-east-1) read in place (aws us-east-1)",
        f"stays in aws us-east-1 near its data: {alone.cloud} {alone.region} runs it ${saving:,.2f} cheaper "
        f"but would pay ${egress_there:,.2f} egress ($0.00 here)",
    ]
    assert plan.total_cost == pytest.approx(chosen.estimated_cost)


def test_it_moves_when_the_saving_beats_the_transfer_and_says_what_the_egress_costs():
    alone = _cheapest_alone(A100)
    plan = plan_pipeline(A100, CATALOG, data=_data(100))

    chosen = plan.tasks[0].chosen
    assert (chosen.cloud, chosen.region) == (alone.cloud, alone.region)
    assert plan.egress_cost == pytest.approx(9.0)
    assert plan.total_cost == pytest.approx(chosen.estimated_cost + 9.0)
    beside = next(c for c in plan.tasks[0].candidates if (c.cloud, c.region) == ("aws", "us-east-1"))
    assert plan.notes == [
        f"+$9.00 egress: 100 GB from s3://data (aws us-east-1) to {alone.cloud} {alone.region}",
        f"moves to {alone.cloud} {alone.region}, away from its data: it saves "
        f"${beside.estimated_cost - chosen.estimated_cost:,.2f} on compute against aws us-east-1, "
        "more than the $9.00 egress",
    ]


def test_the_break_even_is_exactly_where_the_saving_equals_the_egress():
    alone = _cheapest_alone(A100)
    beside = plan_pipeline(A100, CATALOG, data=_data(1e6)).tasks[0].chosen
    break_even = (beside.estimated_cost - alone.estimated_cost) / EGRESS_PER_GB["aws"]

    below = plan_pipeline(A100, CATALOG, data=_data(break_even * 0.99)).tasks[0].chosen
    above = plan_pipeline(A100, CATALOG, data=_data(break_even * 1.01)).tasks[0].chosen

    assert (below.cloud, below.region) == (alone.cloud, alone.region)
    assert (above.cloud, above.region) == ("aws", "us-east-1")


def test_the_region_of_the_bucket_counts_within_one_cloud():
    assert _cheapest_alone(T4).region == "us-east-1"
    plan = plan_pipeline(T4, CATALOG, data=_data(500, region="eu-west-1"))
    chosen = plan.tasks[0].chosen
    assert (chosen.cloud, chosen.region) == ("aws", "eu-west-1")  # $0.06/h dearer, $10 of egress saved
    # the failover list is re-ranked with the data too: the same region first
    assert [c.region for c in plan.tasks[0].candidates[:3]] == ["eu-west-1"] * 3


def test_zero_egress_stores_and_write_back_are_priced_as_such():
    alone = _cheapest_alone(A100)
    free = plan_pipeline(A100, CATALOG, data=_data(50_000, cloud="cloudflare", region=None))
    assert (free.tasks[0].chosen.cloud, free.egress_cost) == (alone.cloud, 0.0)  # R2: read from anywhere

    written = plan_pipeline(A100, CATALOG, data=_data(0, write=1000))  # checkpoints written back to S3
    chosen = written.tasks[0].chosen
    rate = transfer_per_gb(chosen.cloud, chosen.region, "aws", "us-east-1")
    assert written.egress_cost == pytest.approx(1000 * rate)
    assert "1 TB written back" in written.notes[0]
