"""A job's buckets through its life: checked at submit, created before the first launch, handed to each
node with credentials for exactly those buckets, deleted at the end only when skyless created them for
this job and they are not `persistent`.

Crash windows: `prepare_job_storage` claims a name before creating the bucket, and both steps are
idempotent, so a provision step that dies between them finishes the work when its message comes back.
A bucket created with `persistent: false` is deleted when the last job of its owner that mounts it ends
(registry: `join_bucket`/`leave_bucket`), not under a job still using it; a job that finds it being deleted
waits for it to be gone (its launch is retried) and creates it anew. `release_job_storage` marks a record
deleted only after the bucket is gone; run again, it deletes nothing twice.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from shared.errors import UserError
from shared.storage.access import BucketUse, Reach, RegistryFacts, StorageWalls, grant_command, reach
from shared.storage.backends import BucketBackend, Expirable, S3Backend, StorageBackends, StoreError
from shared.storage.registry import (
    ACTIVE,
    DELETING,
    claim_bucket,
    find_bucket,
    join_bucket,
    leave_bucket,
    mark_deleted,
)
from shared.storage.specs import SCHEME_OF_STORE, BucketMount, bucket_mounts, bucket_url

NOT_ON_THE_LOCAL_CLOUD = ("gcs", "azure")  # its nodes copy with their own S3 client, no rclone


class StorageFailure(Exception):
    """A bucket the job needs cannot be had (taken, missing, unreachable): the job fails with this."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class StorageBusy(StorageFailure):
    """A bucket the job needs is being deleted by the last job that used it: try the launch again soon."""


def check_job_storage(
    settings: Any, pipeline: Any, *, owner: str, filename: str | None, text: str | None = None
) -> None:
    """Submit: every bucket mount is one skyless can serve here, and none is another user's.
    With the task file's `text`, the error also names the line."""
    try:
        _check_job_storage(settings, pipeline, owner=owner, filename=filename)
    except UserError as error:
        if text is not None and error.line is None and error.field:
            error.line = line_of_mount_field(text, pipeline, error.field)
        raise


def _check_job_storage(settings: Any, pipeline: Any, *, owner: str, filename: str | None) -> None:
    _check_local_mount_paths(settings, pipeline, filename)
    backends = StorageBackends(settings)
    facts, walls = RegistryFacts(settings), StorageWalls.of(settings)
    for task in pipeline.tasks:
        if not any(not isinstance(s, str) or "://" in s for s in (task.file_mounts or {}).values()):
            continue
        for mount in bucket_mounts(task, filename=filename):
            if mount.store is not None and backends.backend_name(mount.store) is None:
                scheme = SCHEME_OF_STORE[mount.store]
                raise UserError(
                    f"{scheme}:// buckets are not reached by this deployment (no {mount.store} store)",
                    file=filename,
                    field=mount.field,
                    hint="set SKYLESS_STORES on the control plane, or use s3",
                )
            if problem := _foreign_account(backends, mount) or _azure_prefix(backends, mount, mount.store):
                raise UserError(problem, file=filename, field=mount.field)
            try:
                reach(use_of(mount), user_id=owner, facts=facts, walls=walls)
            except UserError as error:
                error.file = filename
                raise


def use_of(mount: BucketMount) -> BucketUse:
    return BucketUse(mount.field, mount.bucket, mount.prefix, mount.write_back, mount.managed)


def _check_local_mount_paths(settings: Any, pipeline: Any, filename: str | None) -> None:
    """A local-cloud node shows absolute mount paths (`/checkpoint`) to its task through a private mount
    namespace; where this machine allows none, such a path could not be where the task looks: refused."""
    if "local" not in settings.providers:
        return
    for task in pipeline.tasks:
        for path in task.file_mounts or {}:
            if path.startswith("/") and not local_namespaces_work(settings.local_dir):
                raise UserError(
                    "absolute mount paths need a private mount namespace on the local cloud, and this "
                    "machine allows none (user namespaces are disabled)",
                    file=filename,
                    field=f"file_mounts.{path}",
                    hint=f"mount it under the node's home instead: ~{path}",
                )


@cache
def local_namespaces_work(local_dir: Path) -> bool:
    from node_agent.agent import mount_namespace_works

    return mount_namespace_works(local_dir / "namespace-probe")


