"""The failover list a job keeps spans clouds, regions and zones, in the optimizer's order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shared.catalog.model import load_default_catalog
from shared.optimizer import plan_pipeline
from shared.optimizer.plan import Candidate
from shared.optimizer.spread import DEFAULT_KEPT, spread_candidates
from shared.task.loader import load_pipeline_file


def test_the_kept_list_for_hello_spans_every_cloud_and_region_of_the_feasible_set() -> None:
    ranked = plan_pipeline(
        load_pipeline_file("examples/hello.yaml"), load_default_catalog(), max_candidates=None
    )
    every = ranked.tasks[0].candidates
    kept = spread_candidates(every)
    assert len(kept) == DEFAULT_KEPT < len(every)
    assert {c.cloud for c in kept} == {c.cloud for c in every}  # not only the cheapest cloud
    assert {(c.cloud, c.region) for c in kept} == {(c.cloud, c.region) for c in every}
    assert kept[0] == every[0]
    assert kept == sorted(kept, key=every.index)  # still cheapest first


@given(
    st.lists(
        st.tuples(st.sampled_from(["aws", "gcp", "azure"]), st.integers(0, 4), st.integers(0, 3)), max_size=80
    ),
    st.integers(1, 30),
)
def test_spread_keeps_the_best_of_each_cloud_first_and_never_more_than_the_limit(
    places: list[tuple[str, int, int]], limit: int
) -> None:
    candidates = [
        Candidate(
            cloud=cloud,
            region=f"r{region}",
            zone=f"r{region}-{zone}",
            instance_type=f"t{i}",
            accelerator=None,
            accelerator_count=0,
            vcpus=2,
            memory_gib=4,
            use_spot=False,
            hourly_price=0.01 * i,
            num_nodes=1,
            estimated_hours=1,
            estimated_cost=0.01 * i,
        )
        for i, (cloud, region, zone) in enumerate(places)
    ]
    kept = spread_candidates(candidates, limit)
    assert len(kept) == min(limit, len(candidates))
    assert kept == sorted(kept, key=candidates.index)
    clouds = list(dict.fromkeys(c.cloud for c in candidates))
    firsts = [next(c for c in candidates if c.cloud == cloud) for cloud in clouds][:limit]
    assert all(first in kept for first in firsts)
