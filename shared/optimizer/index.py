"""The optimizer's view of a catalog: offerings grouped by hardware, each group pre-sorted by price.

A plan is a merge of a few sorted runs cut short once enough candidates are found, never a scan
of the catalog. Grouping happens once per cloud of a catalog (module-level cache keyed by the catalog
object, so warm invocations reuse it), the first time a plan needs that cloud: a plan pinned to one cloud
reads and groups that cloud alone, and a catalog read per cloud reads only it. Every view of any set of
clouds (a plan's, `--clouds`, the best-per-cloud lines, an error's explanation) is made of the same
per-cloud parts. Each run is sorted the first time a plan needs it; per-region and per-family slices, and
runs across clouds (merges of the clouds' runs), are memoised the same way.

Hardware keys:
- `("gpu", accelerator, count)` — offerings with that accelerator count per VM;
- `("cpu", vcpus)` — offerings without accelerators, one key per vCPU count;
- `("type", instance_type, accelerator, count, vcpus)` — one instance type on one hardware shape
  (GCP's `n1-standard-8` comes with several GPU pairings);
- `("any",)` — every offering: a CPU-only task on a cloud whose default machines are any machine
  (Lambda, RunPod, Vast) takes the cheapest that fits, whatever it carries.

A run is a tuple of entries `(hourly_price, cloud, region, zone, instance_type, seq, offering)`:
tuple order is the documented tie-break (price, then cloud, region, zone, instance type; `seq`
only keeps identical rows from ever comparing offerings).
"""

from __future__ import annotations

import gc
import heapq
import threading
import weakref
from collections.abc import Collection, Iterable
from typing import Protocol

from shared.catalog.offering import Offering
from shared.optimizer.host_defaults import family_of, in_families
from shared.task.requests import ResourceRequest

HardwareKey = tuple
ANY_HARDWARE: HardwareKey = ("any",)
Entry = tuple[float, str, str, str, str, int, Offering]
Run = tuple[Entry, ...]


class HasOfferings(Protocol):
    @property
    def offerings(self) -> tuple[Offering, ...]: ...


