"""plan_task on a small hand-written catalog: feasibility, order, objectives and the errors it raises."""

from __future__ import annotations

import pytest

from shared.catalog.model import Catalog
from shared.catalog.offering import Offering
from shared.errors import NoOfferingError, UserError
from shared.optimizer import plan_task
from shared.optimizer.index import index_for
from shared.optimizer.plan import Block
from shared.task.requests import ResourceChoice, ResourceRequest


def row(
    cloud: str,
    region: str,
    zone: str | None,
    itype: str,
    acc: str | None,
    count: float,
    vcpus: float,
    mem: float,
    price: float,
    spot: float | None = None,
) -> Offering:
    return Offering(cloud, region, zone, itype, acc, count, None, vcpus, mem, price, spot)


CATALOG = Catalog(
    [
        row("aws", "us-east-1", "us-east-1a", "p4d.24xlarge", "A100", 8, 96, 1152, 32.77, 12.0),
        row("aws", "us-east-1", "us-east-1b", "p4d.24xlarge", "A100", 8, 96, 1152, 32.77, 13.5),
        row("aws", "us-west-2", "us-west-2a", "p4d.24xlarge", "A100", 8, 96, 1152, 32.77, None),
        row("gcp", "us-central1", "us-central1-a", "a2-highgpu-8g", "A100", 8, 96, 680, 29.39, 8.8),
        row("gcp", "us-central1", "us-central1-a", "a2-highgpu-1g", "A100", 1, 12, 85, 3.67, 1.1),
        row("gcp", "us-central1", "us-central1-a", "a2-highgpu-2g", "A100", 2, 24, 170, 7.35, 2.2),
        row("azure", "eastus", None, "Standard_ND96asr_v4", "A100", 8, 96, 900, 27.20, 20.0),
        row("lambda", "us-east-1", None, "gpu_8x_h100_sxm5", "H100", 8, 208, 1800, 23.92),
        row("runpod", "CA-MTL-1", None, "8x_H100", "H100", 8, 128, 1504, 23.92),
        row("aws", "us-east-1", "us-east-1a", "m6i.2xlarge", None, 0, 8, 32, 0.384, 0.15),
        row("aws", "us-east-1", "us-east-1a", "m6i.4xlarge", None, 0, 16, 64, 0.768, 0.30),
        row("gcp", "us-central1", "us-central1-a", "e2-standard-8", None, 0, 8, 32, 0.268),
        row("gcp", "us-central1", "us-central1-a", "e2-standard-2", None, 0, 2, 8, 0.067),
        row("azure", "eastus", None, "Standard_D4s_v5", None, 0, 4, 16, 0.192, 0.04),
    ]
)


def choice(*requests: ResourceRequest, ordered: bool = False) -> ResourceChoice:
    return ResourceChoice(tuple(requests), ordered=ordered)


def a100(count: float = 8, **fields: object) -> ResourceRequest:
    return ResourceRequest(accelerator="A100", accelerator_count=count, **fields)  # type: ignore[arg-type]


def places(candidates: list) -> list[str]:
    return [f"{c.place}:{c.instance_type}{':spot' if c.use_spot else ''}" for c in candidates]


def test_cheapest_offering_comes_first_and_cost_counts_nodes_and_hours() -> None:
    plan = plan_task(choice(a100()), 2, CATALOG, hours=3.0)
    assert plan[0].cloud == "azure"
    assert plan[0].estimated_cost == pytest.approx(2 * 27.20 * 3.0)
    assert [c.hourly_price for c in plan] == sorted(c.hourly_price for c in plan)


def test_equal_prices_are_ordered_by_cloud_region_zone_then_instance_type() -> None:
    plan = plan_task(choice(a100()), 1, CATALOG)
    same_price = [c.place for c in plan if c.hourly_price == 32.77]
    assert same_price == ["aws/us-east-1/us-east-1a", "aws/us-east-1/us-east-1b", "aws/us-west-2/us-west-2a"]


def test_zoned_clouds_get_one_candidate_per_zone() -> None:
    plan = plan_task(choice(a100(cloud="aws", region="us-east-1")), 1, CATALOG)
    assert [c.zone for c in plan] == ["us-east-1a", "us-east-1b"]