def line_of_mount_field(text: str, pipeline: Any, field: str) -> int | None:
    """The line of `file_mounts.<path>[.<key>]` in the task file (paths may hold dots)."""
    from shared.task.positions import YamlSyntaxError, load_documents

    rest = field.removeprefix("file_mounts.")
    try:
        documents = load_documents(text)
    except YamlSyntaxError:
        return None
    for task in pipeline.tasks:
        for path in task.file_mounts or {}:
            if rest == path or rest.startswith(path + "."):
                keys = ("file_mounts", path, *([rest[len(path) + 1 :]] if rest != path else []))
                for document in documents:
                    if ("file_mounts", path) in document.lines:
                        return document.line_of(keys)
    return None


def job_bucket_mounts(settings: Any, task: Any) -> list[BucketMount]:
    return bucket_mounts(task)


def prepare_job_storage(settings: Any, job: Any, task: Any, cloud: str) -> list[str]:
    """Before a launch: decide each named bucket's store (once, for every attempt), claim and create what
    is missing, check that existing buckets exist. Answers notes for the timeline; StorageFailure."""
    backends = StorageBackends(settings)
    facts, walls = RegistryFacts(settings), StorageWalls.of(settings)
    notes: list[str] = []
    for mount in job_bucket_mounts(settings, task):
        allowed = _reach(mount, job.owner, facts, walls)
        record = find_bucket(settings, mount.bucket)
        store = mount.store or (record.store if record else backends.store_for_cloud(cloud))
        backend = _backend(backends, store, mount)
        if problem := _foreign_account(backends, mount) or _azure_prefix(backends, mount, store):
            raise StorageFailure(f"{mount.field}: {problem}")
        if cloud == "local" and backends.backend_name(store) in NOT_ON_THE_LOCAL_CLOUD:
            raise StorageFailure(
                f"{mount.field}: a local-cloud node reaches S3-compatible stores only, not {store} "
                "(the local runtime's own store simulates every store)"
            )
        try:
            exists = backend.exists(mount.bucket)
            if not mount.managed or allowed.via.startswith(("user:", "team:")):
                if not exists:
                    raise StorageFailure(
                        f"{mount.field}: bucket {bucket_url(store, mount.bucket)} does not exist"
                    )
                continue
            if record is None and _being_deleted(settings, mount.bucket):
                raise StorageBusy(
                    f"{mount.field}: bucket {mount.bucket} is being deleted by the job that last used it"
                )
            if record is None and exists:  # in the account, but not made by skyless for anyone: not theirs
                raise StorageFailure(
                    f"{mount.field}: bucket {mount.bucket} exists and skyless did not create it for you; "
                    f"an admin may grant it: {grant_command(mount.bucket, mount.prefix, job.owner)}"
                )
            if record is None:
                record = claim_bucket(
                    settings,
                    bucket=mount.bucket,
                    store=store,
                    owner=job.owner,
                    created_by=job.job_id,
                    persistent=mount.persistent,
                )
                if record is None:
                    raise StorageFailure(
                        f"{mount.field}: bucket {mount.bucket} belongs to another skyless user"
                    )
            if (
                record.created_by
                and not record.persistent
                and not join_bucket(settings, mount.bucket, job.job_id)
            ):
                raise StorageBusy(
                    f"{mount.field}: bucket {mount.bucket} is being deleted by the job that last used it"
                )
            if not exists:
                backend.create(mount.bucket)
                kept = "kept after the job" if record.persistent else "deleted when the job ends"
                notes.append(f"bucket {bucket_url(store, mount.bucket)} created for {mount.path} ({kept})")
            if record.created_by is not None:
                notes += _expire(backends, backend, store, mount.bucket, fresh=not exists)
                if exists:
                    notes += _trim(backends, backend, store, mount.bucket)
        except StoreError as error:
            raise StorageFailure(f"{mount.field}: {error}") from None
    return notes


def node_storage(settings: Any, job: Any, task: Any, cloud: str, *, session: str) -> list[dict[str, Any]]:
    """Each bucket mount as the node reaches it: path, mode, and credentials scoped to it alone."""
    backends = StorageBackends(settings)
    facts, walls = RegistryFacts(settings), StorageWalls.of(settings)
    entries: list[dict[str, Any]] = []
    for mount in job_bucket_mounts(settings, task):
        allowed = _reach(mount, job.owner, facts, walls)
        if allowed.via == "new":  # prepare_job_storage claims every bucket it creates before any node asks
            raise StorageFailure(f"{mount.field}: bucket {mount.bucket} is not (yet) yours")
        record = find_bucket(settings, mount.bucket) if mount.managed else None
        store = mount.store or (record.store if record else backends.store_for_cloud(cloud))
        backend = _backend(backends, store, mount)
        try:
            access = backend.node_access(
                mount.bucket, mount.prefix, read_only=allowed.read_only, session=session
            )
        except StoreError as error:
            raise StorageFailure(f"{mount.field}: {error}") from None
        entries.append(
            {
                "path": mount.path,
                "mode": mount.mode,
                "store": store,
                "bucket": mount.bucket,
                "prefix": mount.prefix,
                "write_back": not allowed.read_only,
                **access,
            }
        )
    return entries


