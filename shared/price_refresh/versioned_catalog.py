"""The refreshed catalog in the bucket, versioned, and the optimize function's cached view of it.

Layout (keys in the artifacts bucket):

    catalog/<version>/<cloud>.csv        one cloud's rows, skyless's catalog CSV (shared.catalog.files)
    catalog/<version>/manifest.json      {version, created_at, content_hash, clouds: {cloud: {...status}}}
    catalog/LATEST                       {"version": ..., "content_hash": ..., "created_at": ...}
    catalog/last-refresh.json            the last run's report, written even when it made no new version

A version's files are written before LATEST points at it, so a reader never sees half a version.
`<version>` is `<UTC time>-<content hash prefix>`: versions sort by time.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from shared.aws.object_store import ObjectStore
from shared.catalog.files import offerings_csv_text, parse_offerings_csv
from shared.catalog.model import Catalog, build_catalog, load_default_catalog
from shared.catalog.offering import Offering
from shared.config.catalog import CatalogConfig
from shared.errors import CatalogError

logger = logging.getLogger("skyless.catalog")

PREFIX = "catalog/"
LATEST_KEY = PREFIX + "LATEST"
LAST_REFRESH_KEY = PREFIX + "last-refresh.json"
DEFAULT_TTL_SECONDS = CatalogConfig.ttl_seconds


@dataclass(frozen=True)
class CatalogPointer:
    version: str
    content_hash: str
    created_at: str


def content_hash(csv_by_cloud: Mapping[str, str]) -> str:
    digest = hashlib.sha256()
    for cloud in sorted(csv_by_cloud):
        digest.update(f"{cloud}\0{csv_by_cloud[cloud]}\0".encode())
    return digest.hexdigest()


def read_latest(objects: ObjectStore) -> CatalogPointer | None:
    """Where LATEST points, or None when nothing was ever refreshed (or the pointer is unreadable)."""
    text = objects.get_text(LATEST_KEY)
    if text is None:
        return None
    try:
        data = json.loads(text)
        return CatalogPointer(str(data["version"]), str(data["content_hash"]), str(data["created_at"]))
    except (ValueError, KeyError, TypeError):
        logger.error("unreadable %s: %r", LATEST_KEY, text[:200])
        return None


def read_manifest(objects: ObjectStore, version: str) -> dict[str, Any]:
    text = objects.get_text(f"{PREFIX}{version}/manifest.json")
    if text is None:
        raise CatalogError(f"catalog version {version} has no manifest", file=f"{PREFIX}{version}/")
    data = json.loads(text)
    if not isinstance(data, dict):
        raise CatalogError("manifest is not a JSON object", file=f"{PREFIX}{version}/manifest.json")
    return data


def read_version(objects: ObjectStore, version: str) -> dict[str, list[Offering]]:
    """Every cloud's rows of one stored version."""
    manifest = read_manifest(objects, version)
    rows: dict[str, list[Offering]] = {}
    for cloud in sorted(manifest.get("clouds", {})):
        key = f"{PREFIX}{version}/{cloud}.csv"
        text = objects.get_text(key)
        if text is None:
            raise CatalogError(f"catalog version {version} lacks {cloud}.csv", file=key)
        rows[cloud] = parse_offerings_csv(text.splitlines(), key)
    return rows


def write_version(
    objects: ObjectStore,
    rows_by_cloud: Mapping[str, Sequence[Offering]],
    clouds_status: Mapping[str, Mapping[str, Any]],
    now: datetime,
) -> CatalogPointer | None:
    """Store a new version and point LATEST at it; None (nothing written) when its rows are exactly
    those of the version LATEST already names."""
    texts = {cloud: offerings_csv_text(rows) for cloud, rows in rows_by_cloud.items()}
    digest = content_hash(texts)
    latest = read_latest(objects)
    if latest is not None and latest.content_hash == digest:
        return None
    created_at = now.isoformat(timespec="seconds")
    version = f"{now:%Y%m%dT%H%M%SZ}-{digest[:12]}"
    for cloud, text in sorted(texts.items()):
        objects.put_text(f"{PREFIX}{version}/{cloud}.csv", text)
    manifest = {
        "version": version,
        "created_at": created_at,
        "content_hash": digest,
        "previous": latest.version if latest else None,
        "clouds": {
            cloud: {**clouds_status.get(cloud, {}), "rows": len(rows_by_cloud[cloud])} for cloud in texts
        },
    }
    objects.put_text(f"{PREFIX}{version}/manifest.json", json.dumps(manifest, indent=2, sort_keys=True))
    pointer = CatalogPointer(version, digest, created_at)
    objects.put_text(LATEST_KEY, json.dumps(pointer.__dict__, sort_keys=True))
    return pointer


