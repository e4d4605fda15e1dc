"""The offering catalog: every row indexed once per process, so a plan is a lookup, not a scan.

`load_default_catalog()` layers catalog sources (the built-in catalog shipped with the package,
then what the user imported into `$SKYLESS_HOME/catalog/`, later a live price refresh) and caches
the result for the life of the process: a warm Lambda invocation reuses it. A cloud present in a
later source replaces that cloud's rows from the earlier ones, so an imported GCP catalog is the
whole truth about GCP rather than a mix of two price dates.

On disk a catalog is CSV with one column per `Offering` field (shared.catalog.files), with a
compact snapshot cached beside each imported file.

Sources that keep one file per cloud (`<cloud>.csv`: the built-in and the imported catalog) are read a
cloud at a time, on the first lookup that needs that cloud: a plan pinned to AWS never reads the 90k
rows an import may hold for Azure and GCP. `offerings` (everything) still loads every cloud.
"""

from __future__ import annotations

import functools
import gc
import json
import threading
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
from shared.config.catalog import CatalogConfig
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


CloudRows = Callable[[], Sequence[Offering]]


class Catalog:
    """Offerings with the lookups the optimizer needs. Immutable once built; build it once.

    Each lookup table is built on the first lookup that needs it, not at load: a caller that only
    walks `offerings` (the optimizer keeps its own index) pays nothing for them. A catalog made with
    `per_cloud` (cloud -> a function answering its rows) reads a cloud's rows on the first lookup of
    that cloud (`by_cloud`, `offerings_of`); `offerings` and the other lookups read them all.
    """

    def __init__(
        self,
        offerings: Iterable[Offering] = (),
        sources: Sequence[str] = (),
        origins: Mapping[str, str] | None = None,
        *,
        per_cloud: Mapping[str, CloudRows] | None = None,
    ) -> None:
        self.sources: tuple[str, ...] = tuple(sources)  # names of the sources that contributed rows
        self.origins: dict[str, str] = dict(origins or {})  # cloud -> the source its rows came from
        self._per_cloud = dict(sorted(per_cloud.items())) if per_cloud is not None else None
        self._loaded: dict[str, tuple[Offering, ...]] = {}
        self._lock = threading.Lock()
        self._all: tuple[Offering, ...] | None = None if per_cloud is not None else tuple(offerings)

    @property
    def offerings(self) -> tuple[Offering, ...]:
        """Everything, cloud by cloud."""
        if self._all is None:
            self._all = tuple(o for cloud in self.known_clouds() for o in self.offerings_of(cloud))
        return self._all

    def known_clouds(self) -> tuple[str, ...]:
        """The clouds this catalog has rows for, sorted, without reading any rows."""
        if self._per_cloud is not None:
            return tuple(self._per_cloud)
        return self.clouds()

    def offerings_of(self, cloud: str) -> tuple[Offering, ...]:
        """One cloud's offerings, read on first use when the catalog is per cloud."""
        if self._per_cloud is None:
            return self.by_cloud(cloud)
        rows = self._loaded.get(cloud)
        if rows is None:
            load = self._per_cloud.get(cloud)
            if load is None:
                return _EMPTY
            with self._lock, _gc_paused():
                rows = self._loaded.get(cloud)
                if rows is None:
                    rows = self._loaded[cloud] = tuple(o for o in load() if o.cloud == cloud)
        return rows

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
        if self._per_cloud is not None:
            return self.offerings_of(cloud)
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

    def per_cloud(self) -> dict[str, CloudRows]:
        """Each cloud's rows, to be read when first asked for: a `<cloud>.csv` that `skyless catalog import`
        wrote (named in the folder's manifest) holds that cloud alone and is read lazily; any other CSV is
        read now and split by cloud."""
        if not self.folder.is_dir():
            return {}
        try:
            imported = read_import_manifest(self.folder)
        except CatalogError:
            imported = {}
        rows: dict[str, CloudRows] = {}
        for path in sorted(self.folder.glob("*.csv")):
            if path.stem in imported:
                rows[path.stem] = functools.partial(read_offerings, path)
            else:
                for cloud, group in _group(read_offerings(path), attrgetter("cloud")).items():
                    rows[cloud] = functools.partial(tuple, group)
        return rows


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

    def per_cloud(self) -> dict[str, CloudRows]:
        """One file per cloud (`<cloud>.csv`, written by this project), each read when first asked for."""
        return {p.stem: functools.partial(read_offerings_csv, p) for p in sorted(self.folder.glob("*.csv"))}


def skyless_home() -> Path:
    """`$SKYLESS_HOME`, default ~/.skyless."""
    return CatalogConfig.from_env().home


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
    """Layer sources: each cloud's rows come from the last source that has that cloud.

    A source that can name its clouds without reading them (`per_cloud()`: cloud -> a function answering
    its rows) is read a cloud at a time, when that cloud is first looked up; any other source is read now."""
    per_cloud: dict[str, CloudRows] = {}
    origin: dict[str, str] = {}
    with _gc_paused():
        for source in sources:
            split = getattr(source, "per_cloud", None)
            if split is not None:
                for cloud, rows in split().items():
                    per_cloud[cloud] = rows
                    origin[cloud] = source.name
                continue
            for cloud, offerings in _group(source.load(), attrgetter("cloud")).items():
                per_cloud[cloud] = functools.partial(tuple, offerings)
                origin[cloud] = source.name
    used = [source.name for source in sources if source.name in origin.values()]
    return Catalog(sources=used, origins=origin, per_cloud=per_cloud)


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
_default_import: int | None = None  # the import manifest's mtime when `_default` was built


def load_default_catalog() -> Catalog:
    """The catalog for this process: built once, then reused (warm Lambda invocations included), and
    built again when `skyless catalog import` has written a new import since (a long-lived process, such
    as the local runtime, plans with what `skyless plan` plans with; the check is one stat)."""
    global _default, _default_import
    stamp = _import_stamp()
    if _default is None or stamp != _default_import:
        _default, _default_import = build_catalog(default_sources()), stamp
    return _default


def _import_stamp() -> int | None:
    try:
        return (imported_catalog_dir() / IMPORT_MANIFEST).stat().st_mtime_ns
    except OSError:
        return None


def reset_default_catalog() -> None:
    """Forget the cached catalog (in tests)."""
    global _default
    _default = None
