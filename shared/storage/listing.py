"""`skyless storage ls | delete` (SkyPilot's `sky storage ls | delete`): the buckets a user owns in skyless's
bucket registry, and deleting one that skyless created.

A bucket skyless did not create (it existed, and a task named it) is never deleted here: skyless only
ever deletes what it made. A bucket whose creating job is still live is refused too, so a running job
never loses its data. Listing reads the registry with a filtered scan: it holds one record per bucket
name ever claimed (not per job), a small table next to jobs and events.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.config import Settings
from shared.errors import ConflictError, NotFoundError, UserError
from shared.states import is_terminal
from shared.storage.backends import StorageBackends, StoreError
from shared.storage.registry import ACTIVE, buckets_model, find_bucket, forget_bucket, live_users

URL_SCHEMES = {"gcs": "gs", "s3": "s3", "r2": "r2", "azure": "https"}


@dataclass(frozen=True)
class BucketListing:
    name: str
    store: str
    url: str
    created_by: str | None  # the job that created it; None: it existed before skyless used it
    persistent: bool
    created_at: float


def buckets_of(settings: Settings, owner: str) -> list[BucketListing]:
    """The owner's live buckets, by name."""
    model = buckets_model(settings)
    condition = (model.owner == owner) & (model.state == ACTIVE)
    found = [
        BucketListing(
            i.bucket, i.store, _url(i.store, i.bucket), i.created_by, bool(i.persistent), float(i.created_at)
        )
        for i in model.scan(condition)
    ]
    return sorted(found, key=lambda b: b.name)


def delete_bucket(settings: Settings, owner: str, name: str) -> BucketListing:
    """Delete a bucket skyless created for one of the owner's jobs (objects and all); idempotent. Another
    user's bucket is a NotFoundError, as if it did not exist."""
    record = find_bucket(settings, name)
    if record is None or record.owner != owner:
        raise NotFoundError(
            f"no bucket {name} of yours", field="name", hint="`skyless storage ls` lists them"
        )
    if record.created_by is None:
        raise ConflictError(
            f"skyless did not create bucket {name}: it existed before a task named it, so skyless leaves it",
            field="name",
            hint="delete it with your cloud's own tools if you mean to",
        )
    from shared.wiring import wiring_for

    store = wiring_for(settings).store
    for job_id in sorted({record.created_by} | live_users(settings, name)):
        job = store.get(job_id)
        if job is not None and not is_terminal(job.state):
            raise ConflictError(f"job {job.job_id} uses bucket {name} and is still {job.state}", field="name",
                                hint=f"cancel it first: skyless cancel {job.job_id}")  # fmt: skip
    backend = StorageBackends(settings).for_store(record.store)
    if backend is None:
        raise UserError(f"no {record.store} store is configured here to delete {name} from", field="name")
    try:
        backend.delete(name)
    except StoreError as error:
        raise ConflictError(str(error), field="name") from None
    forget_bucket(settings, name)
    return BucketListing(
        name, record.store, _url(record.store, name), record.created_by, record.persistent, 0.0
    )


def _url(store: str, bucket: str) -> str:
    return f"{URL_SCHEMES.get(store, store)}://{bucket}"
