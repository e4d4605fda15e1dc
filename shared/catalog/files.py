"""Catalogs on disk: readable CSV, and a compact snapshot that loads in a fraction of the time.

CSV has one column per `Offering` field, in field order (`OFFERING_COLUMNS`); it is what the
built-in catalog ships as and what a person reads or edits. The compact snapshot is the same rows
as columns, with repeated values stored once, in `marshal` format: a cache beside a CSV file
(`<file>.csv.compact`), valid only while the CSV's size and mtime are those it was made from.
Loading ~90k rows from the snapshot takes about half the time of parsing the CSV.
"""

from __future__ import annotations

import csv
import gc
import io
import marshal
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import repeat
from pathlib import Path

from shared.catalog.offering import Offering
from shared.errors import CatalogError

OFFERING_COLUMNS: tuple[str, ...] = (
    "cloud",
    "region",
    "zone",
    "instance_type",
    "accelerator",
    "accelerator_count",
    "accelerator_memory_gib",
    "vcpus",
    "memory_gib",
    "price",
    "spot_price",
)


def _optional_float(text: str) -> float | None:
    return float(text) if text else None


def parse_offerings_csv(lines: Iterable[str], filename: str) -> list[Offering]:
    """Rows in skyless's catalog format → offerings; a bad row is a CatalogError naming file and line."""
    reader = csv.reader(lines)
    header = next(reader, None)
    if header is None:
        return []
    if tuple(header) != OFFERING_COLUMNS:
        expected = ",".join(OFFERING_COLUMNS)
        raise CatalogError(f"unexpected header {header!r}", file=filename, line=1, hint=f"want {expected}")
    offerings: list[Offering] = []
    for row in reader:
        if not row:
            continue
        try:
            cloud, region, zone, itype, acc, count, acc_mem, vcpus, mem, price, spot = row
            offerings.append(
                Offering(
                    cloud,
                    region,
                    zone or None,
                    itype,
                    acc or None,
                    float(count) if count else 0.0,
                    _optional_float(acc_mem),
                    float(vcpus),
                    float(mem),
                    float(price),
                    _optional_float(spot),
                )
            )
        except ValueError as exc:
            raise CatalogError(f"bad row: {exc}", file=filename, line=reader.line_num) from None
        if not offerings[-1].price > 0:  # also catches NaN
            raise CatalogError("price must be positive", file=filename, line=reader.line_num, field="price")
    return offerings


def read_offerings_csv(path: Path) -> list[Offering]:
    """One catalog CSV file → offerings."""
    with path.open(newline="") as handle:
        return parse_offerings_csv(handle, str(path))


def _format_number(value: float | None) -> str:
    if value is None:
        return ""
    return repr(int(value)) if float(value).is_integer() else repr(value)


def offerings_csv_text(offerings: Iterable[Offering]) -> str:
    """Offerings in skyless's catalog format, header included."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(OFFERING_COLUMNS)
    for o in offerings:
        writer.writerow(
            (
                o.cloud,
                o.region,
                o.zone or "",
                o.instance_type,
                o.accelerator or "",
                _format_number(o.accelerator_count),
                _format_number(o.accelerator_memory_gib),
                _format_number(o.vcpus),
                _format_number(o.memory_gib),
                _format_number(o.price),
                _format_number(o.spot_price),
            )
        )
    return buffer.getvalue()


def write_offerings_csv(path: Path, offerings: Iterable[Offering]) -> None:
    """Write offerings in skyless's catalog format (atomically: a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(offerings_csv_text(offerings))
    partial.replace(path)


_COMPACT_FORMAT = ("skyless-offerings", 1, sys.version_info[:2])


def _signature(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


def offerings_to_compact(offerings: Iterable[Offering], signature: tuple[int, int] = (0, 0)) -> bytes:
    """Offerings as a compact snapshot; `signature` ties it to the (size, mtime) of its CSV."""
    columns: tuple[list[object], ...] = tuple([] for _ in OFFERING_COLUMNS)
    seen: dict[tuple[type, object], object] = {}  # one object per distinct value: marshal stores it once
    for o in offerings:
        for column, value in zip(columns, _fields(o), strict=True):
            column.append(seen.setdefault((type(value), value), value))
    return marshal.dumps((_COMPACT_FORMAT, signature, tuple(tuple(c) for c in columns)))  # type: ignore[arg-type]


def offerings_from_compact(blob: bytes, signature: tuple[int, int] | None = None) -> list[Offering] | None:
    """The offerings in a snapshot, or None if it is unreadable, of another format or stale."""
    try:
        fmt, made_from, columns = marshal.loads(blob)
    except (EOFError, ValueError, TypeError):
        return None
    if fmt != _COMPACT_FORMAT or (signature is not None and tuple(made_from) != signature):
        return None
    if len(columns) != len(OFFERING_COLUMNS) or len({len(c) for c in columns}) > 1:
        return None
    # tuple.__new__ builds each Offering in C (Offering._make would add a Python call per row)
    with paused_gc():
        return list(map(tuple.__new__, repeat(Offering), zip(*columns, strict=True)))


@contextmanager
def paused_gc() -> Iterator[None]:
    """No cycle collection while ~100k acyclic tuples are made: otherwise most of the time goes to
    collections that find nothing to free."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _fields(o: Offering) -> tuple[object, ...]:
    return (
        o.cloud, o.region, o.zone, o.instance_type, o.accelerator, o.accelerator_count,
        o.accelerator_memory_gib, o.vcpus, o.memory_gib, o.price, o.spot_price,
    )  # fmt: skip


def compact_path(csv_path: Path) -> Path:
    return csv_path.with_name(csv_path.name + ".compact")


def write_compact_cache(csv_path: Path, offerings: Iterable[Offering]) -> bool:
    """Write the snapshot beside a CSV file; False (and no error) where the folder is read-only."""
    try:
        blob = offerings_to_compact(offerings, _signature(csv_path))
        partial = compact_path(csv_path).with_name(compact_path(csv_path).name + ".partial")
        partial.write_bytes(blob)
        partial.replace(compact_path(csv_path))
    except OSError:
        return False
    return True


def read_offerings(csv_path: Path) -> list[Offering]:
    """A catalog CSV file's offerings, from its snapshot when that is current, else parsed (and cached)."""
    cache = compact_path(csv_path)
    if cache.is_file():
        try:
            cached = offerings_from_compact(cache.read_bytes(), _signature(csv_path))
        except OSError:
            cached = None
        if cached is not None:
            return cached
    offerings = read_offerings_csv(csv_path)
    write_compact_cache(csv_path, offerings)
    return offerings
