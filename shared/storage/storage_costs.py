"""What the buckets skyless created for a user cost to keep: listed GB x the store's $/GB-month
(shared.optimizer.egress_prices), over the days of a report each bucket was held.

Only buckets skyless made (`created_by`) and still holds are counted: a bucket that existed before a task
named it is the user's own bill. Each is sized by its cached place (shared.storage.bucket_places: one
bounded listing a day, at most 10,000 objects, a lower bound past that and said so). The size is today's,
applied to the whole window: a bucket that grew during it is counted at its size now.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from shared.config import Settings
from shared.optimizer.egress_prices import CLOUD_OF_STORE, STORAGE_PER_GB_MONTH
from shared.storage.backends import StorageBackends, StoreError
from shared.storage.bucket_places import place_of
from shared.storage.listing import buckets_of

DAYS_PER_MONTH = 30.44


@dataclass(frozen=True)
class StorageCost:
    bucket: str
    store: str
    gigabytes: float | None  # None: the store did not answer
    complete: bool  # False: a lower bound (the listing stopped)
    per_gb_month: float
    days: float  # held within the window
    cost: float  # USD within the window


def storage_costs(
    settings: Settings, owner: str, *, days: int, now: float | None = None
) -> list[StorageCost]:
    """The owner's skyless-made buckets, each with its storage cost over the last `days` days."""
    now = time.time() if now is None else now
    since = now - days * 86400
    backends = StorageBackends(settings)
    costs: list[StorageCost] = []
    for listing in buckets_of(settings, owner):
        if listing.created_by is None:
            continue
        price = STORAGE_PER_GB_MONTH.get(listing.store, STORAGE_PER_GB_MONTH["s3"])
        held = max(0.0, now - max(since, listing.created_at)) / 86400
        backend = backends.for_store(listing.store)
        gigabytes, complete = None, True
        if backend is not None:
            try:
                cloud = CLOUD_OF_STORE.get(listing.store, "aws")
                place = place_of(settings, backend, listing.store, listing.name, "", cloud)
                gigabytes, complete = place.listed_gb, place.complete
            except StoreError:
                pass
        cost = (gigabytes or 0.0) * price * held / DAYS_PER_MONTH
        costs.append(
            StorageCost(listing.name, listing.store, gigabytes, complete, price, held, round(cost, 6))
        )
    return costs
