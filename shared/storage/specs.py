"""Which buckets a task's `file_mounts` name, and how each reaches the node (pure, no I/O).

SkyPilot's forms, as skyless reads them:
- `/data: s3://bucket/prefix` (also `gs://`, `r2://`, and Azure's `az://account/container/prefix` or
  `https://account.blob.core.windows.net/container/prefix`): an existing bucket, copied to the node (COPY),
  read-only, never created or deleted by skyless. An Azure container is the bucket; its storage account is
  kept beside it (`account`), and must be the one the deployment's Azure store holds.
- `/ckpt: {name: b, store: s3, mode: MOUNT_CACHED, persistent: false}`: bucket `b`, created when missing
  (in the job's cloud's store unless `store` says otherwise), mounted (MOUNT, MOUNT_CACHED) or copied
  (COPY), deleted at job end only when skyless created it and `persistent` is false.
- `/data: {source: s3://b/p, mode: MOUNT}`: an existing bucket in any mode.
Refused with the field named: stores skyless does not reach (IBM, OCI, ...), a list of sources,
a local folder as a bucket's source, nested bucket mounts.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

from shared.errors import UserError

SCHEMES = {"s3": "s3", "gs": "gcs", "r2": "r2", "az": "azure"}  # URL scheme -> store
SCHEME_OF_STORE = {store: scheme for scheme, store in SCHEMES.items()}
STORES = {"S3": "s3", "GCS": "gcs", "R2": "r2", "AZURE": "azure"}  # a storage object's `store` -> store
AZURE_HOST = ".blob.core.windows.net"
COPY, MOUNT, MOUNT_CACHED = "COPY", "MOUNT", "MOUNT_CACHED"
_S3_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_GCS_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$")
_AZURE_CONTAINER = re.compile(r"^[a-z0-9](?!.*--)[a-z0-9-]{1,61}[a-z0-9]$")
_AZURE_ACCOUNT = re.compile(r"^[a-z0-9]{3,24}$")
NAME_RULES = {
    "gcs": (_GCS_NAME, "3-63 lowercase letters, digits, dots, hyphens and underscores"),
    "azure": (_AZURE_CONTAINER, "3-63 lowercase letters, digits and single hyphens (an Azure container)"),
}
_S3_RULE = "3-63 lowercase letters, digits, dots and hyphens"


@dataclass(frozen=True)
class BucketMount:
    """One bucket (or a prefix of it) at one path of the node."""

    path: str  # where it lands, as the task file writes it (`/checkpoint`, `~/data`)
    store: str | None  # s3 | gcs | r2 | azure; None: the store of the cloud the job runs on (decided once)
    bucket: str
    prefix: str  # "" or "a/b": the part of the bucket that is mounted
    mode: str  # COPY | MOUNT | MOUNT_CACHED
    persistent: bool
    managed: bool  # a storage object's `name`: created when missing; deletable when not persistent
    read_only: bool
    account: str | None = None  # Azure: the storage account the URL names (None: the deployment's)

    @property
    def field(self) -> str:
        return f"file_mounts.{self.path}"

    @property
    def write_back(self) -> bool:
        """Changes the task makes go back to the bucket (MOUNT, MOUNT_CACHED)."""
        return self.mode != COPY and not self.read_only

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def is_bucket_url(source: object) -> bool:
    if not isinstance(source, str) or "://" not in source:
        return False
    scheme, rest = source.split("://", 1)
    return scheme in SCHEMES or (scheme == "https" and rest.partition("/")[0].endswith(AZURE_HOST))


def split_bucket_url(url: str) -> tuple[str, str, str, str | None]:
    """`gs://b/a/b/` -> ("gcs", "b", "a/b", None); `az://acct/c/p` and
    `https://acct.blob.core.windows.net/c/p` -> ("azure", "c", "p", "acct")."""
    scheme, rest = url.split("://", 1)
    account = None
    if scheme == "https":
        host, _, rest = rest.partition("/")
        scheme, account = "az", host.removesuffix(AZURE_HOST)
    elif scheme == "az":
        account, _, rest = rest.partition("/")
    bucket, _, prefix = rest.partition("/")
    return SCHEMES[scheme], bucket, prefix.strip("/"), account


def bucket_url(store: str, bucket: str, account: str | None = None) -> str:
    """How messages name a bucket: `gs://b`, `az://account/container`."""
    where = f"{account}/{bucket}" if account else bucket
    return f"{SCHEME_OF_STORE[store]}://{where}"


def bucket_mounts(task: Any, *, filename: str | None = None) -> list[BucketMount]:
    """Every bucket mount of `task`; UserError (field named) for one skyless cannot serve. Whose bucket
    it may be (never skyless's own) is shared.storage.access's rule."""
    found: list[BucketMount] = []
    for path, source in (task.file_mounts or {}).items():
        field = f"file_mounts.{path}"
        if isinstance(source, str):
            if not is_bucket_url(source):
                continue
            store, bucket, prefix, account = split_bucket_url(source)
            found.append(BucketMount(path, store, bucket, prefix, COPY, True, False, True, account))
        else:
            found.append(_storage_object(path, source, field, filename))
    for mount in found:
        _check_name(mount, filename)
        _check_path(mount, filename)
    _check_not_nested(found, filename)
    return found


def _storage_object(path: str, spec: Any, field: str, filename: str | None) -> BucketMount:
    def refuse(message: str, sub: str = "", hint: str | None = None) -> UserError:
        return UserError(message, file=filename, field=field + (f".{sub}" if sub else ""), hint=hint)

    store = None
    if spec.store is not None:
        store = STORES.get(spec.store)
        if store is None:
            raise refuse(f"store {spec.store} is not reached by skyless", "store", "use s3, gcs, r2 or azure")
    mode = spec.mode or MOUNT
    config = spec.config
    read_only = bool(
        config
        and (
            (config.mount and config.mount.read_only)
            or (config.mount_cached and config.mount_cached.read_only)
        )
    )
    persistent = True if spec.persistent is None else bool(spec.persistent)
    source = spec.source
    if isinstance(source, list):
        raise refuse(
            "a list of sources is not supported by skyless", "source", "mount each bucket separately"
        )
    if source is None:
        prefix = (spec.bucket_sub_path or "").strip("/")
        return BucketMount(path, store, spec.name, prefix, mode, persistent, True, read_only)
    if not is_bucket_url(source):
        if "://" in source:
            scheme = source.split("://", 1)[0]
            raise refuse(
                f"{scheme}:// buckets are not reached by skyless",
                "source",
                "use s3://, gs://, r2://, az:// or https://<account>.blob.core.windows.net/",
            )
        raise refuse(
            "a local folder as a bucket's source is not uploaded by skyless",
            "source",
            "mount the folder itself (file_mounts: {PATH: ./folder}), or copy it to the bucket first",
        )
    url_store, bucket, prefix, account = split_bucket_url(source)
    if store is not None and store != url_store:
        raise refuse(f"store {spec.store} does not match the source {source}", "store")
    if spec.name is not None and spec.name != bucket:
        raise refuse(f"name {spec.name!r} is not the source's bucket {bucket!r}", "name")
    return BucketMount(path, url_store, bucket, prefix, mode, True, False, read_only, account)


def _check_name(mount: BucketMount, filename: str | None) -> None:
    rule, what = NAME_RULES.get(mount.store or "", (_S3_NAME, _S3_RULE))
    if not rule.match(mount.bucket or "") or ".." in mount.bucket:
        raise UserError(
            f"{mount.bucket!r} is not a valid bucket name",
            file=filename,
            field=mount.field,
            hint=f"{what}; first and last a letter or digit",
        )
    if mount.account is not None and not _AZURE_ACCOUNT.match(mount.account):
        raise UserError(
            f"{mount.account!r} is not a valid Azure storage account name",
            file=filename,
            field=mount.field,
            hint="3-24 lowercase letters and digits, e.g. az://myaccount/mycontainer/path",
        )


def _check_path(mount: BucketMount, filename: str | None) -> None:
    path = mount.path
    if not (path.startswith("/") or path == "~" or path.startswith("~/")) or ".." in path.split("/"):
        raise UserError(
            "a bucket's mount path must be absolute or under ~/",
            file=filename,
            field=mount.field,
            hint="e.g. /checkpoint or ~/checkpoint",
        )
    if path.rstrip("/") in ("", "~"):
        raise UserError("a bucket cannot be mounted over / or ~", file=filename, field=mount.field)


def _check_not_nested(mounts: list[BucketMount], filename: str | None) -> None:
    paths = sorted(m.path.rstrip("/") for m in mounts)
    for outer, inner in itertools.pairwise(paths):
        if inner.startswith(outer + "/"):
            raise UserError(
                f"bucket mounts cannot be nested ({inner} is inside {outer})",
                file=filename,
                field=f"file_mounts.{inner}",
            )
