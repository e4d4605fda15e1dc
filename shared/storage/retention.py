"""Keep the last N objects per prefix in the buckets skyless created: S3 has no such lifecycle rule, so it
is trimmed here, when a job's attempt launches and when the job ends (the provision function, which holds
the task buckets' list and delete rights already). Only the job's own skyless-made buckets are read, each
listing is bounded (`MAX_LISTED`), and only objects older than N others seen under the same prefix are
deleted: a listing cut short can leave extra objects, never delete one of the newest N.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from botocore.exceptions import ClientError

from shared.storage.store_errors import StoreError

MAX_LISTED = 10_000
DELETE_BATCH = 1000  # S3 DeleteObjects' limit


def trim_to_last(s3: Any, bucket: str, keep: int, *, max_listed: int = MAX_LISTED) -> int:
    """Delete all but the `keep` newest objects under each prefix (a key's part before its last `/`) among
    the first `max_listed` objects listed. Answers how many were deleted; StoreError when S3 refuses."""
    by_prefix: dict[str, list[tuple[Any, str]]] = defaultdict(list)
    try:
        pages = s3.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, PaginationConfig={"MaxItems": max_listed, "PageSize": 1000}
        )
        for page in pages:
            for item in page.get("Contents", []):
                by_prefix[item["Key"].rpartition("/")[0]].append((item["LastModified"], item["Key"]))
        old = [key for seen in by_prefix.values() for _, key in sorted(seen, reverse=True)[keep:]]
        for start in range(0, len(old), DELETE_BATCH):
            batch = [{"Key": key} for key in old[start : start + DELETE_BATCH]]
            s3.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code")
        raise StoreError(
            f"could not trim bucket {bucket} to its last {keep} objects per prefix: {code}"
        ) from None
    return len(old)
