"""Which `file_mounts` skyless brings to a node, and how.

- a local path (file or folder): the CLI uploads it as a tarball (POST /uploads) and submits the key in
  `file_mount_keys` {remote path: key}; the node unpacks it at the remote path.
- `https://` / `http://`: the node downloads the URL to the remote path.
- buckets (`s3://`, `gs://`, `r2://`) and storage objects (name/source/store/mode): shared.storage, whose
  rule (shared.storage.access) also refuses skyless's own bucket in every spelling, web URLs included.
- any other scheme: refused at submit, naming the field, rather than silently left out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from shared.errors import UserError
from shared.storage.access import StorageWalls, names_skyless_bucket, refuse_skyless_bucket
from shared.storage.specs import is_bucket_url

UPLOAD_PREFIX = "uploads"
WEB_SCHEMES = ("https://", "http://")
MountKind = Literal["upload", "web"]


@dataclass(frozen=True)
class MountSource:
    path: str  # where it lands on the node
    kind: MountKind
    source: str  # the local path or the URL


def upload_prefix(user_id: str) -> str:
    return f"{UPLOAD_PREFIX}/{user_id}/"


def is_local_source(source: object) -> bool:
    return isinstance(source, str) and "://" not in source


def local_mounts(task: Any) -> dict[str, str]:
    """{remote path: local path} of the task's file mounts the client must upload."""
    return {path: src for path, src in (task.file_mounts or {}).items() if is_local_source(src)}


def mount_sources(task: Any, *, walls: StorageWalls | None, filename: str | None = None) -> list[MountSource]:
    """Each file mount of `task` as what fetches it; a UserError for one skyless cannot (or may not) fetch.
    With `walls` None (a client that does not know the deployment), skyless's own bucket is not looked for."""
    found: list[MountSource] = []
    for path, source in (task.file_mounts or {}).items():
        field = f"file_mounts.{path}"
        if not isinstance(source, str):
            problem = source.launch_problem()  # SkyPilot refuses these at launch, not at plan
            if problem:
                raise UserError(problem, file=filename, field=field)
            continue  # a storage object: shared.storage
        if walls is not None and names_skyless_bucket(source, walls):
            raise refuse_skyless_bucket(field, filename)
        if is_local_source(source):
            found.append(MountSource(path, "upload", source))
        elif source.startswith("https://") and is_bucket_url(source):
            continue  # an Azure container (https://<account>.blob.core.windows.net/...): shared.storage
        elif source.lower().startswith(WEB_SCHEMES):
            found.append(MountSource(path, "web", source))
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
    pipeline: Any,
    keys: dict[str, str],
    *,
    owner: str,
    walls: StorageWalls,
    filename: str | None = None,
    text: str | None = None,
) -> None:
    """Refuse at submit what no node could fetch or may not: unknown sources, local paths nobody uploaded,
    keys that are not the caller's uploads, any spelling of skyless's own bucket. With the task file's
    `text`, the error names the line too."""
    try:
        _check_file_mounts(pipeline, keys, owner=owner, walls=walls, filename=filename)
    except UserError as error:
        if text is not None and error.line is None and (error.field or "").startswith("file_mounts."):
            from shared.storage.lifecycle import line_of_mount_field

            error.line = line_of_mount_field(text, pipeline, error.field or "")
        raise


def _check_file_mounts(
    pipeline: Any, keys: dict[str, str], *, owner: str, walls: StorageWalls, filename: str | None
) -> None:
    mine = upload_prefix(owner)
    for remote, key in keys.items():
        if not key.startswith(mine) or ".." in key.split("/"):
            raise UserError("not a key that POST /uploads gave you", field=f"file_mount_keys.{remote}")
    for task in pipeline.tasks:
        for mount in mount_sources(task, walls=walls, filename=filename):
            if mount.kind == "upload" and mount.path not in keys:
                raise UserError(
                    f"{mount.source} is a local path and was not uploaded",
                    file=filename,
                    field=f"file_mounts.{mount.path}",
                    hint="use `skyless launch`, or upload it (POST /uploads) and pass file_mount_keys",
                )


def encode_keys(keys: dict[str, str]) -> str | None:
    return json.dumps(keys, sort_keys=True) if keys else None


def decode_keys(text: str | None) -> dict[str, str]:
    return dict(json.loads(text)) if text else {}


def node_file_mounts(
    objects: Any, walls: StorageWalls, task: Any, keys: dict[str, str]
) -> list[dict[str, Any]]:
    """What the agent fetches: `[{path, url, archive}]`; `archive` is a tarball to unpack at `path`. The
    rule is asked again here (a job recorded before it, or a record changed since): UserError."""
    mounts: list[dict[str, Any]] = []
    for mount in mount_sources(task, walls=walls):
        if mount.kind == "upload":
            url, archive = objects.presigned_get(keys[mount.path]), True
        else:
            url, archive = mount.source, False
        mounts.append({"path": mount.path, "url": url, "archive": archive})
    return mounts
