"""What the index attributes of a record hold, so that periodic functions and listings read what is live or
asked for, never the whole history. Both job stores and the named-cluster store set them in the very write
that changes a record's state:

- `live`: set only while a job, a cluster record or a named cluster is live; the tables' sparse `live-index`
  holds exactly those records, and the sweeps (reconcile, the reaper, the named-cluster sweep) query it.
- `owner_state` (`<owner>#<state>`): the jobs table's `owner-state-index`, for a state filter at any history.
- `created_day` (`YYYY-MM-DD`, UTC): the jobs table's `created-day-index`, for the all-users cost report.
- `expires_at`: DynamoDB's TTL attribute (epoch seconds); a finished record expires `retention` after it ends,
  a timeline event `retention` after it was written.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from shared.states import LIVE

LIVE_JOB = "job"
LIVE_CLUSTER = "cluster"
LIVE_NAMED_CLUSTER = "named-cluster"
LIVE_STATES = frozenset(s.value for s in LIVE)


def owner_state(owner: str, state: str) -> str:
    return f"{owner}#{state}"


def day_of(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d")


def job_state_fields(owner: str, state: str, now: float, retention_seconds: int) -> dict[str, Any]:
    """The index attributes a job in `state` holds from `now` on (None: removed)."""
    live = state in LIVE_STATES
    return {
        "live": LIVE_JOB if live else None,
        "owner_state": owner_state(owner, state),
        "expires_at": None if live else int(now + retention_seconds),
    }


def cluster_state_fields(state: str, now: float, retention_seconds: int) -> dict[str, Any]:
    """The index attributes of a job's cluster record in `state` ("UP" | "TERMINATED")."""
    up = state == "UP"
    return {"live": LIVE_CLUSTER if up else None, "expires_at": None if up else int(now + retention_seconds)}