def release_job_storage(settings: Any, job: Any, tasks: list[Any]) -> list[str]:
    """At job end: leave the non-persistent buckets skyless created, and delete those no other job uses any
    more. Idempotent."""
    backends = StorageBackends(settings)
    notes: list[str] = []
    for task in tasks:
        for mount in job_bucket_mounts(settings, task):
            record = find_bucket(settings, mount.bucket, any_state=True) if mount.managed else None
            if record is None or record.created_by is None:
                continue
            backend = backends.for_store(record.store)
            if backend is None:
                continue
            if record.persistent or not leave_bucket(settings, mount.bucket, job.job_id):
                # kept (for itself, or for the other jobs still using it): trimmed to its last N, if set,
                # never by a job another user's grant lets read it
                if record.owner == job.owner and record.state == ACTIVE:
                    notes += _trim(backends, backend, record.store, mount.bucket)
                continue
            backend.delete(mount.bucket)
            if mark_deleted(settings, mount.bucket, job.job_id):
                notes.append(f"bucket {bucket_url(record.store, mount.bucket)} deleted (persistent: false)")
    return notes


def _being_deleted(settings: Any, bucket: str) -> bool:
    record = find_bucket(settings, bucket, any_state=True)
    return record is not None and record.state == DELETING


def _expire(
    backends: StorageBackends, backend: BucketBackend, store: str, bucket: str, *, fresh: bool
) -> list[str]:
    """The deployment's lifecycle rule on a bucket skyless created, set at each launch (idempotent, so a
    launch that died between creating the bucket and this finishes it); a note the first time."""
    days = backends.config.expire_days
    if not days:
        return []
    if not isinstance(backend, Expirable):
        return (
            [f"bucket {bucket_url(store, bucket)}: no lifecycle rule on this store; objects are kept"]
            if fresh
            else []
        )
    backend.set_expiry(bucket, days)
    return (
        [f"bucket {bucket_url(store, bucket)}: objects expire {days} days after they are written"]
        if fresh
        else []
    )


def _trim(backends: StorageBackends, backend: BucketBackend, store: str, bucket: str) -> list[str]:
    """The deployment's "keep the last N objects per prefix" on a bucket skyless created (shared.storage.
    retention); S3-compatible stores only."""
    keep = backends.config.keep_last
    if not keep or not isinstance(backend, S3Backend):
        return []
    from shared.storage.retention import trim_to_last

    url = bucket_url(store, bucket)
    try:
        deleted = trim_to_last(backend.s3, bucket, keep)
    except StoreError as error:  # a launch or a job's end goes on: the next one trims again
        return [f"bucket {url}: not trimmed ({error})"]
    return (
        [f"bucket {url}: {deleted} older object(s) deleted, the last {keep} per prefix kept"]
        if deleted
        else []
    )


def _reach(mount: BucketMount, owner: str, facts: RegistryFacts, walls: StorageWalls) -> Reach:
    """The rule again, at launch and at each credentials request: a grant revoked since submit ends here."""
    try:
        return reach(use_of(mount), user_id=owner, facts=facts, walls=walls)
    except UserError as error:
        raise StorageFailure(f"{mount.field}: {error.message}") from None


def _backend(backends: StorageBackends, store: str, mount: BucketMount) -> BucketBackend:
    backend = backends.for_store(store)
    if backend is None:
        raise StorageFailure(f"{mount.field}: no {store} store is configured")
    return backend


def _foreign_account(backends: StorageBackends, mount: BucketMount) -> str | None:
    """Why an Azure URL's storage account cannot be served: skyless holds the key of one account (the
    local store simulates every account)."""
    if mount.account is None or backends.backend_name("azure") != "azure":
        return None
    ours = backends.config.azure_account
    if mount.account == ours:
        return None
    return f"storage account {mount.account} is not reached by this deployment (its Azure account is {ours})"


def _azure_prefix(backends: StorageBackends, mount: BucketMount, store: str | None) -> str | None:
    """Why a prefix of an Azure container cannot be mounted: a SAS names a whole container or one blob."""
    if not mount.prefix or store != "azure" or backends.backend_name("azure") != "azure":
        return None
    return (
        f"a prefix of an Azure container ({mount.prefix}/) cannot be given to a node alone: a SAS names "
        "a whole container or one blob; mount the whole container"
    )
