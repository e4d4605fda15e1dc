"""Where a bucket lives and how much it holds, asked of its store and cached for a day.

The answer is kept in the buckets table (shared.storage.registry) under the key `place:<store>:<bucket>`
(a bucket name never holds a colon, so it meets no registry record), with `expires_at` for DynamoDB's TTL;
a read past `expires_at` asks the store again, whether or not the TTL sweep has run.

Listing a bucket's size reads at most `MAX_LISTED_OBJECTS` objects: past that, the size is a lower bound
and says so (`complete` False).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol, runtime_checkable

from pynamodb.attributes import BooleanAttribute, NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from shared.config import Settings
from shared.store.models import with_shared_session

PLACE_SECONDS = 24 * 3600
MAX_LISTED_OBJECTS = 10_000
GB = 1e9


@dataclass(frozen=True)
class BucketPlace:
    store: str
    bucket: str  # with the mounted prefix, if any: `data/train`
    cloud: str
    region: str | None  # None: the store does not say (Azure: the account's region is not asked)
    listed_gb: float | None  # None: not listed
    complete: bool  # False: the listing stopped at MAX_LISTED_OBJECTS; listed_gb is a lower bound


@runtime_checkable
class Locatable(Protocol):
    """A backend that can say where a bucket lives and what it holds (S3, R2, GCS; not Azure Blob, whose
    region belongs to the storage account and is not readable with the account's key)."""

    def region_of(self, bucket: str) -> str | None:
        """The bucket's region (None: the store has no regions, like R2); StoreError when unreachable."""
        ...

    def listed_gb(
        self, bucket: str, prefix: str = "", max_objects: int = MAX_LISTED_OBJECTS
    ) -> tuple[float, bool]:
        """(GB held under `prefix/`, or in the whole bucket, and whether every object was counted) reading
        at most `max_objects` objects."""
        ...


class BucketPlaceModel(Model):
    class Meta:
        table_name = "unbound-buckets"

    bucket = UnicodeAttribute(hash_key=True)  # place:<store>:<name>
    cloud = UnicodeAttribute()
    region = UnicodeAttribute(null=True)
    listed_gb = NumberAttribute(null=True)
    complete = BooleanAttribute(default=True)
    expires_at = NumberAttribute()


@cache
def places_model(settings: Settings) -> type[BucketPlaceModel]:
    meta = type(
        "Meta",
        (),
        {
            "table_name": settings.table_name("buckets"),
            "region": settings.region,
            "host": settings.endpoint_url,
        },
    )
    return with_shared_session(
        type(f"BucketPlaceModel_{settings.prefix}", (BucketPlaceModel,), {"Meta": meta})
    )


def cached_place(
    settings: Settings, store: str, bucket: str, *, now: float | None = None
) -> BucketPlace | None:
    model = places_model(settings)
    try:
        item = model.get(_key(store, bucket))
    except model.DoesNotExist:
        return None
    if item.expires_at <= (time.time() if now is None else now):
        return None
    listed = None if item.listed_gb is None else float(item.listed_gb)
    return BucketPlace(store, bucket, item.cloud, item.region, listed, bool(item.complete))


def remember_place(settings: Settings, place: BucketPlace, *, now: float | None = None) -> None:
    model = places_model(settings)
    model(
        _key(place.store, place.bucket),
        cloud=place.cloud,
        region=place.region,
        listed_gb=place.listed_gb,
        complete=place.complete,
        expires_at=int((time.time() if now is None else now) + PLACE_SECONDS),
    ).save()


def place_of(
    settings: Settings, backend: Any, store: str, bucket: str, prefix: str, cloud: str
) -> BucketPlace:
    """The cached place of `bucket/prefix`, or the store's answer (then cached). StoreError when the
    store does not answer."""
    name = f"{bucket}/{prefix}" if prefix else bucket
    found = cached_place(settings, store, name)
    if found is not None:
        return found
    if isinstance(backend, Locatable):
        region, (listed, complete) = backend.region_of(bucket), backend.listed_gb(bucket, prefix)
        if getattr(backend, "store_label", "") == "local" and cloud != "aws":
            region = None  # the local runtime simulates gs://, r2://, az:// in S3: no region of theirs
        place = BucketPlace(store, name, cloud, region, listed, complete)
    else:
        place = BucketPlace(store, name, cloud, None, None, True)
    remember_place(settings, place)
    return place


def _key(store: str, bucket: str) -> str:
    return f"place:{store}:{bucket}"
