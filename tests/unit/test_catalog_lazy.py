"""The catalog is read, and the optimizer's index built, only for the clouds a plan asks about; the plan
is the one a full read would give."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.catalog import files as catalog_files
from shared.catalog.model import Catalog, load_default_catalog, reset_default_catalog, save_imported_catalog
from shared.catalog.offering import Offering
from shared.optimizer import plan_task
from shared.task.requests import ResourceChoice, ResourceRequest

IMPORTED = [
    Offering("gcp", "us-central1", "us-central1-a", "n2-standard-4", None, 0, None, 4, 16, 0.19, 0.05),
    Offering("gcp", "us-central1", "us-central1-a", "a2-highgpu-1g", "A100", 1, 40, 12, 85, 3.67, 1.1),
    Offering("azure", "eastus", None, "Standard_D4s_v5", None, 0, None, 4, 16, 0.19, 0.04),
]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SKYLESS_HOME", str(tmp_path))
    reset_default_catalog()
    save_imported_catalog(IMPORTED, "test import")
    reset_default_catalog()
    yield tmp_path
    reset_default_catalog()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The catalog files read from now on (imported ones through their snapshot, built-in ones as CSV)."""
    seen: list[str] = []
    for name in ("read_offerings", "read_offerings_csv"):
        original = getattr(catalog_files, name)

        def spy(path: Path, _original=original) -> list[Offering]:  # type: ignore[no-untyped-def]
            seen.append(path.stem)
            return _original(path)

        monkeypatch.setattr(f"shared.catalog.model.{name}", spy)
    return seen


CPUS_4 = ResourceRequest(cpus=4, cpus_at_least=True)


def test_a_plan_pinned_to_one_cloud_reads_only_that_clouds_rows(home: Path, reads: list[str]) -> None:
    catalog = load_default_catalog()
    assert reads == []  # building the catalog reads nothing

    plan = plan_task(ResourceChoice((ResourceRequest(cpus=4, cpus_at_least=True, cloud="gcp"),)), 1, catalog)

    assert {c.cloud for c in plan} == {"gcp"} and plan[0].instance_type == "n2-standard-4"
    assert reads == ["gcp"]


def test_enabled_clouds_limit_what_is_read(home: Path, reads: list[str]) -> None:
    plan = plan_task(ResourceChoice((CPUS_4,)), 1, load_default_catalog(), enabled_clouds={"azure", "aws"})

    assert {c.cloud for c in plan} <= {"azure", "aws"}
    assert sorted(reads) == ["aws", "azure"]


def test_a_lazy_plan_is_the_plan_of_the_full_catalog(home: Path) -> None:
    lazy = load_default_catalog()
    full = Catalog(lazy.offerings)  # every row, read at once, indexed whole
    for request in (
        ResourceRequest(cpus=4, cpus_at_least=True, cloud="gcp"),
        ResourceRequest(accelerator="A100", accelerator_count=1, cloud="gcp"),
        ResourceRequest(cpus=2, cpus_at_least=True, cloud="aws", use_spot=True),
    ):
        choice = ResourceChoice((request,))
        reset_default_catalog()  # a fresh lazy catalog for each: nothing read before this plan
        assert plan_task(choice, 2, load_default_catalog()) == plan_task(choice, 2, full)


def test_nothing_on_the_pinned_cloud_is_explained_from_every_cloud(home: Path) -> None:
    from shared.errors import NoOfferingError

    with pytest.raises(NoOfferingError) as raised:
        plan_task(ResourceChoice((ResourceRequest(accelerator="A100", accelerator_count=1, cloud="azure"),)),
                  1, load_default_catalog())  # fmt: skip

    assert "gcp" in str(raised.value)


def test_a_hand_made_csv_with_several_clouds_is_still_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKYLESS_HOME", str(tmp_path))
    catalog_files.write_offerings_csv(tmp_path / "catalog" / "mine.csv", IMPORTED)
    reset_default_catalog()
    try:
        catalog = load_default_catalog()
        assert {o.instance_type for o in catalog.by_cloud("azure")} == {"Standard_D4s_v5"}
        assert catalog.origins["gcp"].startswith("imported")
    finally:
        reset_default_catalog()
