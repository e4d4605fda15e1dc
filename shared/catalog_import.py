"""A SkyPilot catalog folder (schema v8: `<cloud>/vms.csv`) → skyless offerings.

Most clouds price whole VMs, GPUs included: one row, one offering. GCP prices GPUs apart from
the VM they attach to, so a GCP GPU offering is a host VM row plus an accelerator row of the same
zone, paired by GCP's machine families: a2-highgpu ↔ A100, a2-ultragpu ↔ A100-80GB, a3 ↔ H100
(and H100-MEGA, H200), a4 ↔ B200, g2 ↔ L4, and N1 hosts ↔ T4/P4/V100/P100 within the vCPU and
memory limits GCP allows per GPU count. TPU rows (`tpu-v5litepod-16`, no instance type) are TPU VM
slices, priced whole, with SkyPilot's instance type `TPU-VM` (shared.tpu_slices gives their hosts).
GPU rows in a zone without a matching host produce no offering; neither do accelerator-bound hosts
(a2/a3/a4/g2, TPU hosts) on their own.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from shared.accelerators import canonical_name, memory_gib
from shared.errors import CatalogError
from shared.offering import Offering
from shared.tpu_slices import tpu_slice

TPU_INSTANCE_TYPE = "TPU-VM"

_REQUIRED = ("InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB", "Price", "Region")
_GPU_MEMORY = re.compile(r"'SizeInMiB':\s*([0-9.]+)")

# (accelerator, count) → the accelerator-optimized machine types it comes in.
_GCP_FIXED_HOSTS: dict[tuple[str, int], tuple[str, ...]] = {
    **{("A100", n): (f"a2-highgpu-{n}g",) for n in (1, 2, 4, 8)},
    ("A100", 16): ("a2-megagpu-16g",),
    **{("A100-80GB", n): (f"a2-ultragpu-{n}g",) for n in (1, 2, 4, 8)},
    **{("H100", n): (f"a3-highgpu-{n}g",) for n in (1, 2, 4, 8)},
    ("H100-MEGA", 8): ("a3-megagpu-8g",),
    ("H200", 8): ("a3-ultragpu-8g",),
    ("B200", 8): ("a4-highgpu-8g",),
    ("L4", 1): ("g2-standard-4", "g2-standard-8", "g2-standard-12", "g2-standard-16", "g2-standard-32"),
    ("L4", 2): ("g2-standard-24",),
    ("L4", 4): ("g2-standard-48",),
    ("L4", 8): ("g2-standard-96",),
}
# N1 hosts: (accelerator, count) → (max vCPUs, max memory GiB) of the host (GCP's GPU docs).
_GCP_N1_LIMITS: dict[tuple[str, int], tuple[float, float]] = {
    ("T4", 1): (48, 312), ("T4", 2): (48, 312), ("T4", 4): (96, 624),
    ("P4", 1): (24, 156), ("P4", 2): (48, 312), ("P4", 4): (96, 624),
    ("V100", 1): (12, 78), ("V100", 2): (24, 156), ("V100", 4): (48, 312), ("V100", 8): (96, 624),
    ("P100", 1): (16, 104), ("P100", 2): (32, 208), ("P100", 4): (64, 208),
}  # fmt: skip
_GCP_N1_HOST = re.compile(r"^n1-(standard|highmem|highcpu)-\d+$")
_GCP_ACCELERATOR_BOUND = re.compile(r"^(a2|a3|a4|g2|ct\d\w*)-|-tpu$")


@dataclass(frozen=True, slots=True)
class _Row:
    line: int
    instance_type: str
    accelerator: str | None
    count: float
    acc_memory_gib: float | None
    vcpus: float
    memory_gib: float
    region: str
    zone: str | None
    price: float | None  # None: not sold on demand there
    spot: float | None


def import_skypilot_catalog(folder: Path | str) -> list[Offering]:
    """Every offering in a SkyPilot catalog folder (each `<cloud>/vms.csv` under it).

    Raises CatalogError naming the file and line of anything that cannot be read.
    """
    root = Path(folder)
    if not root.is_dir():
        raise CatalogError("not a folder", file=str(root), hint="pass a SkyPilot catalog folder, e.g. .../v8")
    files = sorted(p for p in root.glob("*/vms.csv") if p.is_file())
    if not files:
        raise CatalogError(
            "no <cloud>/vms.csv in this folder", file=str(root), hint="expected SkyPilot's v8 layout"
        )
    offerings: list[Offering] = []
    for path in files:
        cloud = path.parent.name.lower()
        rows = list(_read_rows(path))
        offerings.extend(_gcp_offerings(rows) if cloud == "gcp" else _whole_vm_offerings(cloud, rows))
    return offerings


def _number(text: str, path: Path, line: int, column: str) -> float | None:
    text = text.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise CatalogError(f"not a number: {text!r}", file=str(path), line=line, field=column) from None
    if value != value or value < 0:  # NaN or negative
        raise CatalogError(f"not a price or size: {text!r}", file=str(path), line=line, field=column)
    return value


def _read_rows(path: Path) -> Iterator[_Row]:
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise CatalogError(f"cannot read: {exc.strerror}", file=str(path)) from None
    with handle:
        reader = csv.reader(handle)
        try:
            header = next(reader, None)
            if header is None:
                raise CatalogError("empty file", file=str(path), line=1)
            columns = {name.strip(): i for i, name in enumerate(header)}
            missing = [c for c in _REQUIRED if c not in columns]
            if missing:
                raise CatalogError(
                    f"missing columns {', '.join(missing)}",
                    file=str(path),
                    line=1,
                    hint="SkyPilot v8 vms.csv",
                )
            zone_at, gpu_at, spot_at = (columns.get(c) for c in ("AvailabilityZone", "GpuInfo", "SpotPrice"))
            width = len(header)
            for row in reader:
                if not row or row == [""]:
                    continue
                line = reader.line_num
                if len(row) != width:
                    raise CatalogError(
                        f"{len(row)} fields, the header has {width}", file=str(path), line=line
                    )
                yield _parse_row(row, columns, zone_at, gpu_at, spot_at, path, line)
        except csv.Error as exc:
            raise CatalogError(f"malformed CSV: {exc}", file=str(path), line=reader.line_num) from None
        except UnicodeDecodeError:
            raise CatalogError("not UTF-8 text", file=str(path), line=reader.line_num + 1) from None


def _parse_row(
    row: list[str],
    columns: dict[str, int],
    zone_at: int | None,
    gpu_at: int | None,
    spot_at: int | None,
    path: Path,
    line: int,
) -> _Row:
    def num(column: str) -> float | None:
        return _number(row[columns[column]], path, line, column)

    name = row[columns["AcceleratorName"]].strip()
    accelerator = canonical_name(name) if name else None
    acc_memory = None
    if accelerator is not None:
        found = _GPU_MEMORY.search(row[gpu_at]) if gpu_at is not None else None
        acc_memory = round(float(found.group(1)) / 1024, 3) if found else memory_gib(accelerator)
    spot = _number(row[spot_at], path, line, "SpotPrice") if spot_at is not None else None
    return _Row(
        line=line,
        instance_type=row[columns["InstanceType"]].strip(),
        accelerator=accelerator,
        count=(num("AcceleratorCount") or 0.0) if accelerator else 0.0,
        acc_memory_gib=acc_memory,
        vcpus=num("vCPUs") or 0.0,
        memory_gib=num("MemoryGiB") or 0.0,
        region=row[columns["Region"]].strip(),
        zone=(row[zone_at].strip() or None) if zone_at is not None else None,
        price=num("Price"),
        spot=spot,
    )


def _whole_vm_offerings(cloud: str, rows: list[_Row]) -> Iterator[Offering]:
    for r in rows:
        if not r.price or not r.instance_type:
            continue  # no on-demand price: not something we can plan on
        yield Offering(
            cloud, r.region, r.zone, r.instance_type, r.accelerator, r.count, r.acc_memory_gib,
            r.vcpus, r.memory_gib, r.price, r.spot or None,  # a zero spot price means no spot market
        )  # fmt: skip


def _gcp_host_types(accelerator: str, count: float, hosts: dict[str, _Row]) -> list[str]:
    if not float(count).is_integer():
        return []
    key = (accelerator, int(count))
    if key in _GCP_FIXED_HOSTS:
        return [name for name in _GCP_FIXED_HOSTS[key] if name in hosts]
    limits = _GCP_N1_LIMITS.get(key)
    if limits is None:
        return []
    max_vcpus, max_memory = limits
    return [
        name
        for name, host in hosts.items()
        if _GCP_N1_HOST.match(name) and host.vcpus <= max_vcpus and host.memory_gib <= max_memory
    ]


def _tpu_offering(r: _Row) -> Offering | None:
    """A TPU VM slice: priced whole (its host VMs cost nothing extra), SkyPilot's instance type `TPU-VM`."""
    tpu = tpu_slice(r.accelerator or "")
    if tpu is None or not r.price:
        return None
    return Offering(
        "gcp", r.region, r.zone, TPU_INSTANCE_TYPE, tpu.name, r.count or 1.0, tpu.hbm_gib,
        tpu.host_vcpus, tpu.host_memory_gib, r.price, r.spot or None,
    )  # fmt: skip


