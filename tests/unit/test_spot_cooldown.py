"""The cool-down policy (pure): how long zones and regions cool after preemptions, and what it does to
a failover list."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.optimizer.cooling import (
    FORGET_AFTER_SECONDS,
    MAX_COOLING_SECONDS,
    REGION_HALF_LIFE_SECONDS,
    ZONE_HALF_LIFE_SECONDS,
    Cooling,
    cooling_places,
    decayed_count,
    forgotten,
    order_for_cooling,
)
from shared.optimizer.plan import Candidate

NOW = 1_800_000_000.0
ZONE_A = "gcp/us-central1/us-central1-a"
ZONE_B = "gcp/us-central1/us-central1-b"


def candidate(zone: str, *, spot: bool = True, price: float = 0.1) -> Candidate:
    cloud, region, name = zone.split("/")
    return Candidate(
        cloud=cloud, region=region, zone=name, instance_type="n2-standard-2", accelerator=None,
        accelerator_count=0, vcpus=2, memory_gib=8, use_spot=spot, hourly_price=price, num_nodes=1,
        estimated_hours=1, estimated_cost=price,
    )  # fmt: skip


def by_place(cooling: list[Cooling]) -> dict[str, Cooling]:
    return {c.place: c for c in cooling}


def test_one_preemption_cools_its_zone_for_one_half_life_and_not_its_region() -> None:
    cooling = by_place(cooling_places({ZONE_A: [NOW]}, NOW))
    assert set(cooling) == {ZONE_A}
    assert cooling[ZONE_A].until == pytest.approx(NOW + ZONE_HALF_LIFE_SECONDS)
    assert cooling_places({ZONE_A: [NOW]}, NOW + ZONE_HALF_LIFE_SECONDS + 1) == []


def test_the_cooling_period_grows_with_the_preemptions_and_decays_without_new_ones() -> None:
    one = by_place(cooling_places({ZONE_A: [NOW]}, NOW))[ZONE_A].until
    four = by_place(cooling_places({ZONE_A: [NOW] * 4}, NOW))[ZONE_A].until
    assert four == pytest.approx(NOW + 3 * ZONE_HALF_LIFE_SECONDS)  # log2(2 * 4) half-lives
    later = by_place(cooling_places({ZONE_A: [NOW] * 4}, NOW + 600))[ZONE_A].until
    assert one < four and later == pytest.approx(four)  # read later, the same end: nothing new happened


def test_a_storm_of_three_preemptions_within_minutes_cools_the_whole_region() -> None:
    storm = {ZONE_A: [NOW - 240, NOW], ZONE_B: [NOW - 120]}
    cooling = by_place(cooling_places(storm, NOW))
    assert cooling["gcp/us-central1"].scope == "region"
    assert cooling["gcp/us-central1"].preemptions == 3
    spread_out = {
        ZONE_A: [NOW - 3 * REGION_HALF_LIFE_SECONDS, NOW],
        ZONE_B: [NOW - 2 * REGION_HALF_LIFE_SECONDS],
    }
    assert "gcp/us-central1" not in by_place(cooling_places(spread_out, NOW))


def test_no_cooling_lasts_past_the_cap_and_old_preemptions_are_forgotten() -> None:
    storm = {ZONE_A: [NOW] * 10_000}
    assert all(c.until <= NOW + MAX_COOLING_SECONDS for c in cooling_places(storm, NOW))
    assert forgotten([NOW - FORGET_AFTER_SECONDS - 1, NOW], NOW) == [NOW - FORGET_AFTER_SECONDS - 1]
    assert cooling_places({ZONE_A: [NOW - FORGET_AFTER_SECONDS - 1] * 50}, NOW) == []


def test_spot_candidates_in_a_cooling_zone_go_last_and_on_demand_ones_stay() -> None:
    cheap_a, cheap_b = candidate(ZONE_A, price=0.05), candidate(ZONE_B, price=0.06)
    on_demand_a = candidate(ZONE_A, spot=False, price=0.2)
    cooling = cooling_places({ZONE_A: [NOW]}, NOW)
    ordered, notes = order_for_cooling([cheap_a, cheap_b, on_demand_a], cooling)
    # the recovery chain: another zone's spot, then on-demand, and the cooling zone's spot only last
    assert ordered == [cheap_b, on_demand_a, cheap_a]
    assert len(notes) == 1 and ZONE_A in notes[0] and "tried last" in notes[0]


def test_a_cooling_place_is_still_planned_when_nothing_else_is_left() -> None:
    only = [candidate(ZONE_A)]
    ordered, notes = order_for_cooling(only, cooling_places({ZONE_A: [NOW]}, NOW))
    assert ordered == only and "no other place" in notes[0]


@given(
    st.lists(st.floats(min_value=0, max_value=20_000), max_size=30), st.floats(min_value=0, max_value=20_000)
)
def test_the_decayed_count_never_exceeds_the_number_of_preemptions(ages: list[float], later: float) -> None:
    times = [NOW - a for a in ages]
    count = decayed_count(times, NOW, ZONE_HALF_LIFE_SECONDS)
    assert 0 <= count <= len(times)
    assert decayed_count(times, NOW + later, ZONE_HALF_LIFE_SECONDS) <= count + 1e-9


@given(st.lists(st.sampled_from([ZONE_A, ZONE_B, "aws/us-east-1/us-east-1a"]), max_size=12), st.booleans())
def test_ordering_for_cooling_is_a_permutation_that_only_moves_spot_candidates(
    zones: list[str], spot: bool
) -> None:
    candidates = [candidate(z, spot=spot or i % 2 == 0, price=0.01 * i) for i, z in enumerate(zones)]
    ordered, _ = order_for_cooling(candidates, cooling_places({ZONE_A: [NOW]}, NOW))
    assert sorted(ordered, key=candidates.index) == candidates
    assert [c for c in ordered if not c.use_spot] == [c for c in candidates if not c.use_spot]
