"""`runs/<job>/status.json`: a run's status beside its logs and outputs, for whoever reads the bucket.

Written at submission (uploads, schedule firings) and when the job ends: the events table's stream
carries each terminal `state` event to `record_finished_runs` (the submit function in AWS; the local
dispatcher's stream reader). Rewriting it is harmless, so redelivered records need no bookkeeping.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from shared.aws.stream_images import plain_image
from shared.config import Settings

TERMINAL_STATES = ("SUCCEEDED", "FAILED", "FAILED_SETUP", "FAILED_NO_RESOURCE", "CANCELLED")


def status_key(job_id: str) -> str:
    return f"runs/{job_id}/status.json"


def write_run_status(
    settings: Settings, job_id: str, state: str, *, source: dict[str, Any] | None = None, **facts: Any
) -> None:
    """Write the status, keeping what an earlier write said (e.g. the upload it came from)."""
    from shared.wiring import wiring_for

    objects = wiring_for(settings).objects
    earlier: dict[str, Any] = {}
    if source is None:
        try:
            earlier = json.loads(objects.get_text(status_key(job_id)) or "{}")
        except ValueError:
            earlier = {}
    status = {**earlier, "job_id": job_id, "state": state, "updated_at": time.time(), **facts}
    if source is not None:
        status["source"] = source
    objects.put_text(status_key(job_id), json.dumps(status))


def record_finished_runs(settings: Settings, records: Iterable[dict[str, Any]]) -> list[str]:
    """Events-table stream records (NEW_IMAGE) -> status.json for each job that ended. Answers the
    sequence numbers of records that failed (to be retried)."""
    failed: list[str] = []
    for record in records:
        stream = record.get("dynamodb") or {}
        try:
            image = plain_image(stream.get("NewImage") or {})
            job_id, state = image.get("job_id"), image.get("state")
            if (
                image.get("kind") != "state"
                or state not in TERMINAL_STATES
                or not str(job_id).startswith("job-")
            ):
                continue
            write_run_status(
                settings, str(job_id), str(state), finished_at=time.time(), reason=image.get("message")
            )
        except Exception:
            failed.append(str(stream.get("SequenceNumber")))
    return failed