def _gcp_offerings(rows: list[_Row]) -> Iterator[Offering]:
    hosts: dict[tuple[str, str | None], dict[str, _Row]] = {}
    accelerators: list[tuple[str, _Row]] = []
    for r in rows:
        if r.price is None:
            continue
        if r.instance_type:
            hosts.setdefault((r.region, r.zone), {})[r.instance_type] = r
            if r.price > 0 and not _GCP_ACCELERATOR_BOUND.search(r.instance_type):
                yield Offering(
                    "gcp", r.region, r.zone, r.instance_type, None, 0.0, None,
                    r.vcpus, r.memory_gib, r.price, r.spot or None,
                )  # fmt: skip
        elif r.accelerator is not None and r.accelerator.startswith("tpu-"):
            tpu = _tpu_offering(r)
            if tpu is not None:
                yield tpu
        elif r.accelerator is not None:
            accelerators.append((r.accelerator, r))
    for accelerator, acc in accelerators:
        zone_hosts = hosts.get((acc.region, acc.zone), {})
        for name in _gcp_host_types(accelerator, acc.count, zone_hosts):
            host = zone_hosts[name]
            assert host.price is not None and acc.price is not None
            price = host.price + acc.price
            spot = host.spot + acc.spot if host.spot is not None and acc.spot is not None else 0.0
            if price <= 0:
                continue
            yield Offering(
                "gcp", acc.region, acc.zone, name, accelerator, acc.count, acc.acc_memory_gib,
                host.vcpus, host.memory_gib, round(price, 6), round(spot, 6) if spot > 0 else None,
            )  # fmt: skip
