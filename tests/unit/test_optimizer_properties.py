"""plan_task against a brute-force scan of the whole catalog: same feasible set, same order.

The reference below reads every offering and applies the documented rules directly (no index, no
early stop), then sorts by the documented keys. Requests are drawn around real catalog rows so
that most of them are feasible, with pins, spot, price caps, enabled clouds and blocklists mixed in.
Run here on the built-in catalog; tests/integration/test_optimizer_real_catalog.py runs it on the real
SkyPilot catalog in ../shared/catalog (90k rows: a minute of brute force, too slow for this tier).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.catalog.model import Catalog, load_default_catalog
from shared.catalog.offering import Offering
from shared.errors import NoOfferingError
from shared.optimizer import plan_task
from shared.optimizer.host_defaults import in_families, sized_for
from shared.optimizer.plan import Block, instance_family_of
from shared.optimizer.single_task import hardware_speed
from shared.task.requests import ResourceChoice, ResourceRequest

SHARED_CATALOG = Path(__file__).resolve().parents[3] / "shared" / "catalog" / "skypilot" / "v8"


def _fits(value: float, wanted: float | None, at_least: bool) -> bool:
    if wanted is None:
        return True
    return value >= wanted - 1e-9 if at_least else abs(value - wanted) < 1e-9


def _feasible(
    o: Offering, r: ResourceRequest, enabled: set[str] | None, blocks: list[Block], nodes: int
) -> bool:
    """The documented rules, applied to one offering: the request is first sized for the offering's
    cloud (shared.optimizer.host_defaults, SkyPilot's per-cloud defaults), then every condition is checked."""
    sized = sized_for(r, o.cloud, nodes)
    if sized is None:
        return False
    if sized.instance_type is not None and o.instance_type != sized.instance_type:
        return False
    if sized.accelerator is not None:
        if o.accelerator != sized.accelerator or o.accelerator_count != (sized.accelerator_count or 1):
            return False
    elif sized.instance_type is None and o.accelerator is not None and not sized.any_host:
        return False
    if not _fits(o.vcpus, sized.cpus, sized.cpus_at_least):
        return False
    if not _fits(o.memory_gib, sized.memory_gib, sized.memory_at_least):
        return False
    if sized.memory_per_vcpu is not None and o.memory_gib < o.vcpus * sized.memory_per_vcpu - 1e-9:
        return False
    if not in_families(o.cloud, o.instance_type, sized.host_families):
        return False
    if sized.region and o.region != sized.region:
        return False
    if sized.zone and o.zone != sized.zone:
        return False
    if enabled is not None and o.cloud not in enabled:
        return False
    price = o.spot_price if r.use_spot else o.price
    if price is None or (r.max_hourly_cost is not None and price > r.max_hourly_cost):
        return False
    return not any(b.covers(o.cloud, o.region, o.zone, o.instance_type) for b in blocks)


def _speed(r: ResourceRequest, offerings: tuple[Offering, ...]) -> float:
    if r.accelerator is not None:
        return hardware_speed(r.accelerator, float(r.accelerator_count or 1), 0.0)
    if r.instance_type is not None:
        first = next((o for o in offerings if o.instance_type == r.instance_type), None)
        if first is not None:
            return hardware_speed(first.accelerator, first.accelerator_count, first.vcpus)
    return hardware_speed(None, 0.0, r.cpus or 8.0)


def brute_force(
    choice: ResourceChoice,
    offerings: tuple[Offering, ...],
    enabled: set[str] | None,
    blocks: list[Block],
    minimize: str,
    nodes: int = 1,
) -> list[tuple]:
    requests = list(choice.requests) or [ResourceRequest()]
    reference = _speed(requests[0], offerings)
    per_request = []
    for r in requests:
        keyed = []
        for seq, o in enumerate(offerings):
            if _feasible(o, r, enabled, blocks, nodes):
                price = o.spot_price if r.use_spot else o.price
                sized = sized_for(r, o.cloud, nodes)
                # a CPU-only task on a cloud whose machines are "any" machine is not sped up by GPUs
                any_host = sized is not None and sized.any_host
                hours = (
                    1.0
                    if any_host
                    else reference / hardware_speed(o.accelerator, o.accelerator_count, o.vcpus)
                )
                key = (price, o.cloud, o.region, o.zone or "", o.instance_type, seq, r.use_spot)
                keyed.append(((hours, *key) if minimize == "time" else key, o, r.use_spot, price, hours))
        per_request.append(sorted(keyed, key=lambda k: k[0]))
    ranked = [k for keys in per_request for k in keys]
    if not choice.ordered:
        ranked.sort(key=lambda k: k[0])
    seen: set[tuple[int, bool]] = set()
    result = []
    for key, o, spot, price, hours in ranked:
        seq = key[-2]
        if (seq, spot) in seen:
            continue
        seen.add((seq, spot))
        hours = hours if minimize == "time" else 1.0
        result.append((o.cloud, o.region, o.zone, o.instance_type, spot, price, hours))
    return result


@st.composite
def requests_near(draw: st.DrawFn, offerings: tuple[Offering, ...]) -> ResourceRequest:
    anchor = draw(st.sampled_from(offerings))
    kind = draw(st.sampled_from(["gpu", "gpu", "cpu", "type", "nothing"]))
    fields: dict[str, object] = {}
    if kind == "gpu":
        fields["accelerator"] = anchor.accelerator or draw(st.sampled_from(["A100", "H100", "L4", "T4"]))
        fields["accelerator_count"] = draw(st.sampled_from([anchor.accelerator_count or 1, 1, 2, 3, 8]))
    elif kind == "cpu":
        fields["cpus"] = draw(st.sampled_from([anchor.vcpus, 2, 4, 8, 16, 48, 96]))
        fields["cpus_at_least"] = draw(st.booleans())
    elif kind == "type":
        fields["instance_type"] = anchor.instance_type
    memory = draw(st.integers(0, 5))
    if memory == 0:
        fields["memory_gib"] = draw(st.sampled_from([anchor.memory_gib, 16.0, 64.0, 256.0]))
        fields["memory_at_least"] = draw(st.booleans())
    elif memory == 1:
        fields["memory_per_vcpu"] = draw(st.sampled_from([1.0, 2.0, 4.0, 8.0]))
    pin = draw(st.sampled_from(["none", "none", "cloud", "region", "zone"]))
    if pin != "none":
        fields["cloud"] = anchor.cloud
    if pin in ("region", "zone"):
        fields["region"] = anchor.region
    if pin == "zone" and anchor.zone:
        fields["zone"] = anchor.zone
    fields["use_spot"] = draw(st.booleans())
    if draw(st.integers(0, 3)) == 0:
        fields["max_hourly_cost"] = draw(st.sampled_from([anchor.price, anchor.spot_price or 1.0, 0.5, 5.0]))
    return ResourceRequest(**fields)  # type: ignore[arg-type]


@st.composite
def scenarios(draw: st.DrawFn, offerings: tuple[Offering, ...]) -> tuple:
    requests = tuple(draw(st.lists(requests_near(offerings), min_size=1, max_size=3)))
    choice = ResourceChoice(requests, ordered=draw(st.booleans()))
    clouds = sorted({o.cloud for o in offerings})
    enabled = draw(st.none() | st.sets(st.sampled_from(clouds), min_size=1).map(set))
    blocks = []
    for o in draw(st.lists(st.sampled_from(offerings), max_size=3)):
        width = draw(st.sampled_from(["zone", "region", "cloud", "family"]))
        blocks.append(
            Block(
                cloud=o.cloud,
                region=o.region if width in ("zone", "region") else None,
                zone=o.zone if width == "zone" else None,
                instance_family=instance_family_of(o.instance_type) if width == "family" else None,
            )
        )
    return choice, enabled, blocks, draw(st.sampled_from(["cost", "time"])), draw(st.integers(1, 4))


def check_against_brute_force(catalog: Catalog, scenario: tuple) -> None:
    choice, enabled, blocks, minimize, nodes = scenario
    expected = brute_force(choice, catalog.offerings, enabled, blocks, minimize, nodes)
    if not expected:
        with pytest.raises(NoOfferingError):
            plan_task(choice, nodes, catalog, enabled_clouds=enabled, blocklist=blocks, minimize=minimize)
        return
    plan = plan_task(
        choice,
        nodes,
        catalog,
        enabled_clouds=enabled,
        blocklist=blocks,
        minimize=minimize,
        max_candidates=None,
    )
    got = [(c.cloud, c.region, c.zone, c.instance_type, c.use_spot, c.hourly_price) for c in plan]
    assert got == [e[:6] for e in expected]
    assert [c.estimated_hours for c in plan] == pytest.approx([e[6] for e in expected])
    assert [c.estimated_cost for c in plan] == pytest.approx([nodes * e[5] * e[6] for e in expected])
    capped = plan_task(choice, nodes, catalog, enabled_clouds=enabled, blocklist=blocks, minimize=minimize)
    assert capped == plan[: len(capped)]


BUILTIN = load_default_catalog()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(BUILTIN.offerings))
def test_plan_task_matches_brute_force_on_the_builtin_catalog(scenario: tuple) -> None:
    check_against_brute_force(BUILTIN, scenario)