def test_accelerator_count_must_match_exactly_and_the_error_lists_what_is_sold() -> None:
    with pytest.raises(NoOfferingError) as raised:
        plan_task(choice(a100(3)), 1, CATALOG)
    assert "A100:3 exists only as A100:1, 2, 8" in raised.value.message
    assert raised.value.field == "resources.accelerators"


def test_misspelled_accelerator_gets_a_did_you_mean_hint() -> None:
    with pytest.raises(NoOfferingError) as raised:
        plan_task(choice(ResourceRequest(accelerator="H10O", accelerator_count=8)), 1, CATALOG)
    assert "no accelerator H10O" in raised.value.message
    assert raised.value.hint == "did you mean H100?"


def test_cpu_request_gets_skypilots_default_families_and_gpu_hosts_only_where_a_cloud_has_no_others() -> None:
    plan = plan_task(choice(ResourceRequest(cpus=8)), 1, CATALOG)
    assert all(c.vcpus >= 8 for c in plan)
    assert places(plan)[0] == "aws/us-east-1/us-east-1a:m6i.2xlarge"
    # gcp's e2 is not a family SkyPilot gives a CPU task; Lambda and RunPod sell only GPU machines
    assert {c.instance_type for c in plan} == {"m6i.2xlarge", "m6i.4xlarge", "gpu_8x_h100_sxm5", "8x_H100"}
    assert {c.cloud for c in plan if c.accelerator} == {"lambda", "runpod"}


def test_exact_cpus_and_memory_are_exact() -> None:
    exact = plan_task(choice(ResourceRequest(cpus=16, cpus_at_least=False)), 1, CATALOG)
    assert [c.instance_type for c in exact] == ["m6i.4xlarge"]
    memory = plan_task(choice(ResourceRequest(cpus=2, memory_gib=16, memory_at_least=False)), 1, CATALOG)
    assert [c.instance_type for c in memory] == ["Standard_D4s_v5"]


def test_no_resources_at_all_means_skypilots_default_of_8_plus_cpus_and_4_gib_per_vcpu() -> None:
    plan = plan_task(choice(), 1, CATALOG)
    assert plan[0].instance_type == "m6i.2xlarge"
    assert min(c.vcpus for c in plan) == 8 and all(c.memory_gib >= 4 * c.vcpus for c in plan)


def test_cloud_region_and_zone_pins_are_respected() -> None:
    assert {c.cloud for c in plan_task(choice(a100(cloud="gcp")), 1, CATALOG)} == {"gcp"}
    pinned = plan_task(choice(a100(cloud="aws", region="us-east-1", zone="us-east-1b")), 1, CATALOG)
    assert places(pinned) == ["aws/us-east-1/us-east-1b:p4d.24xlarge"]


def test_region_pin_error_lists_the_regions_that_have_it() -> None:
    with pytest.raises(NoOfferingError) as raised:
        plan_task(choice(a100(cloud="aws", region="eu-west-1")), 1, CATALOG)
    assert "not offered in eu-west-1; regions that have it: us-east-1, us-west-2" in raised.value.message


def test_a_misspelled_region_gets_a_did_you_mean_hint() -> None:
    with pytest.raises(NoOfferingError) as raised:
        plan_task(choice(a100(cloud="aws", region="us-east1")), 1, CATALOG)
    assert raised.value.hint == "did you mean us-east-1?"


def test_spot_needs_a_spot_market_and_is_priced_at_the_spot_price() -> None:
    plan = plan_task(choice(a100(use_spot=True)), 1, CATALOG)
    assert all(c.use_spot for c in plan)
    assert places(plan)[0] == "gcp/us-central1/us-central1-a:a2-highgpu-8g:spot"
    assert plan[0].hourly_price == 8.8
    assert "aws/us-west-2/us-west-2a" not in [c.place for c in plan]


def test_max_hourly_cost_is_checked_against_the_spot_price_when_spot() -> None:
    spot = plan_task(choice(a100(use_spot=True, max_hourly_cost=12.0)), 1, CATALOG)
    assert [c.hourly_price for c in spot] == [8.8, 12.0]
    with pytest.raises(NoOfferingError) as raised:
        plan_task(choice(a100(max_hourly_cost=12.0)), 1, CATALOG)
    assert "the cheapest is $27.2/h, above max_hourly_cost $12/h" in raised.value.message


