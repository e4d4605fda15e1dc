"""`--data-size` (launch, plan): how much a job reads from the buckets it mounts, for the optimizer's egress.

A skyless option, not a task-file field (task files stay SkyPilot's): `--data-size 2TB` for a job reading
one bucket, or `--data-size s3://bucket/prefix=500GB` once per bucket. Without it, the bucket's listed size.
"""

from __future__ import annotations

import re
from typing import Annotated

import typer

from shared.errors import UserError

DataSize = Annotated[
    list[str] | None,
    typer.Option(
        "--data-size",
        help="What the job reads (skyless only): 2TB for its one bucket, or s3://bucket=500GB per bucket; "
        "the plan prices reading it from each place. Default: the bucket's listed size.",
    ),
]
SKYLESS_ONLY = (
    "--data-size: a skyless option (SkyPilot prices egress between chained tasks only, never the reading "
    "of mounted buckets)"
)
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(gb|tb|g|t)?\s*$", re.IGNORECASE)


def data_sizes(values: list[str] | None) -> dict[str, float] | None:
    """{"*": GB} or {bucket URL: GB}; UserError naming --data-size for anything else."""
    if not values:
        return None
    sizes: dict[str, float] = {}
    for value in values:
        url, _, size = value.rpartition("=") if "://" in value else ("", "", value)
        if "://" in value and not url:
            raise UserError(f"{value!r}: give the size after the bucket", field="--data-size",
                            hint="--data-size s3://bucket=500GB")  # fmt: skip
        sizes[url or "*"] = gigabytes(size)
    return sizes


def gigabytes(text: str) -> float:
    match = _SIZE.match(text)
    if match is None:
        raise UserError(f"{text!r} is not a size", field="--data-size", hint="e.g. 500GB, 2TB or 750 (GB)")
    unit = (match.group(2) or "gb").lower()[0]
    return float(match.group(1)) * (1000.0 if unit == "t" else 1.0)
