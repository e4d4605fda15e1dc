"""Cluster names as users give them (SkyPilot's rule), and the ids skyless gives clusters behind them."""

from __future__ import annotations

import re
import uuid

from shared.errors import UserError

# SkyPilot's rule (sky/utils/common_utils.py: check_cluster_name_is_valid), with its 63-character cap.
NAME_PATTERN = re.compile(r"^[a-zA-Z]([-_.a-zA-Z0-9]*[a-zA-Z0-9])?$")
MAX_NAME_CHARS = 63
KEY_PREFIX = "cl-"  # a cluster's id; the job tag of its nodes, so the reaper knows whom to ask
RESERVED_PREFIX = "job-"  # skyless job ids: `skyless logs job-…` must never mean a cluster


def check_cluster_name(name: str, *, field: str = "cluster") -> str:
    """The name, or a UserError saying what a name may be."""
    if not name or len(name) > MAX_NAME_CHARS or not NAME_PATTERN.match(name):
        raise UserError(
            f"{name[:80]!r} is not a valid cluster name",
            field=field,
            hint="start with a letter; then letters, digits, '-', '_' or '.'; end with a letter or digit; "
            f"at most {MAX_NAME_CHARS} characters",
        )
    if name.lower().startswith(RESERVED_PREFIX):
        raise UserError(
            f"cluster names may not start with {RESERVED_PREFIX!r} (that is how skyless job ids look)",
            field=field,
        )
    return name


def new_cluster_key() -> str:
    return f"{KEY_PREFIX}{uuid.uuid4().hex[:12]}"


def is_cluster_key(value: str | None) -> bool:
    return bool(value) and str(value).startswith(KEY_PREFIX)


def provider_cluster_id(key: str, incarnation: int) -> str:
    """What the cloud calls one launch of the cluster: tag value, launch idempotency key, sandbox folder.
    A relaunch after a failed launch is a new incarnation; a stop and start keeps the same nodes and id."""
    return f"{key}-{incarnation}"