class CloudIndex:
    """One cloud's offerings grouped by hardware; sorted runs built on first use and kept.

    Built in one pass that files each row under its accelerator or CPU key; the groups only some tasks
    need (by instance type, every row) are made the first time one is asked for."""

    def __init__(self, cloud: str, offerings: Iterable[Offering], first_seq: int = 0) -> None:
        """`first_seq`: where this cloud's row numbers start, so that a row's number (`Entry[5]`, which
        tells rows apart) is unique across the clouds of a catalog."""
        self.cloud = cloud
        self.offerings: tuple[Offering, ...] = tuple(offerings)
        self.first_seq = first_seq
        groups: dict[HardwareKey, list[tuple[int, Offering]]] = {}
        for seq, o in enumerate(self.offerings, first_seq):
            acc = o.accelerator
            key: HardwareKey = ("cpu", o.vcpus) if acc is None else ("gpu", acc, float(o.accelerator_count))
            group = groups.get(key)
            if group is None:
                groups[key] = [(seq, o)]
            else:
                group.append((seq, o))
        counts: dict[str, set[float]] = {}
        for gpu in groups:
            if gpu[0] == "gpu":
                counts.setdefault(str(gpu[1]), set()).add(float(gpu[2]))
        self._groups = groups
        self.counts = {acc: frozenset(c) for acc, c in counts.items()}
        self.cpu_vcpus = frozenset(key[1] for key in groups if key[0] == "cpu")
        self._type_keys: dict[str, tuple[HardwareKey, ...]] | None = None
        self._families_of: dict[str, str] | None = None
        self._runs: dict[tuple[HardwareKey, bool, str | None, tuple[str, ...] | None], Run] = {}

    @property
    def type_keys(self) -> dict[str, tuple[HardwareKey, ...]]:
        """{instance type: its hardware keys}; the groups by instance type are made with it."""
        with _LAZY:  # plans of one process may run in threads (the local runtime's dispatcher)
            if self._type_keys is None:
                type_keys: dict[str, dict[HardwareKey, None]] = {}
                for seq, o in enumerate(self.offerings, self.first_seq):
                    tkey = ("type", o.instance_type, o.accelerator, float(o.accelerator_count), o.vcpus)
                    self._groups.setdefault(tkey, []).append((seq, o))
                    type_keys.setdefault(o.instance_type, {})[tkey] = None
                self._type_keys = {t: tuple(keys) for t, keys in type_keys.items()}
            return self._type_keys

    def has_hardware(self, key: HardwareKey) -> bool:
        if key[0] == "type":
            return key in self.type_keys.get(key[1], ())
        return key in self._groups or (key == ANY_HARDWARE and bool(self.offerings))

    def run(
        self, key: HardwareKey, spot: bool, region: str | None = None, families: tuple[str, ...] | None = None
    ) -> Run:
        memo = (key, spot, region, families)
        run = self._runs.get(memo)
        if run is not None:
            return run
        if families is not None:
            family = self._families()  # one family_of per instance type, not per row
            run = tuple(e for e in self.run(key, spot, region) if family[e[4]] in families)
        elif region is not None:
            run = tuple(e for e in self.run(key, spot) if e[2] == region)
        else:
            if key == ANY_HARDWARE:
                rows: Iterable[tuple[int, Offering]] = enumerate(self.offerings, self.first_seq)
            else:
                if key[0] == "type":
                    self.type_keys  # noqa: B018  (makes the groups by instance type)
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

    def _families(self) -> dict[str, str]:
        if self._families_of is None:
            self._families_of = {t: family_of(self.cloud, t) for t in self.type_keys}
        return self._families_of


class OfferingIndex:
    """The offerings of some clouds grouped by hardware: a view over each cloud's `CloudIndex`, which every
    view of the same catalog shares. Runs across clouds are merges of the clouds' sorted runs, kept."""

    def __init__(self, parts: Iterable[CloudIndex]) -> None:
        self.parts: dict[str, CloudIndex] = {p.cloud: p for p in parts if p.offerings}
        self.clouds: frozenset[str] = frozenset(self.parts)
        self.cpu_vcpus: tuple[float, ...] = tuple(
            sorted(set().union(*(p.cpu_vcpus for p in self.parts.values())))
        )
        self._runs: dict[tuple[HardwareKey, bool, str | None, tuple[str, ...] | None], Run] = {}

    @property
    def offerings(self) -> tuple[Offering, ...]:
        return tuple(o for part in self.parts.values() for o in part.offerings)

    def accelerator_names(self) -> tuple[str, ...]:
        return tuple(sorted({acc for p in self.parts.values() for acc in p.counts}))

    def accelerator_counts(self, accelerator: str) -> tuple[float, ...]:
        return tuple(sorted({c for p in self.parts.values() for c in p.counts.get(accelerator, ())}))

    def instance_types(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t for p in self.parts.values() for t in p.type_keys))

    def type_hardware(self, instance_type: str) -> tuple[HardwareKey, ...]:
        return tuple(
            dict.fromkeys(k for p in self.parts.values() for k in p.type_keys.get(instance_type, ()))
        )

    def has_hardware(self, key: HardwareKey) -> bool:
        return any(p.has_hardware(key) for p in self.parts.values())

    def run(
        self,
        key: HardwareKey,
        spot: bool,
        cloud: str | None = None,
        region: str | None = None,
        families: tuple[str, ...] | None = None,
    ) -> Run:
        """The offerings of one hardware key sorted by the hourly price of the market asked for.

        `spot=True` leaves out offerings without a spot market. `cloud`/`region` narrow the run, and
        `families` to those machine families (shared.optimizer.host_defaults).
        """
        if cloud is not None:
            part = self.parts.get(cloud)
            return part.run(key, spot, region, families) if part is not None else ()
        memo = (key, spot, region, families)
        run = self._runs.get(memo)
        if run is None:
            if families is not None:
                run = tuple(e for e in self.run(key, spot, None, region) if in_families(e[1], e[4], families))
            elif region is not None:
                run = tuple(e for e in self.run(key, spot) if e[2] == region)
            else:  # clouds differ at the tuple's second item: a merge keeps the documented order
                run = tuple(heapq.merge(*(p.run(key, spot) for p in self.parts.values())))
            self._runs[memo] = run
        return run


