"""The SkyPilot catalog import exactly as it was before it was made fast (commit 64f11ed): the oracle
the fast import is compared with, on the real catalog folder and on generated files. Not used by skyless.

A SkyPilot catalog folder (schema v8: `<cloud>/vms.csv`) → skyless offerings.

Most clouds price whole VMs, GPUs included: one row, one offering. GCP prices GPUs apart from
the VM they attach to, so a GCP GPU offering is a host VM row plus an accelerator row of the same
zone, paired by GCP's machine families: a2-highgpu ↔ A100, a2-ultragpu ↔ A100-80GB, a3 ↔ H100
(and H100-MEGA, H200), a4 ↔ B200, g2 ↔ L4, and N1 hosts ↔ T4/P4/V100/P100 within the vCPU and
memory limits GCP allows per GPU count. TPU rows (`tpu-v5litepod-16`, no instance type) are TPU VM
slices, priced whole, with SkyPilot's instance type `TPU-VM` (shared.catalog.tpu_slices gives their hosts).
GPU rows in a zone without a matching host produce no offering; neither do accelerator-bound hosts
(a2/a3/a4/g2, TPU hosts) on their own.
"""

from __future__ import annotations

import csv
import re
from collections import deque
from collections.abc import Collection
from itertools import repeat
from operator import itemgetter
from pathlib import Path

from shared.catalog.accelerators import canonical_name, memory_gib
from shared.catalog.files import paused_gc
from shared.catalog.offering import Offering
from shared.catalog.tpu_slices import tpu_slice
from shared.errors import CatalogError

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
# N1 hosts: (accelerator, count) → (max vCPUs, max memory GiB) of the host: SkyPilot's table
# (gcp_catalog.py _NUM_ACC_TO_MAX_CPU_AND_MEMORY), from GCP's GPU docs.
_GCP_N1_LIMITS: dict[tuple[str, int], tuple[float, float]] = {
    ("K80", 1): (8, 52), ("K80", 2): (16, 104), ("K80", 4): (32, 208), ("K80", 8): (64, 208),
    ("T4", 1): (48, 312), ("T4", 2): (48, 312), ("T4", 4): (96, 624),
    ("P4", 1): (24, 156), ("P4", 2): (48, 312), ("P4", 4): (96, 624),
    ("V100", 1): (12, 78), ("V100", 2): (24, 156), ("V100", 4): (48, 312), ("V100", 8): (96, 624),
    ("P100", 1): (16, 104), ("P100", 2): (32, 208), ("P100", 4): (96, 624),
}  # fmt: skip
_GCP_N1_HOST = re.compile(r"^n1-(standard|highmem|highcpu)-\d+$")
_GCP_ACCELERATOR_BOUND = re.compile(r"^(a2|a3|a4|g2|ct\d\w*)-|-tpu$")


_COLUMNS = ("InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB", "GpuInfo", "Price",
            "SpotPrice", "Region", "AvailabilityZone")  # fmt: skip
_NUMERIC = ("AcceleratorCount", "vCPUs", "MemoryGiB", "Price", "SpotPrice")
_new = tuple.__new__  # Offering._make without its Python-level length check: rows here have 11 fields


class _Table:
    """One vms.csv: its rows, and a getter giving each row's `_COLUMNS` in that order ("" if absent)."""

    def __init__(self, path: Path, header: list[str], rows: list[list[str]]) -> None:
        self.path = path
        self.rows = rows
        positions = {name.strip(): i for i, name in enumerate(header)}
        width = len(header)
        if any(name not in positions for name in _COLUMNS):  # optional columns read as empty
            deque(map(list.append, rows, repeat("")), maxlen=0)  # one more cell per row, in C
            positions = {name: positions.get(name, width) for name in _COLUMNS}
        self.positions = positions
        self.get = itemgetter(*(positions[name] for name in _COLUMNS))

    def bad_number(self) -> CatalogError:
        """The error for the first numeric cell that is not empty or a non-negative number."""
        for name in _NUMERIC:
            column = itemgetter(self.positions[name])
            for line, row in enumerate(self.rows, start=2):
                _number(column(row), self.path, line, name)
        return CatalogError("a number that cannot be read", file=str(self.path))


def skypilot_catalog_files(folder: Path | str) -> list[Path]:
    """The `<cloud>/vms.csv` files of a SkyPilot catalog folder; CatalogError when there are none."""
    root = Path(folder)
    if not root.is_dir():
        raise CatalogError("not a folder", file=str(root), hint="pass a SkyPilot catalog folder, e.g. .../v8")
    files = sorted(p for p in root.glob("*/vms.csv") if p.is_file())
    if not files:
        raise CatalogError(
            "no <cloud>/vms.csv in this folder", file=str(root), hint="expected SkyPilot's v8 layout"
        )
    return files


