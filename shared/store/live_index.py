"""What the index attributes of a record hold, so that periodic functions and listings read what is live or
asked for, never the whole history. Both job stores and the named-cluster store set them in the very write
that changes a record's state:

- `live`: set only while a job, a cluster record or a named cluster is live; the tables' sparse `live-index`
  holds exactly those records, and the sweeps (reconcile, the reaper, the named-cluster sweep) query it.
  Its value is one of `LIVE_SHARDS` partition keys per kind, chosen by the record's id (`live_key`), so the
  index's writes (every write of a live record: the index projects whole items, heartbeats included) spread
  over that many partitions instead of one partition's ~1,000 write units a second; a sweep queries each
  (`live_keys`). Shard 0 is the bare kind, the value every record had before the index was sharded, so those
  records stay in the sweeps with no upgrade step.
- `owner_state` (`<owner>#<state>`): the jobs table's `owner-state-index`, for a state filter at any history.
- `created_day` (`YYYY-MM-DD`, UTC): the jobs table's `created-day-index`, for the all-users cost report.
- `expires_at`: DynamoDB's TTL attribute (epoch seconds); a finished record expires `retention` after it ends,
  a timeline event `retention` after it was written.
"""

from __future__ import annotations

import zlib
from datetime import UTC, datetime
from typing import Any

from shared.states import LIVE

LIVE_JOB = "job"
LIVE_CLUSTER = "cluster"
LIVE_NAMED_CLUSTER = "named-cluster"
LIVE_STATES = frozenset(s.value for s in LIVE)
LIVE_SHARDS = 8


def live_key(kind: str, record_id: str) -> str:
    """The live index partition of the record `record_id` of `kind` (stable: a function of the id)."""
    shard = zlib.crc32(record_id.encode()) % LIVE_SHARDS
    return kind if shard == 0 else f"{kind}#{shard}"


def live_keys(kind: str) -> list[str]:
    """Every live index partition of `kind`: what a sweep queries."""
    return [kind, *(f"{kind}#{shard}" for shard in range(1, LIVE_SHARDS))]


def owner_state(owner: str, state: str) -> str:
    return f"{owner}#{state}"


def day_of(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d")


def job_state_fields(
    job_id: str, owner: str, state: str, now: float, retention_seconds: int
) -> dict[str, Any]:
    """The index attributes a job in `state` holds from `now` on (None: removed)."""
    live = state in LIVE_STATES
    return {
        "live": live_key(LIVE_JOB, job_id) if live else None,
        "owner_state": owner_state(owner, state),
        "expires_at": None if live else int(now + retention_seconds),
    }


def cluster_state_fields(cluster_id: str, state: str, now: float, retention_seconds: int) -> dict[str, Any]:
    """The index attributes of a job's cluster record in `state` ("UP" | "TERMINATED")."""
    up = state == "UP"
    return {
        "live": live_key(LIVE_CLUSTER, cluster_id) if up else None,
        "expires_at": None if up else int(now + retention_seconds),
    }
