"""The catalog: the built-in data is sane, lookups agree with a brute-force filter, sources layer."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.catalog.accelerators import canonical_name
from shared.catalog.files import (
    compact_path,
    offerings_from_compact,
    offerings_to_compact,
    parse_offerings_csv,
    read_offerings,
    read_offerings_csv,
    write_offerings_csv,
)
from shared.catalog.model import (
    BuiltinSource,
    Catalog,
    CsvFolderSource,
    build_catalog,
    load_default_catalog,
    reset_default_catalog,
    save_imported_catalog,
)
from shared.catalog.offering import Offering
from shared.errors import CatalogError

ROOT = Path(__file__).resolve().parents[2]

# What the built-in catalog promises: these GPUs on these clouds, in the instance types they sell.
EXPECTED_GPUS = {
    "aws": {"T4", "L4", "A10G", "V100", "A100", "A100-80GB", "H100", "H200"},
    "gcp": {"T4", "L4", "V100", "A100", "A100-80GB", "H100", "H200"},
    "azure": {"T4", "A10", "V100", "A100", "A100-80GB", "H100", "H200"},
    "lambda": {"A10", "A100", "A100-80GB", "H100", "V100"},
    "runpod": {"L4", "A100-80GB", "H100", "H200"},
}
EXPECTED_CPU_FAMILIES = {
    "aws": ("m6i.", "c6i.", "r6i."),
    "gcp": ("n2-", "e2-"),
    "azure": ("Standard_D", "Standard_E"),
}
EXPECTED_TYPES = {
    ("aws", "g4dn.xlarge"): ("T4", 1),
    ("aws", "p4d.24xlarge"): ("A100", 8),
    ("aws", "p5.48xlarge"): ("H100", 8),
    ("gcp", "a2-highgpu-8g"): ("A100", 8),
    ("gcp", "a3-highgpu-8g"): ("H100", 8),
    ("gcp", "g2-standard-4"): ("L4", 1),
    ("azure", "Standard_ND96isr_H100_v5"): ("H100", 8),
    ("lambda", "gpu_8x_h100_sxm5"): ("H100", 8),
}


@pytest.fixture(scope="module")
def builtin() -> Catalog:
    return build_catalog([BuiltinSource()])


def test_builtin_catalog_has_every_promised_gpu_on_every_promised_cloud(builtin: Catalog) -> None:
    for cloud, gpus in EXPECTED_GPUS.items():
        offered = {o.accelerator for o in builtin.by_cloud(cloud) if o.accelerator}
        assert gpus <= offered, f"{cloud} lacks {gpus - offered}"


def test_builtin_catalog_sells_gpus_in_their_real_instance_types(builtin: Catalog) -> None:
    for (cloud, itype), (gpu, count) in EXPECTED_TYPES.items():
        rows = builtin.by_instance_type(cloud, itype)
        assert rows, (cloud, itype)
        assert {(o.accelerator, o.accelerator_count) for o in rows} == {(gpu, count)}


def test_builtin_catalog_has_general_cpu_instances(builtin: Catalog) -> None:
    for cloud, prefixes in EXPECTED_CPU_FAMILIES.items():
        cpu_types = {o.instance_type for o in builtin.by_cloud(cloud) if o.accelerator is None}
        for prefix in prefixes:
            assert len([t for t in cpu_types if t.startswith(prefix)]) >= 3, (cloud, prefix)


def test_builtin_prices_are_positive_and_spot_is_cheaper(builtin: Catalog) -> None:
    for o in builtin.offerings:
        assert o.price > 0, o
        if o.spot_price is not None:
            assert 0 < o.spot_price < o.price, o
        assert o.vcpus > 0 and o.memory_gib > 0, o
    assert any(o.spot_price is not None for o in builtin.offerings)


def test_builtin_zones_belong_to_their_regions(builtin: Catalog) -> None:
    for o in builtin.offerings:
        if o.cloud == "aws":
            assert o.zone is not None and re.fullmatch(re.escape(o.region) + r"[a-f]", o.zone), o
        elif o.cloud == "gcp":
            assert o.zone is not None and re.fullmatch(re.escape(o.region) + r"-[a-f]", o.zone), o
        else:
            assert o.zone is None, o


def test_builtin_accelerator_names_are_canonical_with_memory(builtin: Catalog) -> None:
    for o in builtin.offerings:
        if o.accelerator is None:
            assert o.accelerator_count == 0 and o.accelerator_memory_gib is None
        else:
            assert canonical_name(o.accelerator) == o.accelerator
            assert o.accelerator_count > 0 and (o.accelerator_memory_gib or 0) > 0


def test_builtin_csv_is_exactly_what_the_generator_writes() -> None:
    spec = importlib.util.spec_from_file_location(
        "generate_builtin_catalog", ROOT / "catalog_sources" / "generate_builtin_catalog.py"
    )
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    rendered = generator.render_builtin_catalog()
    on_disk = {p.name: p.read_text() for p in (ROOT / "shared" / "catalog" / "data").glob("*.csv")}
    assert rendered == on_disk


# --- lookups agree with brute force -------------------------------------------------------------

_CLOUDS = ["aws", "gcp", "azure"]
_REGIONS = ["r1", "r2", "r3"]
_GPUS = ["A100", "H100", "T4"]
_TYPES = ["small", "medium", "large", "gpu1", "gpu8"]


@st.composite
def offerings(draw: st.DrawFn) -> Offering:
    cloud = draw(st.sampled_from(_CLOUDS))
    region = draw(st.sampled_from(_REGIONS))
    zone = draw(st.one_of(st.none(), st.sampled_from(["a", "b"]).map(lambda z: f"{region}-{z}")))
    gpu = draw(st.one_of(st.none(), st.sampled_from(_GPUS)))
    count = draw(st.sampled_from([1.0, 2.0, 8.0])) if gpu else 0.0
    price = draw(st.floats(0.01, 50, allow_nan=False))
    return Offering(
        cloud=cloud,
        region=region,
        zone=zone,
        instance_type=draw(st.sampled_from(_TYPES)),
        accelerator=gpu,
        accelerator_count=count,
        accelerator_memory_gib=40.0 if gpu else None,
        vcpus=draw(st.sampled_from([1.0, 2.0, 4.0, 8.0, 16.0, 96.0])),
        memory_gib=draw(st.sampled_from([2.0, 8.0, 64.0])),
        price=price,
        spot_price=draw(st.one_of(st.none(), st.just(price / 3))),
    )


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(offerings(), max_size=60),
    gpu=st.sampled_from([*_GPUS, "a100", "h100-80gb"]),
    count=st.sampled_from([1, 2.0, 8]),
    cloud=st.sampled_from([*_CLOUDS, "nowhere"]),
    itype=st.sampled_from(_TYPES),
    min_vcpus=st.sampled_from([0, 1, 3, 4, 16, 100]),
    max_vcpus=st.one_of(st.none(), st.sampled_from([1, 4, 8, 96])),
)
def test_lookups_agree_with_a_brute_force_filter(
    rows: list[Offering],
    gpu: str,
    count: float,
    cloud: str,
    itype: str,
    min_vcpus: float,
    max_vcpus: float | None,
) -> None:
    catalog = Catalog(rows)
    name = canonical_name(gpu)

    def same(found: tuple[Offering, ...], expected: list[Offering]) -> bool:
        return sorted(map(repr, found)) == sorted(map(repr, expected))

    assert same(catalog.by_accelerator(gpu), [o for o in rows if o.accelerator == name])
    assert same(
        catalog.by_accelerator_count(gpu, count),
        [o for o in rows if o.accelerator == name and o.accelerator_count == count],
    )
    assert same(
        catalog.by_instance_type(cloud, itype),
        [o for o in rows if o.cloud == cloud and o.instance_type == itype],
    )
    assert same(catalog.by_instance_type(None, itype), [o for o in rows if o.instance_type == itype])
    assert same(catalog.by_cloud(cloud), [o for o in rows if o.cloud == cloud])
    cpu = catalog.cpu_only(min_vcpus, max_vcpus)
    assert same(
        cpu,
        [
            o
            for o in rows
            if o.accelerator is None and o.vcpus >= min_vcpus and (max_vcpus is None or o.vcpus <= max_vcpus)
        ],
    )
    assert [o.vcpus for o in cpu] == sorted(o.vcpus for o in cpu)
    assert catalog.clouds() == tuple(sorted({o.cloud for o in rows}))
    assert catalog.regions(cloud) == tuple(sorted({o.region for o in rows if o.cloud == cloud}))
    for region in _REGIONS:
        expected_zones = {o.zone for o in rows if o.cloud == cloud and o.region == region and o.zone}
        assert catalog.zones(cloud, region) == tuple(sorted(expected_zones))
    assert catalog.accelerator_names() == tuple(sorted({o.accelerator for o in rows if o.accelerator}))
    assert catalog.accelerator_counts(gpu) == tuple(
        sorted({o.accelerator_count for o in rows if o.accelerator == name})
    )


# --- files and sources --------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(rows=st.lists(offerings(), max_size=20))
def test_offerings_survive_a_write_and_read(
    rows: list[Offering], tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = tmp_path_factory.mktemp("csv") / "x.csv"
    write_offerings_csv(path, rows)
    assert read_offerings_csv(path) == rows


@settings(max_examples=30, deadline=None)
@given(rows=st.lists(offerings(), max_size=20))
def test_offerings_survive_a_compact_snapshot(rows: list[Offering]) -> None:
    assert offerings_from_compact(offerings_to_compact(rows, (1, 2)), (1, 2)) == rows
    assert offerings_from_compact(offerings_to_compact(rows, (1, 2)), (1, 3)) is None  # stale
    assert offerings_from_compact(b"not a snapshot") is None


def test_an_edited_csv_is_read_again_not_served_from_a_stale_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "gcp.csv"
    write_offerings_csv(path, [_offer("gcp", "first", 1.0)])
    assert [o.instance_type for o in read_offerings(path)] == ["first"]
    assert compact_path(path).is_file()
    write_offerings_csv(path, [_offer("gcp", "second-and-longer", 2.0)])
    assert [o.instance_type for o in read_offerings(path)] == ["second-and-longer"]
    compact_path(path).write_bytes(b"garbage")
    assert [o.instance_type for o in read_offerings(path)] == ["second-and-longer"]


def test_a_bad_header_names_the_file_and_line_one() -> None:
    with pytest.raises(CatalogError) as caught:
        parse_offerings_csv(["cloud,region\n", "aws,us-east-1\n"], "mine.csv")
    assert (caught.value.file, caught.value.line) == ("mine.csv", 1)


def test_a_bad_number_names_the_file_and_its_line() -> None:
    header = "cloud,region,zone,instance_type,accelerator,accelerator_count,accelerator_memory_gib,"
    header += "vcpus,memory_gib,price,spot_price\n"
    good = "aws,us-east-1,us-east-1a,m6i.large,,0,,2,8,0.096,0.04\n"
    bad = "aws,us-east-1,us-east-1a,m6i.large,,0,,two,8,0.096,0.04\n"
    with pytest.raises(CatalogError) as caught:
        parse_offerings_csv([header, good, bad], "mine.csv")
    assert (caught.value.file, caught.value.line) == ("mine.csv", 3)
    assert "mine.csv:3" in str(caught.value)
    free = "aws,us-east-1,us-east-1a,m6i.large,,0,,2,8,0,\n"
    with pytest.raises(CatalogError) as caught:
        parse_offerings_csv([header, free], "mine.csv")
    assert (caught.value.line, caught.value.field) == (2, "price")


def _offer(cloud: str, itype: str, price: float) -> Offering:
    return Offering(cloud, "r1", None, itype, None, 0.0, None, 2.0, 8.0, price, None)


class _ListSource:
    def __init__(self, name: str, rows: list[Offering]) -> None:
        self.name = name
        self.rows = rows

    def load(self) -> list[Offering]:
        return list(self.rows)


def test_a_later_source_replaces_the_clouds_it_has_and_keeps_the_rest() -> None:
    base = _ListSource("base", [_offer("aws", "old", 1.0), _offer("gcp", "old", 1.0)])
    newer = _ListSource("newer", [_offer("gcp", "new", 2.0)])
    empty = _ListSource("empty", [])
    catalog = build_catalog([base, newer, empty])
    assert {(o.cloud, o.instance_type) for o in catalog.offerings} == {("aws", "old"), ("gcp", "new")}
    assert catalog.origins == {"aws": "base", "gcp": "newer"}
    assert catalog.sources == ("base", "newer")


def test_imported_catalog_overrides_builtin_for_its_clouds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKYLESS_HOME", str(tmp_path))
    reset_default_catalog()
    try:
        before = load_default_catalog()
        assert load_default_catalog() is before  # cached for the process
        assert before.by_cloud("lambda")
        written = save_imported_catalog([_offer("lambda", "imported_type", 0.5)], source="test")
        assert written == {"lambda": 1}
        after = load_default_catalog()
        assert after is not before  # saving an import drops the cached catalog
        assert [o.instance_type for o in after.by_cloud("lambda")] == ["imported_type"]
        assert after.by_cloud("aws") == before.by_cloud("aws")
        assert after.origins["lambda"].startswith("imported")
        assert CsvFolderSource(tmp_path / "catalog", "x").load() == list(after.by_cloud("lambda"))
    finally:
        reset_default_catalog()


def test_missing_import_folder_is_an_empty_source(tmp_path: Path) -> None:
    assert CsvFolderSource(tmp_path / "absent", "imported").load() == []