class StoredCatalogSource:
    """One stored version as a `CatalogSource`: layered last, its clouds replace built-in/imported ones."""

    def __init__(self, objects: ObjectStore, version: str) -> None:
        self.objects = objects
        self.version = version

    @property
    def name(self) -> str:
        return f"refreshed ({PREFIX}{self.version})"

    def load(self) -> list[Offering]:
        return [o for rows in read_version(self.objects, self.version).values() for o in rows]


@dataclass(frozen=True)
class _BuiltRows:
    """The clouds an already-built catalog took from one source, as a source: layering on the process's
    default catalog must not read the built-in and imported files again (~0.6 s with a 90k-row import),
    nor read a cloud no plan asks about."""

    name: str
    catalog: Catalog
    cloud_names: tuple[str, ...]

    def load(self) -> list[Offering]:
        return [o for cloud in self.cloud_names for o in self.catalog.offerings_of(cloud)]

    def per_cloud(self) -> dict[str, Callable[[], tuple[Offering, ...]]]:
        return {cloud: functools.partial(self.catalog.offerings_of, cloud) for cloud in self.cloud_names}


def _sources_of(catalog: Catalog) -> list[_BuiltRows]:
    by_origin: dict[str, list[str]] = {}
    for cloud in catalog.known_clouds():
        by_origin.setdefault(catalog.origins.get(cloud, "built-in"), []).append(cloud)
    return [
        _BuiltRows(name, catalog, tuple(by_origin[name])) for name in catalog.sources if name in by_origin
    ]


def ttl_seconds() -> float:
    """How long a warm process trusts its catalog before asking LATEST again (SKYLESS_CATALOG_TTL_SECONDS)."""
    return CatalogConfig.from_env().ttl_seconds


class StoredCatalogLoader:
    """The catalog for a warm process: built-in + imported + the stored version LATEST names.

    Reads LATEST at most once per `ttl` seconds (one small GET) and rebuilds only when the version
    changed. When the bucket cannot be read, or a version is broken, it keeps the catalog it has
    (or, at first, the built-in one): a stale price beats no plan.
    """

    def __init__(
        self,
        objects: ObjectStore,
        ttl: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.objects = objects
        self.ttl = ttl_seconds() if ttl is None else ttl
        self.clock = clock
        self.version: str | None = None
        self._catalog: Catalog | None = None
        self._base: Catalog | None = None  # the default catalog `_catalog` was built on
        self._checked_at = 0.0
        self.pointer_reads = 0
        self.builds = 0

    def catalog(self) -> Catalog:
        now = self.clock()
        base = load_default_catalog()  # built-in + imported: a new `catalog import` rebuilds at once
        if self._catalog is not None and base is self._base and now - self._checked_at < self.ttl:
            return self._catalog
        if base is not self._base:
            self._base, self.version, self._catalog = base, None, None
        self._checked_at = now
        try:
            self.pointer_reads += 1
            pointer = read_latest(self.objects)
        except (ClientError, BotoCoreError) as error:
            logger.warning("cannot read %s (%s); keeping the catalog we have", LATEST_KEY, error)
            return self._catalog or load_default_catalog()
        if pointer is None:
            self.version, self._catalog = None, load_default_catalog()
            return self._catalog
        if pointer.version != self.version or self._catalog is None:
            try:
                self.builds += 1
                self._catalog = build_catalog(
                    [*_sources_of(load_default_catalog()), StoredCatalogSource(self.objects, pointer.version)]
                )
                self.version = pointer.version
            except (ClientError, BotoCoreError, CatalogError, ValueError) as error:
                logger.error(
                    "catalog version %s unreadable (%s); keeping the catalog we have", pointer.version, error
                )
                return self._catalog or load_default_catalog()
        return self._catalog
