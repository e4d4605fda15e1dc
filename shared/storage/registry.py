"""The buckets skyless knows: which user owns each name, in which store, and whether skyless created it.

Table `<prefix>-buckets` (hash key `bucket`). A name is claimed with a conditional write, so two users
racing for one name cannot both get it; a bucket another user owns is refused at submit and at launch.
Only a bucket skyless created for a job (`created_by`) and that is not `persistent` is ever deleted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cache

from pynamodb.attributes import BooleanAttribute, NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import PutError, UpdateError
from pynamodb.models import Model

from shared.config import Settings
from shared.store.models import with_shared_session

ACTIVE, DELETED = "ACTIVE", "DELETED"


class BucketModel(Model):
    class Meta:
        table_name = "unbound-buckets"

    bucket = UnicodeAttribute(hash_key=True)
    store = UnicodeAttribute()
    owner = UnicodeAttribute()
    created_by = UnicodeAttribute(null=True)  # the job that created it; None: it existed before
    persistent = BooleanAttribute(default=True)
    state = UnicodeAttribute(default=ACTIVE)
    created_at = NumberAttribute()


@dataclass(frozen=True)
class BucketRecord:
    bucket: str
    store: str
    owner: str
    created_by: str | None
    persistent: bool
    state: str


@cache
def buckets_model(settings: Settings) -> type[BucketModel]:
    meta = type(
        "Meta",
        (),
        {
            "table_name": settings.table_name("buckets"),
            "region": settings.region,
            "host": settings.endpoint_url,
            "billing_mode": "PAY_PER_REQUEST",
        },
    )
    return with_shared_session(type(f"BucketModel_{settings.prefix}", (BucketModel,), {"Meta": meta}))


def ensure_buckets_table(settings: Settings) -> None:
    model = buckets_model(settings)
    if not model.exists():
        model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")


def find_bucket(settings: Settings, bucket: str) -> BucketRecord | None:
    """The live record of `bucket`, or None (never claimed, or deleted)."""
    model = buckets_model(settings)
    try:
        item = model.get(bucket, consistent_read=True)
    except model.DoesNotExist:
        return None
    if item.state != ACTIVE:
        return None
    return BucketRecord(
        item.bucket, item.store, item.owner, item.created_by, bool(item.persistent), item.state
    )


def claim_bucket(
    settings: Settings, *, bucket: str, store: str, owner: str, created_by: str | None, persistent: bool
) -> BucketRecord | None:
    """Record `owner` as the owner of `bucket`; None when another user holds it. Idempotent for the owner
    (a second claim keeps the first record's store and creator)."""
    model = buckets_model(settings)
    item = model(
        bucket=bucket,
        store=store,
        owner=owner,
        created_by=created_by,
        persistent=persistent,
        state=ACTIVE,
        created_at=time.time(),
    )
    try:
        item.save(condition=model.bucket.does_not_exist() | (model.state == DELETED))
    except PutError:
        existing = find_bucket(settings, bucket)
        return existing if existing is not None and existing.owner == owner else None
    return BucketRecord(bucket, store, owner, created_by, persistent, ACTIVE)


def mark_deleted(settings: Settings, bucket: str, created_by: str) -> bool:
    """The record of a bucket `created_by` deleted; False when it is not (any more) that job's."""
    model = buckets_model(settings)
    try:
        model(bucket=bucket).update(
            actions=[model.state.set(DELETED)],
            condition=(model.created_by == created_by) & (model.state == ACTIVE),
        )
    except UpdateError:
        return False
    return True


def all_buckets(settings: Settings) -> list[BucketRecord]:
    """Every live record, for an admin's listing (a scan: one item per bucket a task ever named)."""
    model = buckets_model(settings)
    return sorted(
        (
            BucketRecord(i.bucket, i.store, i.owner, i.created_by, bool(i.persistent), i.state)
            for i in model.scan(model.state == ACTIVE)
        ),
        key=lambda r: r.bucket,
    )