ALL_CLOUDS = None
_PARTS: weakref.WeakKeyDictionary[object, dict[str, CloudIndex]] = weakref.WeakKeyDictionary()
_VIEWS: weakref.WeakKeyDictionary[object, dict[frozenset[str] | None, OfferingIndex]] = (
    weakref.WeakKeyDictionary()
)
_BUILDING = threading.Lock()
_LAZY = threading.Lock()


def index_for(catalog: HasOfferings, clouds: Collection[str] | None = ALL_CLOUDS) -> OfferingIndex:
    """The index of a catalog's `clouds` (None: all of them). Each cloud's part is built the first time any
    plan needs that cloud, and shared by every later plan of any set of clouds for as long as the catalog
    lives: the process's plans, the best-per-cloud lines and the failover spread build nothing again."""
    views = _VIEWS.setdefault(catalog, {})
    wanted = frozenset(clouds) if clouds is not None else ALL_CLOUDS
    view = views.get(wanted)
    if view is not None:
        return view
    with _BUILDING:
        view = views.get(wanted)  # another thread may have made it meanwhile
        if view is not None:
            return view
        parts = _PARTS.setdefault(catalog, {})
        names = sorted(wanted) if wanted is not None else _cloud_names(catalog)
        for name in names:
            if name not in parts:
                first_seq = sum(len(part.offerings) for part in parts.values())
                parts[name] = CloudIndex(name, _offerings_of(catalog, name), first_seq)
        view = views[wanted] = OfferingIndex(parts[name] for name in names)
        # The catalog and its index live as long as the process: move them out of the collector's
        # full sweeps, which would otherwise walk every row now and then (tens of ms on 90k rows).
        # gc.freeze() is O(1); it only spares what exists now from cycle collection.
        gc.freeze()
    return view


def index_builds(catalog: HasOfferings) -> dict[str, int]:
    """{cloud: rows} of the parts built so far for a catalog (benchmarks and tests count them)."""
    return {name: len(part.offerings) for name, part in _PARTS.get(catalog, {}).items()}


def _cloud_names(catalog: HasOfferings) -> list[str]:
    known = getattr(catalog, "known_clouds", None)
    if known is not None:
        return list(known())
    return sorted({o.cloud for o in catalog.offerings})


def _offerings_of(catalog: HasOfferings, cloud: str) -> Iterable[Offering]:
    offerings_of = getattr(catalog, "offerings_of", None)
    if offerings_of is not None:
        rows: Iterable[Offering] = offerings_of(cloud)
        return rows
    return (o for o in catalog.offerings if o.cloud == cloud)


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

    A request without accelerator or instance type gets CPU-only groups, or the group of every
    offering when it may take any machine (`any_host`: clouds whose default machines carry GPUs).
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
    if request.any_host:
        return [ANY_HARDWARE]  # one run of every offering: vCPUs and memory are checked per row
    return [("cpu", v) for v in index.cpu_vcpus if fits(v, request.cpus, request.cpus_at_least)]


def fits(value: float, wanted: float | None, at_least: bool) -> bool:
    """`8+` is a minimum, `8` is exact (SkyPilot's reading of cpus and memory)."""
    if wanted is None:
        return True
    return value >= wanted - 1e-9 if at_least else abs(value - wanted) < 1e-9
