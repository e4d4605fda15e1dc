"""The words users filter jobs and reports with (`--state`, `--since`, `--name`, `--limit`, `--days`,
`--by`), checked once for the API, the dashboard and the CLI; errors name the field."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

from shared.errors import UserError
from shared.jobs.cost_report import GROUPINGS, MAX_REPORT_DAYS
from shared.jobs.job_listing import JobFilter
from shared.states import JobState

MAX_LIMIT = 1000
DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_states(value: str | None) -> frozenset[str]:
    """`"running,failed"` -> {"RUNNING", "FAILED"}; an unknown state is an error naming it."""
    if not value:
        return frozenset()
    states = set()
    for word in value.split(","):
        word = word.strip().upper()
        if not word:
            continue
        if word not in JobState.__members__:
            known = ", ".join(s.value.lower() for s in JobState)
            raise UserError(f"unknown state {word.lower()!r}", field="state", hint=f"one of: {known}")
        states.add(word)
    return frozenset(states)


def parse_since(value: str | None, now: float | None = None) -> float | None:
    """`"2d"`, `"12h"`, `"30m"` ago, or an ISO 8601 date/time (UTC unless it says) -> epoch seconds."""
    if value is None or not value.strip():
        return None
    now = time.time() if now is None else now
    duration = DURATION.match(value)
    if duration:
        return now - float(duration.group(1)) * UNIT_SECONDS[duration.group(2).lower()]
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UserError(
            f"not a time: {value[:40]!r}", field="since", hint="a duration (2d, 12h) or 2026-11-20T09:00Z"
        ) from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def parse_limit(value: str | None, default: int = 200) -> int:
    if value is None or value == "":
        return default
    try:
        limit = int(value)
    except ValueError:
        raise UserError(f"must be an integer, not {value[:40]!r}", field="limit") from None
    if not 1 <= limit <= MAX_LIMIT:
        raise UserError(f"must be between 1 and {MAX_LIMIT}", field="limit")
    return limit


def job_filter(
    *,
    state: str | None = None,
    since: str | None = None,
    name: str | None = None,
    limit: str | None = None,
    cursor: str | None = None,
) -> JobFilter:
    if name is not None and len(name) > 256:
        raise UserError("at most 256 characters", field="name")
    return JobFilter(
        states=parse_states(state),
        since=parse_since(since),
        name=name or None,
        limit=parse_limit(limit),
        cursor=cursor or None,
    )


def parse_days(value: str | None, default: int = 7) -> int:
    if value is None or value == "":
        return default
    try:
        days = int(value)
    except ValueError:
        raise UserError(f"must be a whole number of days, not {value[:40]!r}", field="days") from None
    if not 1 <= days <= MAX_REPORT_DAYS:
        raise UserError(f"must be between 1 and {MAX_REPORT_DAYS}", field="days")
    return days


def parse_group(value: str | None, default: str = "cloud") -> str:
    if value is None or value == "":
        return default
    if value not in GROUPINGS:
        raise UserError(f"cannot group by {value[:40]!r}", field="by", hint=f"one of: {', '.join(GROUPINGS)}")
    return value


def parse_flag(value: str | None, field: str) -> bool:
    if value is None or value == "":
        return False
    if value.lower() in ("1", "true", "yes"):
        return True
    if value.lower() in ("0", "false", "no"):
        return False
    raise UserError(f"must be true or false, not {value[:40]!r}", field=field)
