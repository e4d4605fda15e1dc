"""Cron expressions: validate them, find the times they fire, and write them as EventBridge Scheduler does.

Expressions are the five-field Unix form (`minute hour day-of-month month day-of-week`), evaluated in an
IANA time zone (croniter + zoneinfo), so "0 3 * * *" in Europe/Paris fires at 03:00 Paris time across
daylight-saving changes.
"""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from shared.errors import UserError

MAX_DUE_PER_CHECK = 1  # a runtime that was down does not replay every missed firing (nor does AWS)


def check_cron(expression: str, *, field: str = "cron") -> str:
    """The expression, normalised to single spaces; a UserError naming `field` when it is not valid."""
    parts = expression.split()
    if len(parts) != 5:
        raise UserError(
            f"expected 5 fields (minute hour day-of-month month weekday), not {len(parts)}: {expression!r}",
            field=field,
            hint='e.g. "0 3 * * *" for 03:00 every day',
        )
    normalised = " ".join(parts)
    if not croniter.is_valid(normalised):
        raise UserError(
            f"not a valid cron expression: {expression!r}", field=field, hint='e.g. "*/15 * * * *"'
        )
    return normalised


def check_timezone(name: str, *, field: str = "timezone") -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise UserError(
            f"unknown time zone {name!r}", field=field, hint="an IANA name such as UTC or Europe/Paris"
        ) from None


def next_time(expression: str, timezone: str, after: datetime) -> datetime:
    """The first firing strictly after `after` (an aware datetime), in the schedule's time zone."""
    local = after.astimezone(check_timezone(timezone))
    return croniter(expression, local).get_next(datetime)


def due_times(expression: str, timezone: str, *, after: datetime, until: datetime) -> list[datetime]:
    """Firings in (after, until], the latest MAX_DUE_PER_CHECK of them, oldest first."""
    times: list[datetime] = []
    moment = next_time(expression, timezone, after)
    while moment <= until:
        times.append(moment)
        moment = next_time(expression, timezone, moment)
        if len(times) > 10_000:  # a long outage of a every-minute schedule: only the latest matter
            times = times[-MAX_DUE_PER_CHECK:]
    return times[-MAX_DUE_PER_CHECK:]


def scheduler_expression(expression: str) -> str:
    """The EventBridge Scheduler form `cron(min hour dom month dow year)`.

    AWS wants `?` in one of the day fields and numbers days of the week 1-7 from Sunday (Unix: 0-7).
    Unix cron ORs a day-of-month and a day-of-week given together; AWS cannot express that.
    """
    minute, hour, dom, month, dow = check_cron(expression).split()
    if dow == "*":
        dow = "?"
    elif dom == "*":
        dom = "?"
    else:
        raise UserError(
            f"{expression!r} names both a day of the month and a day of the week",
            field="cron",
            hint="EventBridge Scheduler accepts one of them; use two schedules",
        )
    if dow != "?":
        dow = ",".join(_aws_weekdays(item) for item in dow.split(","))
    return f"cron({minute} {hour} {dom} {month} {dow} *)"


def _aws_weekdays(item: str) -> str:
    days, slash, step = item.partition("/")
    days = re.sub(r"\d+", lambda m: str(int(m.group()) % 7 + 1), days)
    return f"{days}{slash}{step}"
