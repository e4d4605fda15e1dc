"""Which `file_mounts` skyless brings to a node, and how.

- a local path (file or folder): the CLI uploads it as a tarball (POST /uploads) and submits the key in
  `file_mount_keys` {remote path: key}; the node unpacks it at the remote path.
- `https://` / `http://`: the node downloads the URL to the remote path.
- `s3://<the skyless bucket>/<key>`: the node downloads the object through a presigned GET (not under
  `runs/`, nor another user's `uploads/`).
- other buckets (`s3://`, `gs://`, `r2://`) and storage objects (name/source/store/mode): shared.storage.
- any other scheme: refused at submit, naming the field, rather than silently left out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from shared.errors import UserError
from shared.storage.specs import is_bucket_url

UPLOAD_PREFIX = "uploads"
WEB_SCHEMES = ("https://", "http://")
MountKind = Literal["upload", "web", "bucket"]


@dataclass(frozen=True)
class MountSource:
    path: str  # where it lands on the node
    kind: MountKind
    source: str  # the local path, the URL, or the bucket key


def upload_prefix(user_id: str) -> str:
    return f"{UPLOAD_PREFIX}/{user_id}/"


def is_local_source(source: object) -> bool:
    return isinstance(source, str) and "://" not in source


def local_mounts(task: Any) -> dict[str, str]:
    """{remote path: local path} of the task's file mounts the client must upload."""
    return {path: src for path, src in (task.file_mounts or {}).items() if is_local_source(src)}


def mount_sources(task: Any, *, bucket: str | None, filename: str | None = None) -> list[MountSource]:
    """Each file mount of `task` as what fetches it; a UserError for one skyless cannot fetch.
    With `bucket` None (a client that does not know it), every s3:// source is let through."""
    found: list[MountSource] = []
    for path, source in (task.file_mounts or {}).items():
        field = f"file_mounts.{path}"
        if not isinstance(source, str):
            problem = source.launch_problem()  # SkyPilot refuses these at launch, not at plan
            if problem:
                raise UserError(problem, file=filename, field=field)
            continue  # a storage object: shared.storage
        if is_local_source(source):
            found.append(MountSource(path, "upload", source))
        elif source.startswith("https://") and is_bucket_url(source):
            continue  # an Azure container (https://<account>.blob.core.windows.net/...): shared.storage
        elif source.startswith(WEB_SCHEMES):
            found.append(MountSource(path, "web", source))
        elif bucket is None and source.startswith("s3://"):
            found.append(MountSource(path, "bucket", source))
        elif source.startswith(f"s3://{bucket}/"):
            found.append(MountSource(path, "bucket", source[len(f"s3://{bucket}/") :]))
        elif is_bucket_url(source):
            continue  # a bucket of its own: shared.storage
        else:
            scheme = source.split("://", 1)[0]
            raise UserError(
                f"{scheme}:// sources are not fetched by skyless",
                file=filename,
                field=field,
                hint="use a local path, an https:// URL, or an s3://, gs://, r2:// or az:// bucket",
            )
    return found


def check_file_mounts(
    pipeline: Any, keys: dict[str, str], *, owner: str, bucket: str, filename: str | None = None
) -> None:
    """Refuse at submit what no node could fetch: unknown sources, local paths nobody uploaded,
    keys that are not the caller's uploads, bucket objects the caller may not read."""
    mine = upload_prefix(owner)
    for remote, key in keys.items():
        if not key.startswith(mine) or ".." in key.split("/"):
            raise UserError("not a key that POST /uploads gave you", field=f"file_mount_keys.{remote}")
    for task in pipeline.tasks:
        for mount in mount_sources(task, bucket=bucket, filename=filename):
            field = f"file_mounts.{mount.path}"
            if mount.kind == "upload" and mount.path not in keys:
                raise UserError(
                    f"{mount.source} is a local path and was not uploaded",
                    file=filename,
                    field=field,
                    hint="use `skyless launch`, or upload it (POST /uploads) and pass file_mount_keys",
                )
            readable = not mount.source.startswith(f"{UPLOAD_PREFIX}/") or mount.source.startswith(mine)
            if mount.kind == "bucket" and (mount.source.startswith("runs/") or not readable):
                raise UserError("that object of the skyless bucket is not yours to mount", field=field)


def encode_keys(keys: dict[str, str]) -> str | None:
    return json.dumps(keys, sort_keys=True) if keys else None


def decode_keys(text: str | None) -> dict[str, str]:
    return dict(json.loads(text)) if text else {}


def node_file_mounts(objects: Any, bucket: str, task: Any, keys: dict[str, str]) -> list[dict[str, Any]]:
    """What the agent fetches: `[{path, url, archive}]`; `archive` is a tarball to unpack at `path`."""
    mounts: list[dict[str, Any]] = []
    for mount in mount_sources(task, bucket=bucket):
        if mount.kind == "upload":
            url, archive = objects.presigned_get(keys[mount.path]), True
        elif mount.kind == "bucket":
            url, archive = objects.presigned_get(mount.source), False
        else:
            url, archive = mount.source, False
        mounts.append({"path": mount.path, "url": url, "archive": archive})
    return mounts
