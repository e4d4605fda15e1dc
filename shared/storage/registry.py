"""The buckets skyless knows: which user owns each name, in which store, and whether skyless created it.

Table `<prefix>-buckets` (hash key `bucket`). A name is claimed with a conditional write, so two users
racing for one name cannot both get it; a bucket another user owns is refused at submit and at launch.
Only a bucket skyless created for a job (`created_by`) and that is not `persistent` is ever deleted, and
only once no job uses it: every job of the owner that mounts it joins its `users` before it launches, and
the last one to leave deletes it. Leaving last and starting the deletion is one conditional write (the
record moves to DELETING, naming the deleter), so a job joining at the same moment either joins first and
keeps the bucket, or finds it DELETING and waits for it to be gone before it creates it anew.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from functools import cache

from pynamodb.attributes import BooleanAttribute, NumberAttribute, UnicodeAttribute, UnicodeSetAttribute
from pynamodb.exceptions import PutError, UpdateError
from pynamodb.expressions.condition import size
from pynamodb.models import Model

from shared.config import Settings
from shared.store.models import with_shared_session

ACTIVE, DELETING, DELETED = "ACTIVE", "DELETING", "DELETED"


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
    users = UnicodeSetAttribute(null=True)  # the jobs mounting a bucket that goes when they are done
    deleter = UnicodeAttribute(null=True)  # the job deleting it, while DELETING


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


def find_bucket(settings: Settings, bucket: str, *, any_state: bool = False) -> BucketRecord | None:
    """The live record of `bucket`, or None (never claimed, or deleted; with `any_state`, also a record
    being deleted or deleted)."""
    model = buckets_model(settings)
    try:
        item = model.get(bucket, consistent_read=True)
    except model.DoesNotExist:
        return None
    if item.state != ACTIVE and not any_state:
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
        users={created_by} if created_by and not persistent else None,
    )
    try:
        item.save(condition=model.bucket.does_not_exist() | (model.state == DELETED))
    except PutError:
        existing = find_bucket(settings, bucket)
        return existing if existing is not None and existing.owner == owner else None
    return BucketRecord(bucket, store, owner, created_by, persistent, ACTIVE)


def join_bucket(settings: Settings, bucket: str, job_id: str) -> bool:
    """`job_id` uses the bucket until it leaves; False when the record is not ACTIVE (being deleted)."""
    model = buckets_model(settings)
    try:
        model(bucket=bucket).update(actions=[model.users.add({job_id})], condition=model.state == ACTIVE)
    except UpdateError:
        return False
    return True


def leave_bucket(settings: Settings, bucket: str, job_id: str) -> bool:
    """`job_id` no longer uses the bucket. True when it was the last user and must now delete it (the
    record is DELETING with it as the deleter, also when a deletion it began was cut short). Idempotent."""
    model = buckets_model(settings)
    last = (model.users.contains(job_id) & (size(model.users) == 1)) | (
        model.users.does_not_exist() & (model.created_by == job_id)  # a record from before `users`
    )
    for _ in range(5):
        try:
            model(bucket=bucket).update(
                actions=[model.state.set(DELETING), model.deleter.set(job_id), model.users.remove()],
                condition=(model.state == ACTIVE) & last,
            )
            return True
        except UpdateError:
            pass
        try:
            model(bucket=bucket).update(
                actions=[model.users.delete({job_id})],
                condition=(model.state == ACTIVE) & model.users.contains(job_id) & (size(model.users) > 1),
            )
            return False
        except UpdateError:
            pass
        try:
            item = model.get(bucket, consistent_read=True)
        except model.DoesNotExist:
            return False
        if item.state != ACTIVE:
            return item.state == DELETING and item.deleter == job_id  # a deletion of its own, cut short
        if job_id not in (item.users or ()):
            return False  # not a user (any more): the last one to leave deletes it
    return False  # users coming and going faster than five tries: the last of them deletes it


def mark_deleted(settings: Settings, bucket: str, deleter: str) -> bool:
    """The record of a bucket `deleter` was deleting, deleted; False when it is not (any more) its to do."""
    model = buckets_model(settings)
    mine = (model.state == DELETING) & (model.deleter == deleter)
    try:
        model(bucket=bucket).update(
            actions=[model.state.set(DELETED), model.deleter.remove()], condition=mine
        )
    except UpdateError:
        return False
    return True


def forget_bucket(settings: Settings, bucket: str) -> None:
    """The record of a bucket its owner deleted by hand (`skyless storage delete`), deleted."""
    model = buckets_model(settings)
    with contextlib.suppress(UpdateError):
        model(bucket=bucket).update(
            actions=[model.state.set(DELETED), model.users.remove()], condition=model.state == ACTIVE
        )


def live_users(settings: Settings, bucket: str) -> set[str]:
    """The jobs that joined the bucket and have not left it."""
    model = buckets_model(settings)
    try:
        return set(model.get(bucket, consistent_read=True).users or ())
    except model.DoesNotExist:
        return set()


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
