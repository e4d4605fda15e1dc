"""The offering catalog: every row indexed once per process, so a plan is a lookup, not a scan.

`load_default_catalog()` layers catalog sources (the built-in catalog shipped with the package,
then what the user imported into `$SKYLESS_HOME/catalog/`, later a live price refresh) and caches
the result for the life of the process: a warm Lambda invocation reuses it. A cloud present in a
later source replaces that cloud's rows from the earlier ones, so an imported GCP catalog is the
whole truth about GCP rather than a mix of two price dates.

On disk a catalog is CSV with one column per `Offering` field (shared.catalog.files), with a
compact snapshot cached beside each imported file.
"""

from __future__ import annotations

import gc
import json
import os
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from operator import attrgetter
from pathlib import Path
from typing import Protocol, TypeVar

from shared.catalog.accelerators import canonical_name
from shared.catalog.files import read_offerings, read_offerings_csv, write_compact_cache, write_offerings_csv
from shared.catalog.offering import Offering
from shared.errors import CatalogError

_EMPTY: tuple[Offering, ...] = ()
_K = TypeVar("_K")


def _group(offerings: Iterable[Offering], key: Callable[[Offering], _K]) -> dict[_K, tuple[Offering, ...]]:
    groups: dict[_K, list[Offering]] = {}
    for o in offerings:
        k = key(o)
        group = groups.get(k)
        if group is None:
            groups[k] = [o]
        else:
            group.append(o)
    return {k: tuple(v) for k, v in groups.items()}


class _Index:
    """The lookup tables, each built on its first use by one pass over the offerings."""

    def __init__(self, offerings: tuple[Offering, ...]) -> None:
        self.offerings = offerings

    @cached_property
    def by_cloud(self) -> dict[str, tuple[Offering, ...]]:
        return _group(self.offerings, attrgetter("cloud"))

    @cached_property
    def by_acc(self) -> dict[str, tuple[Offering, ...]]:
        return _group((o for o in self.offerings if o.accelerator is not None), attrgetter("accelerator"))

    @cached_property
    def by_acc_count(self) -> dict[tuple[str, float], tuple[Offering, ...]]:
        return {
            (acc, float(count)): group
            for acc, rows in self.by_acc.items()
            for count, group in _group(rows, attrgetter("accelerator_count")).items()
        }

    @cached_property
    def counts(self) -> dict[str, tuple[float, ...]]:
        counts: dict[str, set[float]] = {}
        for acc, count in self.by_acc_count:
            counts.setdefault(acc, set()).add(count)
        return {acc: tuple(sorted(c)) for acc, c in counts.items()}

    @cached_property
    def by_type(self) -> dict[tuple[str, str], tuple[Offering, ...]]:
        return _group(self.offerings, attrgetter("cloud", "instance_type"))

    @cached_property
    def by_type_any_cloud(self) -> dict[str, tuple[Offering, ...]]:
        return _group(self.offerings, attrgetter("instance_type"))

    @cached_property
    def regions(self) -> dict[str, tuple[str, ...]]:
        return {cloud: tuple(sorted({o.region for o in rows})) for cloud, rows in self.by_cloud.items()}

    @cached_property
    def zones(self) -> dict[tuple[str, str], tuple[str, ...]]:
        zones: dict[tuple[str, str], set[str]] = {}
        for o in self.offerings:
            if o.zone is not None:
                zones.setdefault((o.cloud, o.region), set()).add(o.zone)
        return {k: tuple(sorted(z)) for k, z in zones.items()}

    @cached_property
    def cpu_only(self) -> tuple[Offering, ...]:
        return tuple(
            sorted((o for o in self.offerings if o.accelerator is None), key=attrgetter("vcpus", "price"))
        )

    @cached_property
    def cpu_only_vcpus(self) -> list[float]:
        return [o.vcpus for o in self.cpu_only]