def import_skypilot_catalog(folder: Path | str, clouds: Collection[str] | None = None) -> list[Offering]:
    """Every offering in a SkyPilot catalog folder (each `<cloud>/vms.csv` under it, or those of `clouds`).

    Raises CatalogError naming the file and line of anything that cannot be read.
    """
    offerings: list[Offering] = []
    with paused_gc():
        for path in skypilot_catalog_files(folder):
            cloud = path.parent.name.lower()
            if clouds is not None and cloud not in clouds:
                continue
            table = _read_table(path)
            offerings.extend(_gcp_offerings(table) if cloud == "gcp" else _whole_vm_offerings(cloud, table))
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


def _read_table(path: Path) -> _Table:
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
            names = {name.strip() for name in header}
            missing = [c for c in _REQUIRED if c not in names]
            if missing:
                raise CatalogError(
                    f"missing columns {', '.join(missing)}",
                    file=str(path),
                    line=1,
                    hint="SkyPilot v8 vms.csv",
                )
            rows = list(reader)
        except csv.Error as exc:
            raise CatalogError(f"malformed CSV: {exc}", file=str(path), line=reader.line_num) from None
        except UnicodeDecodeError:
            raise CatalogError("not UTF-8 text", file=str(path), line=reader.line_num + 1) from None
    width = len(header)
    if set(map(len, rows)) - {width}:
        kept = []
        for line, row in enumerate(rows, start=2):
            if not row or row == [""]:
                continue
            if len(row) != width:
                raise CatalogError(f"{len(row)} fields, the header has {width}", file=str(path), line=line)
            kept.append(row)
        rows = kept
    return _Table(path, header, rows)


class _Accelerators:
    """Canonical names and per-card memory, each distinct catalog spelling worked out once."""

    def __init__(self) -> None:
        self.names: dict[str, str | None] = {}
        self.memory: dict[tuple[str | None, str], float | None] = {}

    def name(self, text: str) -> str | None:
        if text not in self.names:
            self.names[text] = canonical_name(text.strip()) if text.strip() else None
        return self.names[text]

    def card_memory(self, accelerator: str | None, gpu_info: str) -> float | None:
        if accelerator is None:
            return None
        key = (accelerator, gpu_info)
        if key not in self.memory:
            found = _GPU_MEMORY.search(gpu_info)
            self.memory[key] = round(float(found.group(1)) / 1024, 3) if found else memory_gib(accelerator)
        return self.memory[key]


def _whole_vm_offerings(cloud: str, table: _Table) -> list[Offering]:
    try:
        return _whole_vm_rows(cloud, table)
    except ValueError:  # a cell float() cannot read, or a negative or NaN number: name its line
        raise table.bad_number() from None


def _whole_vm_rows(cloud: str, table: _Table) -> list[Offering]:
    accelerators = _Accelerators()
    names = accelerators.names
    offerings: list[Offering] = []
    append = offerings.append
    for itype, acc_text, count, vcpus, memory, gpu_info, price, spot, region, zone in map(
        table.get, table.rows
    ):
        vcpus_v, memory_v, count_v = float(vcpus or 0), float(memory or 0), float(count or 0)
        price_v, spot_v = float(price or 0), float(spot or 0)
        if not (price_v >= 0 and spot_v >= 0 and vcpus_v >= 0 and memory_v >= 0 and count_v >= 0):
            raise ValueError("negative or NaN")
        if not price_v or not itype:
            continue  # no on-demand price: not something we can plan on
        acc = names[acc_text] if acc_text in names else accelerators.name(acc_text)
        append(
            _new(Offering, (
                cloud, region, zone or None, itype, acc, count_v if acc else 0.0,
                accelerators.card_memory(acc, gpu_info) if acc else None,
                vcpus_v, memory_v, price_v, spot_v or None,  # a zero spot price means no spot market
            ))
        )  # fmt: skip
    return offerings


def _gcp_host_types(
    accelerator: str, count: float, hosts: dict[str, tuple[float, float, float, float | None]],
    n1_hosts: list[tuple[str, float, float]],
) -> list[str]:  # fmt: skip
    if not float(count).is_integer():
        return []
    key = (accelerator, int(count))
    if key in _GCP_FIXED_HOSTS:
        return [name for name in _GCP_FIXED_HOSTS[key] if name in hosts]
    limits = _GCP_N1_LIMITS.get(key)
    if limits is None:
        return []
    max_vcpus, max_memory = limits
    return [name for name, vcpus, memory in n1_hosts if vcpus <= max_vcpus and memory <= max_memory]


