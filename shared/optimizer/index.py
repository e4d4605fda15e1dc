"""The optimizer's view of a catalog: offerings grouped by hardware, each group pre-sorted by price.

A plan is a merge of a few sorted runs cut short once enough candidates are found, never a scan
of the catalog. Grouping happens once per catalog (module-level cache keyed by the catalog
object, so warm invocations reuse it); each run is sorted the first time a plan needs it, and
per-cloud / per-region slices of a run are memoised the same way. A plan that can only use some clouds
(pinned, or `clouds` given) gets an index of those clouds alone, and a catalog read per cloud reads only
them; once an index of every cloud exists, it serves every plan.

Hardware keys:
- `("gpu", accelerator, count)` — offerings with that accelerator count per VM;
- `("cpu", vcpus)` — offerings without accelerators, one key per vCPU count;
- `("type", instance_type, accelerator, count, vcpus)` — one instance type on one hardware shape
  (GCP's `n1-standard-8` comes with several GPU pairings).

A run is a tuple of entries `(hourly_price, cloud, region, zone, instance_type, seq, offering)`:
tuple order is the documented tie-break (price, then cloud, region, zone, instance type; `seq`
only keeps identical rows from ever comparing offerings).
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Collection, Iterable
from typing import Protocol

from shared.catalog.offering import Offering
from shared.task.requests import ResourceRequest

HardwareKey = tuple
Entry = tuple[float, str, str, str, str, int, Offering]
Run = tuple[Entry, ...]


class HasOfferings(Protocol):
    @property
    def offerings(self) -> tuple[Offering, ...]: ...


class OfferingIndex:
    """Offerings grouped by hardware; sorted runs built on first use and kept."""

    def __init__(self, offerings: Iterable[Offering]) -> None:
        self.offerings: tuple[Offering, ...] = tuple(offerings)
        groups: dict[HardwareKey, list[tuple[int, Offering]]] = {}
        type_keys: dict[str, dict[HardwareKey, None]] = {}
        counts: dict[str, set[float]] = {}
        cpu_vcpus: set[float] = set()
        for seq, o in enumerate(self.offerings):
            if o.accelerator is None:
                key: HardwareKey = ("cpu", o.vcpus)
                cpu_vcpus.add(o.vcpus)
            else:
                key = ("gpu", o.accelerator, float(o.accelerator_count))
                counts.setdefault(o.accelerator, set()).add(float(o.accelerator_count))
            groups.setdefault(key, []).append((seq, o))
            tkey = ("type", o.instance_type, o.accelerator, float(o.accelerator_count), o.vcpus)
            groups.setdefault(tkey, []).append((seq, o))
            type_keys.setdefault(o.instance_type, {})[tkey] = None
        self._groups = groups
        self._type_keys = {t: tuple(keys) for t, keys in type_keys.items()}
        self._counts = {acc: tuple(sorted(c)) for acc, c in counts.items()}
        self.cpu_vcpus: tuple[float, ...] = tuple(sorted(cpu_vcpus))
        self.clouds: frozenset[str] = frozenset(o.cloud for o in self.offerings)
        self._runs: dict[tuple[HardwareKey, bool, str | None, str | None], Run] = {}

    def accelerator_names(self) -> tuple[str, ...]:
        return tuple(sorted(self._counts))

    def accelerator_counts(self, accelerator: str) -> tuple[float, ...]:
        return self._counts.get(accelerator, ())

    def instance_types(self) -> tuple[str, ...]:
        return tuple(self._type_keys)

    def type_hardware(self, instance_type: str) -> tuple[HardwareKey, ...]:
        return self._type_keys.get(instance_type, ())

    def has_hardware(self, key: HardwareKey) -> bool:
        return key in self._groups

    def run(self, key: HardwareKey, spot: bool, cloud: str | None = None, region: str | None = None) -> Run:
        """The offerings of one hardware key sorted by the hourly price of the market asked for.

        `spot=True` leaves out offerings without a spot market. `cloud`/`region` narrow the run.
        """
        memo = (key, spot, cloud, region)
        run = self._runs.get(memo)
        if run is not None:
            return run
        if region is not None:
            run = tuple(e for e in self.run(key, spot, cloud) if e[2] == region)
        elif cloud is not None:
            run = tuple(e for e in self.run(key, spot) if e[1] == cloud)
        else:
            rows = self._groups.get(key, ())
            if spot:
                entries = [
                    (o.spot_price, o.cloud, o.region, o.zone or "", o.instance_type, seq, o)
                    for seq, o in rows
                    if o.spot_price is not None
                ]
            else:
                entries = [
                    (o.price, o.cloud, o.region, o.zone or "", o.instance_type, seq, o) for seq, o in rows
                ]
            entries.sort()
            run = tuple(entries)
        self._runs[memo] = run
        gc.freeze()  # see index_for: what the index keeps, it keeps for good
        return run


ALL_CLOUDS = None
_INDEXES: weakref.WeakKeyDictionary[object, dict[frozenset[str] | None, OfferingIndex]] = (
    weakref.WeakKeyDictionary()
)


def index_for(catalog: HasOfferings, clouds: Collection[str] | None = ALL_CLOUDS) -> OfferingIndex:
    """The index of a catalog (of only `clouds`, when given), built on first use and reused for as long
    as the catalog lives. An index of every cloud, once built, answers for any `clouds`."""
    indexes = _INDEXES.setdefault(catalog, {})
    if ALL_CLOUDS in indexes:
        return indexes[ALL_CLOUDS]
    offerings_of = getattr(catalog, "offerings_of", None)
    wanted = frozenset(clouds) if clouds is not None and offerings_of is not None else ALL_CLOUDS
    index = indexes.get(wanted)
    if index is None:
        if wanted is ALL_CLOUDS or offerings_of is None:
            index = OfferingIndex(catalog.offerings)
        else:
            index = OfferingIndex(o for cloud in sorted(wanted) for o in offerings_of(cloud))
        indexes[wanted] = index
        # The catalog and its index live as long as the process: move them out of the collector's
        # full sweeps, which would otherwise walk every row now and then (tens of ms on 90k rows).
        # gc.freeze() is O(1); it only spares what exists now from cycle collection.
        gc.freeze()
    return index


def clouds_asked(
    requests: Iterable[ResourceRequest], enabled_clouds: Collection[str] | None
) -> set[str] | None:
    """The clouds a plan can use: every request pinned to a cloud, else the enabled ones (None = all)."""
    pinned = set()
    for request in requests:
        if request.cloud is None:
            return set(enabled_clouds) if enabled_clouds is not None else None
        pinned.add(request.cloud)
    return pinned & set(enabled_clouds) if enabled_clouds is not None else pinned


def hardware_keys(request: ResourceRequest, index: OfferingIndex) -> list[HardwareKey]:
    """The groups whose hardware satisfies a request's accelerator, CPU count or instance type.

    A request without accelerator or instance type gets CPU-only groups only.
    """
    count = float(request.accelerator_count or 1)
    if request.instance_type is not None:
        keys = index.type_hardware(request.instance_type)
        if request.accelerator is not None:
            return [k for k in keys if k[2] == request.accelerator and k[3] == count]
        return list(keys)
    if request.accelerator is not None:
        key = ("gpu", request.accelerator, count)
        return [key] if index.has_hardware(key) else []
    return [("cpu", v) for v in index.cpu_vcpus if fits(v, request.cpus, request.cpus_at_least)]


def fits(value: float, wanted: float | None, at_least: bool) -> bool:
    """`8+` is a minimum, `8` is exact (SkyPilot's reading of cpus and memory)."""
    if wanted is None:
        return True
    return value >= wanted - 1e-9 if at_least else abs(value - wanted) < 1e-9
