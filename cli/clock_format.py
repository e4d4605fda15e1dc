"""Times from the API as a person reads them: a clock, a date, an age."""

from __future__ import annotations

from datetime import UTC, datetime


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def when(value: str | None) -> str:
    """An API time as local date and time to the second (`2026-11-22 00:38:57`)."""
    moment = parse_time(value)
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S") if moment else (value or "-")


def clock(value: str | None) -> str:
    if not value:
        return "-"
    moment = parse_time(value)
    return moment.astimezone().strftime("%H:%M:%S") if moment else value


def age(created_at: str | None) -> str:
    moment = parse_time(created_at)
    if moment is None:
        return "-"
    seconds = max(0, int((datetime.now(UTC) - moment).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