def test_instance_type_pin_selects_that_type_only() -> None:
    plan = plan_task(choice(ResourceRequest(instance_type="p4d.24xlarge")), 1, CATALOG)
    assert {c.instance_type for c in plan} == {"p4d.24xlarge"} and len(plan) == 3
    with pytest.raises(NoOfferingError) as raised:
        plan_task(choice(ResourceRequest(instance_type="p4d.24xlarg")), 1, CATALOG)
    assert (raised.value.hint or "").startswith("did you mean p4d.24xlarge")


def test_enabled_clouds_limit_the_search_and_the_error_says_so() -> None:
    plan = plan_task(choice(a100()), 1, CATALOG, enabled_clouds={"aws", "lambda"})
    assert {c.cloud for c in plan} == {"aws"}
    with pytest.raises(NoOfferingError) as raised:
        plan_task(choice(a100()), 1, CATALOG, enabled_clouds={"lambda"})
    assert "not enabled (enabled: lambda)" in raised.value.message


def test_blocklist_removes_zones_regions_clouds_and_families() -> None:
    plan = plan_task(
        choice(a100()),
        1,
        CATALOG,
        blocklist=[
            Block(cloud="azure"),
            Block(cloud="aws", region="us-east-1", zone="us-east-1a"),
            Block(cloud="gcp", instance_family="a2"),
        ],
    )
    assert [c.place for c in plan] == ["aws/us-east-1/us-east-1b", "aws/us-west-2/us-west-2a"]


def test_everything_blocked_names_the_blocks() -> None:
    blocks = [Block(cloud=c, reason="no capacity") for c in ("aws", "gcp", "azure")]
    with pytest.raises(NoOfferingError) as raised:
        plan_task(choice(a100()), 1, CATALOG, blocklist=blocks)
    assert "blocked by" in raised.value.message and "aws: no capacity" in raised.value.message


def test_any_of_merges_alternatives_by_price() -> None:
    plan = plan_task(choice(ResourceRequest(accelerator="H100", accelerator_count=8), a100()), 1, CATALOG)
    assert [c.hourly_price for c in plan][:3] == [23.92, 23.92, 27.20]
    assert plan[0].accelerator == "H100"


def test_ordered_keeps_the_users_order_then_price_within_each() -> None:
    plan = plan_task(
        choice(a100(cloud="aws"), ResourceRequest(accelerator="H100", accelerator_count=8), ordered=True),
        1,
        CATALOG,
    )
    assert [c.cloud for c in plan] == ["aws", "aws", "aws", "lambda", "runpod"]


def test_an_offering_reachable_twice_is_listed_once_at_its_first_place() -> None:
    plan = plan_task(choice(a100(cloud="gcp"), a100(), ordered=True), 1, CATALOG)
    keys = [(c.place, c.instance_type, c.use_spot) for c in plan]
    assert len(keys) == len(set(keys)) == 5
    assert plan[0].cloud == "gcp"


def test_time_objective_prefers_faster_accelerators_and_breaks_ties_by_cost() -> None:
    h100 = ResourceRequest(accelerator="H100", accelerator_count=8)
    plan = plan_task(choice(a100(), h100), 1, CATALOG, minimize="time")
    assert [c.accelerator for c in plan[:2]] == ["H100", "H100"]
    assert plan[0].estimated_hours < 1.0 == plan[2].estimated_hours
    assert [c.cloud for c in plan[:2]] == ["lambda", "runpod"]  # same price: cloud order
    assert plan[2].cloud == "azure"  # then the A100s, cheapest first


def test_time_objective_counts_accelerators_per_vm() -> None:
    plan = plan_task(choice(a100(1), a100(2)), 1, CATALOG, minimize="time")
    assert [c.accelerator_count for c in plan] == [2, 1]
    assert plan[0].estimated_hours == pytest.approx(0.5)


def test_max_candidates_caps_the_list_to_its_head() -> None:
    everything = plan_task(choice(a100()), 1, CATALOG, max_candidates=None)
    assert plan_task(choice(a100()), 1, CATALOG, max_candidates=2) == everything[:2]


def test_index_is_built_once_per_catalog() -> None:
    assert index_for(CATALOG) is index_for(CATALOG)


def test_unknown_objective_is_a_user_error() -> None:
    with pytest.raises(UserError) as raised:
        plan_task(choice(a100()), 1, CATALOG, minimize="speed")
    assert raised.value.field == "minimize"
