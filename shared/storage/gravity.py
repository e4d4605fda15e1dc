"""Data gravity: where the buckets a job reads live, and how much it reads from each, for the optimizer.

Asked at submit (and by the API's dry run) after the storage rule let the task mount its buckets. Each
bucket a task mounts that exists already is located through its store (shared.storage.bucket_places:
S3 GetBucketLocation, GCS bucket metadata; cached a day) and sized by, first, what the user declared
(`--data-size`, the API's `data_gb`: `{"*": GB}` for a job reading one bucket, or `{"s3://b": GB}` per
bucket), else the bucket's (or mounted prefix's) listed size. A `name:` bucket skyless has not created yet
is created in the job's cloud's store, beside the job: it moves nothing and is left out.

Not built: sizing from what earlier runs of the same task read; Azure containers are placed by cloud only
(their region belongs to the storage account). A store that does not answer leaves that bucket out, with
a note saying its egress is not counted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError

from shared.errors import UserError
from shared.optimizer.egress_prices import CLOUD_OF_STORE
from shared.optimizer.placement import Source
from shared.storage.access import RegistryFacts, StorageWalls, reach
from shared.storage.backends import S3Backend, StorageBackends
from shared.storage.bucket_places import BucketPlace, place_of
from shared.storage.lifecycle import use_of
from shared.storage.registry import find_bucket
from shared.storage.specs import BucketMount, bucket_mounts, bucket_url, is_bucket_url
from shared.storage.store_errors import StoreError

ONE_BUCKET = "*"


@dataclass
class JobData:
    """What the optimizer is told about a job's data, and what the plan should say beside it."""

    sources: list[Source] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def mounts_buckets(pipeline: Any) -> bool:
    return any(
        not isinstance(source, str) or is_bucket_url(source)
        for task in pipeline.tasks
        for source in (task.file_mounts or {}).values()
    )


def check_declared_sizes(declared: Mapping[str, float], *, field_name: str = "data_gb") -> None:
    for key, size in declared.items():
        if key != ONE_BUCKET and not is_bucket_url(key):
            raise UserError(
                f"{key!r} is not a bucket URL",
                field=field_name,
                hint="s3://bucket[/prefix]=GB, or a plain GB",
            )
        if not 0 <= size <= 1e9:
            raise UserError(
                f"{size} GB is not a data size", field=field_name, hint="a number of GB, 0 or more"
            )


def locate_job_data(
    settings: Any, pipeline: Any, *, owner: str, declared: Mapping[str, float] | None = None
) -> JobData:
    """The sources of every task's bucket mounts (see the module's docstring). UserError when a declared
    size names no bucket of the job, or `*` is given to a job reading several."""
    declared = dict(declared or {})
    check_declared_sizes(declared)
    backends = StorageBackends(settings)
    facts, walls = RegistryFacts(settings), StorageWalls.of(settings)
    read: list[tuple[int, BucketMount, str]] = []
    for position, task in enumerate(pipeline.tasks):
        for mount in bucket_mounts(task):
            try:
                allowed = reach(use_of(mount), user_id=owner, facts=facts, walls=walls)
            except UserError:
                continue  # not the user's to read: nothing about it is asked, or told
            record = find_bucket(settings, mount.bucket) if mount.managed else None
            if allowed.via == "new" or (mount.managed and record is None and mount.store is None):
                continue  # created beside the job when it launches
            store = mount.store or (record.store if record else "s3")
            read.append((position, mount, store))
    _check_declared_keys(declared, read)

    def locate(store: str, mount: BucketMount) -> BucketPlace | None:
        backend = backends.for_store(store)
        if backend is None:
            return None
        return place_of(settings, backend, store, mount.bucket, mount.prefix, CLOUD_OF_STORE[store])

    return _sources(read, locate, declared)


def locate_with_own_credentials(pipeline: Any, declared: Mapping[str, float] | None = None) -> JobData:
    """`skyless plan`, which plans on this machine: the S3 buckets the task mounts, located and listed with
    the user's own AWS credentials (boto3's default chain, as `sky` does), uncached. Other stores' buckets
    are left out, with a note (`launch --dryrun` asks the control plane, which reaches every store)."""
    declared = dict(declared or {})
    check_declared_sizes(declared)
    read = [
        (position, mount, mount.store or "s3")
        for position, task in enumerate(pipeline.tasks)
        for mount in bucket_mounts(task)
        if not mount.managed or mount.store is not None
    ]
    _check_declared_keys(declared, read)
    backend = S3Backend(store_label="aws", region="us-east-1")

    def locate(store: str, mount: BucketMount) -> BucketPlace | None:
        if store != "s3":
            return None
        try:
            region = backend.region_of(mount.bucket)
            listed, complete = backend.listed_gb(mount.bucket, mount.prefix)
        except BotoCoreError as error:  # no credentials, no network: said, not raised
            raise StoreError(str(error)) from None
        return BucketPlace(store, mount.bucket, "aws", region, listed, complete)

    return _sources(read, locate, declared)


def _sources(
    read: list[tuple[int, BucketMount, str]],
    locate: Callable[[str, BucketMount], BucketPlace | None],
    declared: Mapping[str, float],
) -> JobData:
    data = JobData()
    for position, mount, store in read:
        url = _url(store, mount)
        try:
            place = locate(store, mount)
        except StoreError as error:
            data.notes.append(f"{url}: egress not counted ({error})")
            continue
        if place is None:
            data.notes.append(f"{url}: not located here, egress not counted")
            continue
        size = declared.get(url, declared.get(ONE_BUCKET))
        if size is None:
            if place.listed_gb is None:
                data.notes.append(
                    f"{url}: size unknown, egress not counted (declare it: --data-size {url}=GB)"
                )
                continue
            size = place.listed_gb
            if not place.complete:
                data.notes.append(f"{url}: at least {size:.3g} GB (listing stopped; declare --data-size)")
        where = f"{place.cloud} {place.region}" if place.region else place.cloud
        data.sources.append(Source(position, place.cloud, size, place.region, 0.0, f"{url} ({where})"))
    return data


def _url(store: str, mount: BucketMount) -> str:
    return bucket_url(store, mount.bucket, mount.account) + (f"/{mount.prefix}" if mount.prefix else "")


def _check_declared_keys(declared: Mapping[str, float], read: list[tuple[int, BucketMount, str]]) -> None:
    urls = {_url(store, m) for _, m, store in read}
    if ONE_BUCKET in declared and len(urls) != 1:
        raise UserError(
            f"a plain data size needs a job reading one bucket; this one reads {len(urls)}",
            field="data_gb",
            hint="name each: --data-size s3://bucket=GB"
            + (f" (buckets: {', '.join(sorted(urls))})" if urls else ""),
        )
    unknown = sorted(k for k in declared if k != ONE_BUCKET and k not in urls)
    if unknown:
        raise UserError(
            f"{', '.join(unknown)}: not a bucket this job reads",
            field="data_gb",
            hint=f"buckets it reads: {', '.join(sorted(urls)) or 'none'}",
        )