class Catalog:
    """Offerings with the lookups the optimizer needs. Immutable once built; build it once.

    Each lookup table is built on the first lookup that needs it, not at load: a caller that only
    walks `offerings` (the optimizer keeps its own index) pays nothing for them.
    """

    def __init__(
        self,
        offerings: Iterable[Offering],
        sources: Sequence[str] = (),
        origins: Mapping[str, str] | None = None,
    ) -> None:
        self.offerings: tuple[Offering, ...] = tuple(offerings)
        self.sources: tuple[str, ...] = tuple(sources)  # names of the sources that contributed rows
        self.origins: dict[str, str] = dict(origins or {})  # cloud -> the source its rows came from

    @cached_property
    def _ix(self) -> _Index:
        return _Index(self.offerings)

    def __len__(self) -> int:
        return len(self.offerings)

    def __repr__(self) -> str:
        return f"Catalog({len(self)} offerings, clouds={list(self.clouds())}, sources={list(self.sources)})"

    def clouds(self) -> tuple[str, ...]:
        """Cloud names with at least one offering, sorted."""
        return tuple(sorted(self._ix.by_cloud))

    def regions(self, cloud: str) -> tuple[str, ...]:
        """Regions of `cloud` with at least one offering, sorted; empty for an unknown cloud."""
        return self._ix.regions.get(cloud, ())

    def zones(self, cloud: str, region: str) -> tuple[str, ...]:
        """Zones of a region, sorted; empty for clouds priced per region (Azure, Lambda, RunPod)."""
        return self._ix.zones.get((cloud, region), ())

    def accelerator_names(self) -> tuple[str, ...]:
        """Canonical names of every accelerator offered, sorted."""
        return tuple(sorted(self._ix.by_acc))

    def accelerator_counts(self, accelerator: str) -> tuple[float, ...]:
        """The per-VM counts in which `accelerator` is sold, ascending (e.g. (1.0, 2.0, 4.0, 8.0))."""
        return self._ix.counts.get(canonical_name(accelerator), ())

    def by_cloud(self, cloud: str) -> tuple[Offering, ...]:
        """Every offering of one cloud."""
        return self._ix.by_cloud.get(cloud, _EMPTY)

    def by_accelerator(self, accelerator: str) -> tuple[Offering, ...]:
        """Every offering with this accelerator, any count. The name is canonicalised first."""
        return self._ix.by_acc.get(canonical_name(accelerator), _EMPTY)

    def by_accelerator_count(self, accelerator: str, count: float) -> tuple[Offering, ...]:
        """Offerings with exactly `count` of this accelerator per VM."""
        return self._ix.by_acc_count.get((canonical_name(accelerator), float(count)), _EMPTY)

    def by_instance_type(self, cloud: str | None, instance_type: str) -> tuple[Offering, ...]:
        """Offerings of one instance type in every region/zone; `cloud=None` searches every cloud."""
        if cloud is None:
            return self._ix.by_type_any_cloud.get(instance_type, _EMPTY)
        return self._ix.by_type.get((cloud, instance_type), _EMPTY)

    def cpu_only(self, min_vcpus: float = 0, max_vcpus: float | None = None) -> tuple[Offering, ...]:
        """Offerings without accelerators with min_vcpus <= vCPUs <= max_vcpus.

        Pre-sorted by (vCPUs, on-demand price), so this is a bisect and a slice, not a scan.
        `cpu_only(4)` is "cpus: 4+"; `cpu_only(4, 4)` is "cpus: 4".
        """
        start = bisect_left(self._ix.cpu_only_vcpus, min_vcpus)
        if max_vcpus is None:
            return self._ix.cpu_only[start:]
        end = bisect_left(self._ix.cpu_only_vcpus, max_vcpus + 1e-9, lo=start)
        return self._ix.cpu_only[start:end]


class CatalogSource(Protocol):
    """Somewhere offerings come from. Sources are layered; a later source's clouds replace earlier ones.

    The built-in catalog and the user's imported catalog are sources; a live price refresh
    (prices fetched on a schedule and stored as a versioned catalog) is meant to be another.
    """

    @property
    def name(self) -> str: ...

    def load(self) -> list[Offering]:
        """The offerings, or an empty list when this source has nothing (e.g. nothing imported)."""
        ...


