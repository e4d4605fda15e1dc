"""A SkyPilot catalog folder (schema v8: `<cloud>/vms.csv`) → skyless offerings.

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
import functools
import re
from collections.abc import Callable, Collection, Hashable, Iterator, Sequence
from itertools import repeat
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


# What makes a machine shape: repeated on each of its rows (one per region or zone), read once per shape.
_SHAPE = ("InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB", "GpuInfo")
_PER_ROW = ("Price", "SpotPrice", "Region", "AvailabilityZone")
_NUMERIC = ("AcceleratorCount", "vCPUs", "MemoryGiB", "Price", "SpotPrice")
_tpu_slice = functools.cache(tpu_slice)  # a zone lists each slice: work each name out once
_new = tuple.__new__  # Offering._make without its Python-level length check: rows here have 11 fields

_ShapeKey = Hashable  # a row's `_SHAPE` cells as `_Table.shape_cells` reads them back


class _Table:
    """One vms.csv, row by row: a key for the row's `_SHAPE` cells (`shape_cells` gives them back, ""
    where a column is absent), then its `_PER_ROW` cells in that order."""

    def __init__(
        self,
        path: Path,
        keys: Sequence[_ShapeKey],
        per_row: dict[str, Sequence[str]],
        shape_cells: Callable[[_ShapeKey], tuple[str, ...]],
    ) -> None:
        self.path = path
        self.keys = keys
        self.per_row = [per_row.get(name) or repeat("") for name in _PER_ROW]
        self.shape_cells = shape_cells

    def rows(self) -> Iterator[tuple[_ShapeKey, str, str, str, str]]:
        return zip(self.keys, *self.per_row, strict=False)

    def bad_number(self) -> CatalogError:
        """The error for the first numeric cell that is not empty or a non-negative number."""
        header, rows, lines = _csv_rows(self.path)
        positions = {name.strip(): i for i, name in enumerate(header)}
        for name in _NUMERIC:
            if name in positions:
                for line, row in zip(lines, rows, strict=True):
                    _number(row[positions[name]], self.path, line, name)
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
    return _split_plain(path) or _csv_table(path)


def _csv_table(path: Path) -> _Table:
    header, rows, _ = _csv_rows(path)
    columns = (
        dict(zip((name.strip() for name in header), zip(*rows, strict=True), strict=True)) if rows else {}
    )
    empty = ("",) * len(rows)
    keys: list[_ShapeKey] = list(zip(*(columns.get(name, empty) for name in _SHAPE), strict=True))
    return _Table(path, keys, {n: c for n, c in columns.items() if n in _PER_ROW}, _as_cells)


def _as_cells(key: _ShapeKey) -> tuple[str, ...]:
    return key  # type: ignore[return-value]


def _split_plain(path: Path) -> _Table | None:
    """A well-formed file split by `str.split` in C; None for anything csv's full rules are needed for
    (quotes inside cells, blank lines, ragged rows, stray carriage returns, bad encoding, a missing
    column, a file not led by shape columns): `_csv_rows` reads those, errors included.

    Splitting costs about what csv.reader does; what it buys is fewer, cheaper rows: each line is split
    once from the right, leaving its leading `_SHAPE` cells as one string, the row's shape key, read
    into cells once per distinct shape (a few thousand for 56k Azure rows). A quoted cell is a whole
    cell here: its quotes are dropped, and its commas stand in as a control character until the cells
    are split.
    """
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    quoted = '"' in text
    if quoted:
        unquoted = _unquote(text)
        if unquoted is None:
            return None
        text = unquoted
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        if "\r" in text:
            return None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    if not lines:
        return None
    names = [name.strip() for name in _restore(lines[0].split(","))]
    if any(name not in names for name in _REQUIRED) or len(set(names)) != len(names):
        return None
    width = len(names)
    lead = 0  # the leading shape columns: one string per row, the key
    while lead < width and names[lead] in _SHAPE:
        lead += 1
    if lead == 0:
        return None
    body = lines[1:]
    rows = map(str.rsplit, body, repeat(","), repeat(width - lead))
    try:  # a row short of a field (a blank line too) has fewer parts
        columns = list(zip(*rows, strict=True)) if body else [() for _ in range(width - lead + 1)]
    except ValueError:
        return None
    if len(columns) != width - lead + 1:
        return None  # every row short of the same fields
    if any(key.count(",") != lead - 1 for key in dict.fromkeys(columns[0])):
        return None  # a row with a field too many
    tail_shape = [name for name in names[lead:] if name in _SHAPE]
    # header column i (i >= lead) is columns[i - lead + 1]; columns[0] holds the leading shape cells
    tail: dict[str, Sequence[str]] = {
        name: columns[i - lead + 1]
        for i, name in enumerate(names)
        if i >= lead and (name in _PER_ROW or name in tail_shape)
    }
    if quoted:
        tail = {name: _restore(cells) if _COMMA in "".join(cells) else cells for name, cells in tail.items()}
    keys: Sequence[_ShapeKey] = (
        list(zip(columns[0], *(tail[name] for name in tail_shape), strict=True)) if tail_shape else columns[0]
    )
    order = [*names[:lead], *tail_shape]
    picks = [order.index(name) if name in order else None for name in _SHAPE]

    def shape_cells(key: _ShapeKey) -> tuple[str, ...]:
        parts: tuple[str, ...] = (key,) if isinstance(key, str) else key  # type: ignore[assignment]
        cells = [*_restore(parts[0].split(",")), *parts[1:]]
        return tuple("" if i is None else cells[i] for i in picks)

    return _Table(path, keys, {name: tail[name] for name in _PER_ROW if name in tail}, shape_cells)


_OPENS_AFTER = (",", "\n")
_CLOSES_BEFORE = (",", "\n", "\r\n")
_COMMA = "\x1f"  # stands for a comma inside a quoted cell until the cells are split


def _unquote(text: str) -> str | None:
    """The text with each quoted cell's quotes dropped and its commas stood in for; None where quotes
    are used in a way only csv's rules read right (escaped quotes, quotes inside a cell, a line break
    inside a cell)."""
    if _COMMA in text:
        return None
    parts = text.split('"')
    if len(parts) % 2 == 0:
        return None
    between = parts[2:-1:2]
    if parts[0] and not parts[0].endswith(_OPENS_AFTER):
        return None
    if parts[-1] and not parts[-1].startswith(_CLOSES_BEFORE):
        return None
    if not all(map(str.startswith, between, repeat(_CLOSES_BEFORE))):
        return None
    if not all(map(str.endswith, between, repeat(_OPENS_AFTER))):
        return None
    inside = dict.fromkeys(parts[1::2])
    if any("\n" in cell or "\r" in cell for cell in inside):
        return None
    stood_in = {cell: cell.replace(",", _COMMA) for cell in inside}
    parts[1::2] = map(stood_in.__getitem__, parts[1::2])
    return "".join(parts)


def _restore(cells: Sequence[str]) -> list[str]:
    return [cell.replace(_COMMA, ",") for cell in cells]


def _csv_rows(path: Path) -> tuple[list[str], list[list[str]], list[int]]:
    """The header, the rows and the line each row starts on, by csv's rules; CatalogError naming the
    line of anything that cannot be read."""
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
            width = len(header)
            rows: list[list[str]] = []
            lines: list[int] = []
            start = reader.line_num + 1
            for row in reader:
                if row and row != [""]:
                    if len(row) != width:
                        raise CatalogError(
                            f"{len(row)} fields, the header has {width}", file=str(path), line=start
                        )
                    rows.append(row)
                    lines.append(start)  # where the row starts: a quoted cell may span lines
                start = reader.line_num + 1
        except csv.Error as exc:
            raise CatalogError(f"malformed CSV: {exc}", file=str(path), line=reader.line_num) from None
        except UnicodeDecodeError:
            raise CatalogError("not UTF-8 text", file=str(path), line=reader.line_num + 1) from None
    return header, rows, lines


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
    numbers = _Numbers()
    # a row's shape key → (instance type, accelerator, count, accelerator memory, vCPUs, memory)
    shapes: dict[_ShapeKey, tuple[str, str | None, float, float | None, float, float]] = {}
    offerings: list[Offering] = []
    append = offerings.append
    for key, price, spot, region, zone in table.rows():
        shape = shapes.get(key)
        if shape is None:
            shape = shapes[key] = _whole_vm_shape(table.shape_cells(key), accelerators, numbers)
        price_v = numbers[price]
        spot_v = numbers[spot]
        if not price_v or not shape[0]:
            continue  # no on-demand price: not something we can plan on
        # a zero spot price means no spot market
        append(_new(Offering, (cloud, region, zone or None, *shape, price_v, spot_v or None)))
    numbers.check()
    return offerings


def _whole_vm_shape(
    cells: tuple[str, ...], accelerators: _Accelerators, numbers: _Numbers
) -> tuple[str, str | None, float, float | None, float, float]:
    itype, acc_text, count, vcpus, memory, gpu_info = cells
    count_v, vcpus_v, memory_v = numbers[count], numbers[vcpus], numbers[memory]
    acc = accelerators.name(acc_text)
    if acc is None:
        return itype, None, 0.0, None, vcpus_v, memory_v
    return itype, acc, count_v, accelerators.card_memory(acc, gpu_info), vcpus_v, memory_v


class _Numbers(dict[str, float]):
    """Each distinct numeric cell read once (`numbers[text]`): "" is 0, anything else as float() reads it.

    float() raises ValueError for text it cannot read; `check` raises it for a negative or NaN number
    among those read. Either way the caller names the first bad cell's line (`_Table.bad_number`).
    """

    def __init__(self) -> None:
        super().__init__({"": 0.0})

    def __missing__(self, text: str) -> float:
        value = self[text] = float(text)
        return value

    def check(self) -> None:
        if not all(map((0.0).__le__, self.values())):  # False for a negative number and for NaN
            raise ValueError("negative or NaN")


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


# (instance type or "", vCPUs, memory, bound to an accelerator, accelerator, its count, GPU info)
_GcpShape = tuple[str, float, float, bool, str | None, float, str]


def _gcp_shape(cells: tuple[str, ...], accelerators: _Accelerators, numbers: _Numbers) -> _GcpShape:
    itype, acc_text, count, vcpus, memory, gpu_info = cells
    vcpus_value, memory_value = numbers[vcpus], numbers[memory]
    if itype:
        return (
            itype,
            vcpus_value,
            memory_value,
            bool(_GCP_ACCELERATOR_BOUND.search(itype)),
            None,
            0.0,
            gpu_info,
        )
    acc = accelerators.name(acc_text)
    count_value = (numbers[count] if count else 1.0) if acc is not None else 0.0
    return "", vcpus_value, memory_value, False, acc, count_value, gpu_info


def _gcp_rows(table: _Table) -> list[Offering]:
    accelerators = _Accelerators()
    offerings: list[Offering] = []
    append = offerings.append
    # (region, zone) -> {host type: (vCPUs, memory, price, spot)}
    hosts: dict[tuple[str, str | None], dict[str, tuple[float, float, float, float | None]]] = {}
    attached: list[tuple[str, str, str | None, float, str, float, float | None]] = []
    tpus: dict[tuple[str, str | None, str], Offering] = {}
    numbers = _Numbers()
    shapes: dict[_ShapeKey, _GcpShape] = {}
    for key, price, spot, region, zone in table.rows():
        if not price:
            continue
        shape = shapes.get(key)
        if shape is None:
            shape = shapes[key] = _gcp_shape(table.shape_cells(key), accelerators, numbers)
        itype, vcpus_value, memory_value, is_bound, acc, count_value, gpu_info = shape
        zone_name = zone or None
        price_value = numbers[price]
        spot_value = numbers[spot] if spot else None
        if itype:
            zone_hosts = hosts.get((region, zone_name))
            if zone_hosts is None:
                zone_hosts = hosts[(region, zone_name)] = {}
            zone_hosts[itype] = (vcpus_value, memory_value, price_value, spot_value)
            if price_value > 0 and not is_bound:
                append(
                    _new(Offering, (
                        "gcp", region, zone_name, itype, None, 0.0, None,
                        vcpus_value, memory_value, price_value, spot_value or None,
                    ))
                )  # fmt: skip
            continue
        if acc is None:
            continue
        if acc.startswith("tpu-"):
            tpu = _tpu_offering(acc, count_value, region, zone_name, price_value, spot_value)
            earlier = tpus.get((region, zone_name, acc))
            if tpu is not None and (earlier is None or (earlier.spot_price is None and tpu.spot_price)):
                tpus[(region, zone_name, acc)] = tpu  # a zone's slice listed twice: one offering, spot if any
            continue
        attached.append((acc, region, zone_name, count_value, gpu_info, price_value, spot_value))
    numbers.check()
    offerings.extend(tpus.values())
    n1_types = {shape[0] for shape in shapes.values() if _GCP_N1_HOST.match(shape[0])}
    n1_by_zone: dict[tuple[str, str | None], list[tuple[str, float, float]]] = {}
    for acc, region, zone_name, count_value, gpu_info, acc_price, acc_spot in attached:
        zone_hosts = hosts.get((region, zone_name), {})
        n1_hosts = n1_by_zone.get((region, zone_name))
        if n1_hosts is None:
            n1_hosts = n1_by_zone[(region, zone_name)] = [
                (name, h[0], h[1]) for name, h in zone_hosts.items() if name in n1_types
            ]
        for name in _gcp_host_types(acc, count_value, zone_hosts, n1_hosts):
            host_vcpus, host_memory, host_price, host_spot = zone_hosts[name]
            total = host_price + acc_price
            total_spot = host_spot + acc_spot if host_spot is not None and acc_spot is not None else 0.0
            if total <= 0:
                continue
            append(
                _new(Offering, (
                    "gcp", region, zone_name, name, acc, count_value,
                    accelerators.card_memory(acc, gpu_info), host_vcpus, host_memory,
                    round(total, 6), round(total_spot, 6) if total_spot > 0 else None,
                ))
            )  # fmt: skip
    return offerings


def _tpu_offering(
    name: str, count: float, region: str, zone: str | None, price: float, spot: float | None
) -> Offering | None:
    """A TPU VM slice: priced whole (its host VMs cost nothing extra), SkyPilot's instance type `TPU-VM`."""
    tpu = _tpu_slice(name)
    if tpu is None or not price:
        return None
    return Offering(
        "gcp", region, zone, TPU_INSTANCE_TYPE, tpu.name, count, tpu.hbm_gib,
        tpu.host_vcpus, tpu.host_memory_gib, price, spot or None,
    )  # fmt: skip
