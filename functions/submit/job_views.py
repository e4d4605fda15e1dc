"""Between the API's bodies and the job operations in `shared.jobs`: call one operation, shape its answer."""

from __future__ import annotations

import re
import uuid
from typing import Any

import yaml

from shared.api_models import (
    PlanRequest,
    UploadRequest,
    UploadResponse,
)
from shared.catalog import load_default_catalog
from shared.config import Settings
from shared.errors import TaskFileError, UserError
from shared.object_store import S3ObjectStore
from shared.store.users import User
from shared.task_loader import load_pipeline
from shared.task_spec import Pipeline

MAX_UPLOAD_BYTES = 2 * 1024**3
UPLOAD_PREFIX = "uploads"


def read_task(body: PlanRequest) -> Pipeline:
    """The validated pipeline, or a TaskFileError naming file/line/field."""
    try:
        return load_pipeline(body.task_text(), filename=body.filename, env_overrides=body.env)
    except yaml.YAMLError as exc:  # what the parser lets through (e.g. control characters in the text)
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise TaskFileError(f"not readable as YAML: {exc}", file=body.filename, line=line) from None


def dry_run(body: PlanRequest) -> dict[str, Any]:
    from shared.optimizer import plan_pipeline

    pipeline = read_task(body)
    clouds = {c.lower() for c in body.clouds} if body.clouds else None
    plan = plan_pipeline(pipeline, load_default_catalog(), enabled_clouds=clouds, minimize=body.minimize)
    return plan.model_dump(mode="json")


def upload(settings: Settings, caller: User, body: UploadRequest) -> UploadResponse:
    if body.size_bytes is not None and body.size_bytes > MAX_UPLOAD_BYTES:
        raise UserError(f"a workdir tarball may be at most {MAX_UPLOAD_BYTES} bytes", field="size_bytes")
    name = re.sub(r"[^A-Za-z0-9._-]", "_", body.filename) or "workdir.tar.gz"
    key = f"{upload_prefix(caller)}{uuid.uuid4().hex}/{name}"
    return UploadResponse(key=key, url=S3ObjectStore(settings).presigned_put(key))


def upload_prefix(caller: User) -> str:
    return f"{UPLOAD_PREFIX}/{caller.user_id}/"


def check_workdir_key(caller: User, workdir_key: str | None) -> None:
    """A job may only use a tarball its owner uploaded."""
    if workdir_key is not None and (
        not workdir_key.startswith(upload_prefix(caller)) or ".." in workdir_key.split("/")
    ):
        raise UserError("not a key that POST /uploads gave you", field="workdir_key")
