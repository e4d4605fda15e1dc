"""Importing SkyPilot catalog folders: the real snapshot in ../shared/catalog, and broken folders."""

from __future__ import annotations

import csv
import re
from collections import Counter
from pathlib import Path

import pytest

from shared.catalog.accelerators import canonical_name
from shared.catalog.offering import Offering
from shared.catalog.skypilot_import import import_skypilot_catalog
from shared.errors import CatalogError

REAL = Path(__file__).resolve().parents[3] / "shared" / "catalog" / "skypilot" / "v8"
needs_real = pytest.mark.skipif(not REAL.is_dir(), reason="../shared/catalog is not on this machine")

GCP_HEADER = (
    "InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,"
    "Region,AvailabilityZone,Price,SpotPrice"
)
LAMBDA_HEADER = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice"
T4_INFO = "\"{'Gpus': [{'MemoryInfo': {'SizeInMiB': 16384}}]}\""


@pytest.fixture(scope="module")
def real() -> list[Offering]:
    return import_skypilot_catalog(REAL)


def _rows(cloud: str) -> list[dict[str, str]]:
    with (REAL / cloud / "vms.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


@needs_real
def test_readme_example_g2_standard_4_with_one_l4_costs_host_plus_gpu(real: list[Offering]) -> None:
    found = [
        o
        for o in real
        if o.cloud == "gcp"
        and o.region == "us-central1"
        and o.instance_type == "g2-standard-4"
        and o.accelerator
    ]
    assert found
    for o in found:
        assert (o.accelerator, o.accelerator_count, o.accelerator_memory_gib) == ("L4", 1, 24)
        assert o.price == pytest.approx(0.70683)
        assert o.zone is not None and o.zone.startswith("us-central1-")


@needs_real
def test_whole_vm_clouds_import_one_offering_per_row(real: list[Offering]) -> None:
    counts = Counter(o.cloud for o in real)
    for cloud in ("azure", "lambda", "vast"):
        assert counts[cloud] == len(_rows(cloud)), cloud
    assert set(counts) == {"azure", "gcp", "lambda", "vast"}


@needs_real
def test_every_gcp_gpu_offering_is_a_host_row_plus_an_accelerator_row_of_its_zone(
    real: list[Offering],
) -> None:
    rows = _rows("gcp")
    hosts = {(r["AvailabilityZone"], r["InstanceType"]): r for r in rows if r["InstanceType"]}
    accs = {
        (r["AvailabilityZone"], canonical_name(r["AcceleratorName"]), float(r["AcceleratorCount"])): r
        for r in rows
        if not r["InstanceType"]
    }
    gpu_offerings = [o for o in real if o.cloud == "gcp" and o.accelerator and o.instance_type != "TPU-VM"]
    assert len(gpu_offerings) > 1000
    for o in gpu_offerings:
        host = hosts[(o.zone, o.instance_type)]  # no GPU without a host
        acc = accs[(o.zone, o.accelerator, o.accelerator_count)]
        assert o.price == pytest.approx(float(host["Price"]) + float(acc["Price"]))
        spot = float(host["SpotPrice"] or 0) + float(acc["SpotPrice"] or 0)
        if host["SpotPrice"] and acc["SpotPrice"] and spot > 0:
            assert o.spot_price == pytest.approx(spot)
        else:
            assert o.spot_price is None  # a zero or missing spot price on either side: no spot market
        assert o.vcpus == float(host["vCPUs"])


@needs_real
def test_gcp_gpus_pair_with_their_machine_families(real: list[Offering]) -> None:
    pairs = {
        (o.instance_type, o.accelerator, o.accelerator_count)
        for o in real
        if o.cloud == "gcp" and o.accelerator and o.instance_type != "TPU-VM"
    }
    for o_type, gpu, count in pairs:
        if o_type.startswith("a2-highgpu-") or o_type == "a2-megagpu-16g":
            assert gpu == "A100" and count == int(re.search(r"(\d+)g$", o_type).group(1))  # type: ignore[union-attr]
        elif o_type.startswith("a2-ultragpu-"):
            assert gpu == "A100-80GB" and count == int(o_type[-2])
        elif o_type.startswith("a3-"):
            assert gpu in {"H100", "H100-MEGA", "H200"}
        elif o_type.startswith("g2-"):
            assert gpu == "L4"
        elif o_type.startswith("a4-"):
            assert gpu == "B200"
        else:
            assert o_type.startswith("n1-") and gpu in {"T4", "P4", "V100", "P100"}, (o_type, gpu)
    assert ("a2-highgpu-8g", "A100", 8) in pairs
    assert ("a3-highgpu-8g", "H100", 8) in pairs
    assert ("n1-standard-8", "V100", 1) in pairs
    assert ("n1-standard-16", "V100", 1) not in pairs  # V100:1 allows at most 12 vCPUs


@needs_real
def test_gpu_bound_hosts_and_tpu_hosts_are_not_offered_alone(real: list[Offering]) -> None:
    gcp = [o for o in real if o.cloud == "gcp"]
    for o in gcp:
        if o.accelerator is None:
            assert not re.match(r"(a2|a3|a4|g2)-", o.instance_type), o
            assert not o.instance_type.endswith("-tpu"), o
        else:
            assert o.accelerator.startswith("tpu-") == (o.instance_type == "TPU-VM"), o
    assert any(o.instance_type == "n2-standard-8" for o in gcp)


@needs_real
def test_tpu_rows_are_tpu_vm_slices_priced_whole_like_skypilot(real: list[Offering]) -> None:
    rows = [r for r in _rows("gcp") if not r["InstanceType"] and r["AcceleratorName"].startswith("tpu-")]
    tpus = {(o.zone, o.accelerator): o for o in real if o.instance_type == "TPU-VM"}
    assert len(tpus) > 1000
    for r in rows:
        o = tpus[(r["AvailabilityZone"], r["AcceleratorName"])]
        assert o.price == pytest.approx(float(r["Price"])) and o.accelerator_count == 1
    slice16 = tpus[("us-central1-a", "tpu-v5litepod-16")]
    assert (slice16.accelerator_memory_gib, slice16.vcpus, slice16.memory_gib) == (256, 112, 192)
    assert {"tpu-v4-8", "tpu-v6e-8", "tpu-v5litepod-16"} <= {o.accelerator for o in tpus.values()}


@needs_real
def test_empty_spot_prices_become_none_and_azure_gpus_get_their_memory(real: list[Offering]) -> None:
    assert all(o.spot_price is None for o in real if o.cloud == "lambda")
    azure_a100 = [o for o in real if o.cloud == "azure" and o.accelerator == "A100-80GB"]
    assert azure_a100 and all(o.accelerator_memory_gib == 80 for o in azure_a100)
    empty_spot = sum(1 for r in _rows("azure") if not r["SpotPrice"])
    assert sum(1 for o in real if o.cloud == "azure" and o.spot_price is None) == empty_spot


def _folder(tmp_path: Path, files: dict[str, list[str]]) -> Path:
    for cloud, lines in files.items():
        (tmp_path / cloud).mkdir(parents=True)
        (tmp_path / cloud / "vms.csv").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_gcp_gpu_without_a_host_in_its_zone_is_dropped(tmp_path: Path) -> None:
    folder = _folder(
        tmp_path,
        {
            "gcp": [
                GCP_HEADER,
                "n1-standard-4,4,15,,,,us-central1,us-central1-a,0.19,0.04",
                f",,,T4,1,{T4_INFO},us-central1,us-central1-a,0.35,0.14",
                f",,,T4,1,{T4_INFO},us-central1,us-central1-b,0.35,0.14",
            ]
        },
    )
    offerings = import_skypilot_catalog(folder)
    gpu = [o for o in offerings if o.accelerator]
    assert [(o.zone, o.instance_type, o.price, o.spot_price) for o in gpu] == [
        ("us-central1-a", "n1-standard-4", pytest.approx(0.54), pytest.approx(0.18))
    ]
    assert gpu[0].accelerator_memory_gib == 16
    assert [o.instance_type for o in offerings if not o.accelerator] == ["n1-standard-4"]


def test_gcp_gpu_spot_is_none_when_the_host_has_no_spot_price(tmp_path: Path) -> None:
    folder = _folder(
        tmp_path,
        {
            "gcp": [
                GCP_HEADER,
                "n1-standard-4,4,15,,,,us-central1,us-central1-a,0.19,",
                f",,,T4,1,{T4_INFO},us-central1,us-central1-a,0.35,0.14",
            ]
        },
    )
    [gpu] = [o for o in import_skypilot_catalog(folder) if o.accelerator]
    assert gpu.spot_price is None


def test_a_bad_price_names_the_file_line_and_column(tmp_path: Path) -> None:
    folder = _folder(
        tmp_path,
        {
            "lambda": [
                LAMBDA_HEADER,
                "gpu_1x_a10,A10,1,30,200,0.75,us-east-1,,",
                "gpu_1x_a10,A10,1,30,200,cheap,us-east-1,,",
            ]
        },
    )
    with pytest.raises(CatalogError) as caught:
        import_skypilot_catalog(folder)
    assert caught.value.file == str(folder / "lambda" / "vms.csv")
    assert caught.value.line == 3
    assert caught.value.field == "Price"


def test_a_missing_column_is_reported_on_line_one(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"lambda": ["InstanceType,Price,Region", "x,1,us"]})
    with pytest.raises(CatalogError) as caught:
        import_skypilot_catalog(folder)
    assert caught.value.line == 1 and "AcceleratorName" in caught.value.message