def _gcp_offerings(table: _Table) -> list[Offering]:
    try:
        return _gcp_rows(table)
    except ValueError:  # a cell float() cannot read, or a negative or NaN number: name its line
        raise table.bad_number() from None


def _gcp_rows(table: _Table) -> list[Offering]:
    accelerators = _Accelerators()
    offerings: list[Offering] = []
    append = offerings.append
    # (region, zone) -> {host type: (vCPUs, memory, price, spot)}
    hosts: dict[tuple[str, str | None], dict[str, tuple[float, float, float, float | None]]] = {}
    attached: list[tuple[str, str, str | None, float, str, float, float | None]] = []
    tpus: dict[tuple[str, str | None, str], Offering] = {}
    bound: dict[str, bool] = {}
    for itype, acc_text, count, vcpus, memory, gpu_info, price, spot, region, zone in map(
        table.get, table.rows
    ):
        if not price:
            continue
        zone_name = zone or None
        price_value, spot_value = float(price), (float(spot) if spot else None)
        shape = (float(vcpus or 0), float(memory or 0))
        if not (price_value >= 0 and (spot_value or 0.0) >= 0 and shape[0] >= 0 and shape[1] >= 0):
            raise ValueError("negative or NaN")
        if itype:
            hosts.setdefault((region, zone_name), {})[itype] = (*shape, price_value, spot_value)
            is_bound = bound.get(itype)
            if is_bound is None:
                is_bound = bound[itype] = bool(_GCP_ACCELERATOR_BOUND.search(itype))
            if price_value > 0 and not is_bound:
                append(
                    _new(Offering, (
                        "gcp", region, zone_name, itype, None, 0.0, None,
                        *shape, price_value, spot_value or None,
                    ))
                )  # fmt: skip
            continue
        acc = accelerators.name(acc_text)
        if acc is None:
            continue
        count_value = float(count) if count else 1.0
        if not count_value >= 0:
            raise ValueError("negative or NaN")
        if acc.startswith("tpu-"):
            tpu = _tpu_offering(acc, count_value, region, zone_name, price_value, spot_value)
            earlier = tpus.get((region, zone_name, acc))
            if tpu is not None and (earlier is None or (earlier.spot_price is None and tpu.spot_price)):
                tpus[(region, zone_name, acc)] = tpu  # a zone's slice listed twice: one offering, spot if any
            continue
        attached.append((acc, region, zone_name, count_value, gpu_info, price_value, spot_value))
    offerings.extend(tpus.values())
    n1_by_zone: dict[tuple[str, str | None], list[tuple[str, float, float]]] = {}
    for acc, region, zone_name, count_value, gpu_info, acc_price, acc_spot in attached:
        zone_hosts = hosts.get((region, zone_name), {})
        n1_hosts = n1_by_zone.get((region, zone_name))
        if n1_hosts is None:
            n1_hosts = n1_by_zone[(region, zone_name)] = [
                (name, h[0], h[1]) for name, h in zone_hosts.items() if _GCP_N1_HOST.match(name)
            ]
        for name in _gcp_host_types(acc, count_value, zone_hosts, n1_hosts):
            vcpus, memory, host_price, host_spot = zone_hosts[name]
            price = host_price + acc_price
            spot = host_spot + acc_spot if host_spot is not None and acc_spot is not None else 0.0
            if price <= 0:
                continue
            append(
                _new(Offering, (
                    "gcp", region, zone_name, name, acc, count_value, accelerators.card_memory(acc, gpu_info),
                    vcpus, memory, round(price, 6), round(spot, 6) if spot > 0 else None,
                ))
            )  # fmt: skip
    return offerings


def _tpu_offering(
    name: str, count: float, region: str, zone: str | None, price: float, spot: float | None
) -> Offering | None:
    """A TPU VM slice: priced whole (its host VMs cost nothing extra), SkyPilot's instance type `TPU-VM`."""
    tpu = tpu_slice(name)
    if tpu is None or not price:
        return None
    return Offering(
        "gcp", region, zone, TPU_INSTANCE_TYPE, tpu.name, count, tpu.hbm_gib,
        tpu.host_vcpus, tpu.host_memory_gib, price, spot or None,
    )  # fmt: skip
