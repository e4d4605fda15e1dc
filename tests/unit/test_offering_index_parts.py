"""The optimizer's index is built once per cloud of a catalog, the first time a plan needs that cloud, and
every later plan of the process shares it: a pinned plan, an unpinned one, `--clouds`, the best-per-cloud
lines, why a cloud has nothing, the reasons and the failover spread build nothing again; and a CPU-only
task's machine families are judged per instance type, not per catalog row (issue 24)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from shared.catalog.model import Catalog
from shared.catalog.offering import Offering
from shared.optimizer import host_defaults, index, misses, missing_clouds, plan_task
from shared.optimizer.index import index_builds, index_for
from shared.optimizer.spread import spread_candidates
from shared.task.requests import ResourceChoice, ResourceRequest

REGIONS = [f"region-{i}" for i in range(60)]


def rows_of(cloud: str) -> list[Offering]:
    """Many regions of a few machines: the shape of a real catalog (rows far outnumber instance types)."""
    machines = {
        "aws": [("m6i.large", 2), ("m6i.2xlarge", 8), ("t3.large", 2), ("c6i.4xlarge", 16)],
        "gcp": [("n2-standard-8", 8), ("e2-standard-8", 8), ("n4-standard-2", 2)],
        "azure": [("Standard_D8s_v5", 8), ("Standard_B2s", 2)],
        "runpod": [("1x_A100", 8)],
    }[cloud]
    rows = []
    for region in REGIONS:
        for zone in ("a", "b", "c"):
            for itype, vcpus in machines:
                acc = ("A100", 1) if cloud == "runpod" else (None, 0)
                rows.append(
                    Offering(
                        cloud,
                        region,
                        f"{region}{zone}",
                        itype,
                        acc[0],
                        acc[1],
                        None,
                        vcpus,
                        4 * vcpus,
                        0.05 * vcpus + REGIONS.index(region) / 1000,
                        0.02 * vcpus,
                    )
                )
    return rows


@pytest.fixture
def loads() -> Counter[str]:
    return Counter()


@pytest.fixture
def catalog(loads: Counter[str]) -> Catalog:
    def loader(cloud: str) -> Any:
        def load() -> list[Offering]:
            loads[cloud] += 1
            return rows_of(cloud)

        return load

    return Catalog(per_cloud={cloud: loader(cloud) for cloud in ("aws", "azure", "gcp", "runpod")})


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Each cloud's index part, counted as it is built."""
    counts: Counter[str] = Counter()
    original = index.CloudIndex.__init__

    def counting(self: index.CloudIndex, cloud: str, *args: Any) -> None:
        counts[cloud] += 1
        original(self, cloud, *args)

    monkeypatch.setattr(index.CloudIndex, "__init__", counting)
    return counts


def cpu(**fields: Any) -> ResourceChoice:
    return ResourceChoice((ResourceRequest(cpus=2, cpus_at_least=True, **fields),))


def test_a_pinned_plan_reads_and_indexes_its_cloud_alone(catalog: Catalog, loads: Counter[str]) -> None:
    plan_task(cpu(cloud="gcp"), 1, catalog)
    assert dict(loads) == {"gcp": 1}
    assert set(index_builds(catalog)) == {"gcp"}


def test_every_later_plan_shares_the_parts_built_so_far(
    catalog: Catalog, loads: Counter[str], built: Counter[str]
) -> None:
    plan_task(cpu(cloud="gcp"), 1, catalog)
    plan_task(cpu(), 1, catalog, enabled_clouds={"aws", "gcp"})  # builds aws only
    assert dict(built) == {"gcp": 1, "aws": 1}
    candidates = plan_task(cpu(), 2, catalog, max_candidates=None)  # every cloud: azure, runpod are new
    assert dict(built) == {"gcp": 1, "aws": 1, "azure": 1, "runpod": 1}

    # What `skyless plan` adds beside the plan: the best of each cloud, why the others have none, the
    # failover spread a job keeps. None of it builds anything.
    task = type("Task", (), {"resource_choice": lambda self: cpu(), "num_nodes": 2})()
    for cloud in catalog.clouds():
        try:
            plan_task(cpu(), 2, catalog, enabled_clouds={cloud}, max_candidates=1)
        except Exception as error:
            assert type(error).__name__ == "NoOfferingError" and cloud == "runpod"
    why = missing_clouds(task, catalog, listed={"aws", "azure", "gcp"})
    assert "multi-node" in why["runpod"]
    kept = spread_candidates(candidates)
    assert {c.cloud for c in kept} == {"aws", "azure", "gcp"}
    assert dict(built) == {"gcp": 1, "aws": 1, "azure": 1, "runpod": 1}
    assert dict(loads) == {"gcp": 1, "aws": 1, "azure": 1, "runpod": 1}
    assert index_for(catalog) is index_for(catalog, None)


def test_a_cpu_task_judges_machine_families_per_instance_type_not_per_row(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: Counter[str] = Counter()
    for module, name in ((host_defaults, "family_of"), (index, "family_of"), (misses, "in_families")):
        original = getattr(module, name)

        def counted(*args: Any, _original: Any = original, _name: str = name) -> Any:
            calls[_name] += 1
            return _original(*args)

        monkeypatch.setattr(module, name, counted)
    rows = sum(len(rows_of(c)) for c in ("aws", "azure", "gcp", "runpod"))
    plan_task(cpu(), 2, catalog)
    for cloud in ("runpod", "aws"):  # the best-per-cloud lines; runpod's is explained (no multi-node)
        try:
            plan_task(cpu(), 2, catalog, enabled_clouds={cloud}, max_candidates=1)
        except Exception as error:
            assert type(error).__name__ == "NoOfferingError"
    instance_types = 10  # once for the plan's runs, once for an explanation's check of the hosts
    assert calls["family_of"] <= 2 * instance_types and calls["in_families"] <= instance_types, calls
    assert rows == 1800  # before: in_families once per CPU row of every cloud asked about


def test_a_plan_over_parts_is_the_plan_over_one_index_of_everything(catalog: Catalog) -> None:
    whole = Catalog([o for cloud in ("aws", "azure", "gcp", "runpod") for o in rows_of(cloud)])
    for choice in (cpu(), cpu(region="region-7"), ResourceChoice((ResourceRequest(accelerator="A100"),))):
        ours = plan_task(choice, 1, catalog, max_candidates=None)
        theirs = plan_task(choice, 1, whole, max_candidates=None)
        assert [(c.place, c.instance_type, c.hourly_price) for c in ours] == [
            (c.place, c.instance_type, c.hourly_price) for c in theirs
        ]