@dataclass(frozen=True)
class CsvFolderSource:
    """Every `*.csv` in a folder, in skyless's catalog format. A missing folder is an empty source."""

    folder: Path
    label: str

    @property
    def name(self) -> str:
        return self.label

    def load(self) -> list[Offering]:
        if not self.folder.is_dir():
            return []
        offerings: list[Offering] = []
        for path in sorted(self.folder.glob("*.csv")):
            offerings.extend(read_offerings(path))
        return offerings


class BuiltinSource:
    """The catalog shipped in the package (shared/catalog/data), written from public list prices."""

    name = "built-in"

    # A plain path, not importlib.resources (15 ms of imports at cold start): the package is
    # installed as files everywhere we run, Lambda's /var/task included.
    folder = Path(__file__).resolve().parent / "data"

    def load(self) -> list[Offering]:
        offerings: list[Offering] = []
        for path in sorted(self.folder.glob("*.csv")):
            offerings.extend(read_offerings_csv(path))
        return offerings


def skyless_home() -> Path:
    """`$SKYLESS_HOME`, default ~/.skyless."""
    return Path(os.environ.get("SKYLESS_HOME") or Path.home() / ".skyless")


def imported_catalog_dir() -> Path:
    """Where `skyless catalog import` writes, and where `load_default_catalog` looks."""
    return skyless_home() / "catalog"


IMPORT_MANIFEST = "manifest.json"


def save_imported_catalog(
    offerings: Sequence[Offering], source: str, folder: Path | None = None
) -> dict[str, int]:
    """Store imported offerings as `<cloud>.csv` under `folder` (default: the imported-catalog dir).

    Each cloud in `offerings` replaces that cloud's earlier import; other clouds stay. A manifest
    records where each cloud came from and when. Returns rows written per cloud.
    """
    folder = folder or imported_catalog_dir()
    folder.mkdir(parents=True, exist_ok=True)
    by_cloud: dict[str, list[Offering]] = {}
    for o in offerings:
        by_cloud.setdefault(o.cloud, []).append(o)
    manifest = read_import_manifest(folder)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    for cloud, rows in sorted(by_cloud.items()):
        write_offerings_csv(folder / f"{cloud}.csv", rows)
        write_compact_cache(folder / f"{cloud}.csv", rows)
        manifest[cloud] = {"source": source, "imported_at": now, "rows": len(rows)}
    partial = folder / (IMPORT_MANIFEST + ".partial")
    partial.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    partial.replace(folder / IMPORT_MANIFEST)
    reset_default_catalog()
    return {cloud: len(rows) for cloud, rows in sorted(by_cloud.items())}


def read_import_manifest(folder: Path | None = None) -> dict[str, dict[str, object]]:
    """What `save_imported_catalog` recorded per cloud; empty when nothing was imported."""
    path = (folder or imported_catalog_dir()) / IMPORT_MANIFEST
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CatalogError(f"unreadable import manifest: {exc}", file=str(path)) from None
    return data if isinstance(data, dict) else {}


def default_sources() -> list[CatalogSource]:
    """Built-in first, then the user's imported catalog."""
    return [BuiltinSource(), CsvFolderSource(imported_catalog_dir(), f"imported ({imported_catalog_dir()})")]


def build_catalog(sources: Sequence[CatalogSource]) -> Catalog:
    """Layer sources: each cloud's rows come from the last source that has that cloud."""
    by_cloud: dict[str, tuple[Offering, ...]] = {}
    origin: dict[str, str] = {}
    with _gc_paused():
        for source in sources:
            for cloud, offerings in _group(source.load(), attrgetter("cloud")).items():
                by_cloud[cloud] = offerings
                origin[cloud] = source.name
        used = [source.name for source in sources if source.name in origin.values()]
        return Catalog(
            (o for cloud in sorted(by_cloud) for o in by_cloud[cloud]), sources=used, origins=origin
        )


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Loading makes ~10 objects per row and no cycles: collecting while it runs is wasted time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_default: Catalog | None = None


def load_default_catalog() -> Catalog:
    """The catalog for this process: built once, then reused (warm Lambda invocations included)."""
    global _default
    if _default is None:
        _default = build_catalog(default_sources())
    return _default


def reset_default_catalog() -> None:
    """Forget the cached catalog (after `skyless catalog import`, and in tests)."""
    global _default
    _default = None