def test_a_row_with_the_wrong_number_of_fields_names_its_line(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"lambda": [LAMBDA_HEADER, "gpu_1x_a10,A10,1,30,200,0.75"]})
    with pytest.raises(CatalogError) as caught:
        import_skypilot_catalog(folder)
    assert caught.value.line == 2


def test_a_folder_without_cloud_files_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CatalogError):
        import_skypilot_catalog(tmp_path)
    with pytest.raises(CatalogError):
        import_skypilot_catalog(tmp_path / "missing")


def test_a_tpu_slice_listed_twice_in_a_zone_is_one_offering_and_p100x4_takes_skypilots_hosts(
    tmp_path: Path,
) -> None:
    folder = _folder(
        tmp_path,
        {
            "gcp": [
                GCP_HEADER,
                ",,,tpu-v4-8,1,,us-central2,us-central2-b,12.88,",
                ",,,tpu-v4-8,1,,us-central2,us-central2-b,12.88,3.686",
                "n1-highmem-64,64,416,,,,us-central1,us-central1-a,3.79,0.8",
                ",,,P100,4,,us-central1,us-central1-a,5.84,2.0",
            ]
        },
    )
    offerings = import_skypilot_catalog(folder)
    [tpu] = [o for o in offerings if o.instance_type == "TPU-VM"]
    assert (tpu.accelerator, tpu.price, tpu.spot_price) == ("tpu-v4-8", 12.88, 3.686)
    # SkyPilot lets 4 P100s sit on hosts of up to 96 vCPUs and 624 GiB
    assert [(o.instance_type, o.accelerator_count) for o in offerings if o.accelerator == "P100"] == [
        ("n1-highmem-64", 4.0)
    ]
