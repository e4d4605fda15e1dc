"""Cron evaluation (croniter + zoneinfo) and its EventBridge Scheduler spelling."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from shared.errors import UserError
from shared.schedules.cron import check_cron, check_timezone, due_times, next_time, scheduler_expression


def test_every_minute_is_due_once_per_minute_and_only_the_latest_missed_firing_is_kept() -> None:
    start = datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC)
    assert due_times("* * * * *", "UTC", after=start, until=datetime(2026, 1, 1, 0, 0, 59, tzinfo=UTC)) == []
    (due,) = due_times("* * * * *", "UTC", after=start, until=datetime(2026, 1, 1, 0, 1, 0, tzinfo=UTC))
    assert due == datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
    (latest,) = due_times("* * * * *", "UTC", after=start, until=datetime(2026, 1, 1, 3, 0, 10, tzinfo=UTC))
    assert latest == datetime(2026, 1, 1, 3, 0, tzinfo=UTC)


def test_a_daily_time_is_read_in_the_schedules_time_zone_across_daylight_saving() -> None:
    before = next_time("0 3 * * *", "Europe/Paris", datetime(2026, 3, 28, 0, 0, tzinfo=UTC))
    after = next_time("0 3 * * *", "Europe/Paris", datetime(2026, 3, 30, 0, 0, tzinfo=UTC))
    assert before.astimezone(UTC).hour == 2  # 03:00 CET
    assert after.astimezone(UTC).hour == 1  # 03:00 CEST


@pytest.mark.parametrize(
    ("unix", "aws"),
    [
        ("0 3 * * *", "cron(0 3 * * ? *)"),
        ("*/15 * * * 1-5", "cron(*/15 * ? * 2-6 *)"),
        ("0 0 * * 0,6", "cron(0 0 ? * 1,7 *)"),
        ("0 9 1 * *", "cron(0 9 1 * ? *)"),
        ("30 2 * * MON", "cron(30 2 ? * MON *)"),
    ],
)
def test_unix_cron_becomes_eventbridge_scheduler_cron(unix: str, aws: str) -> None:
    assert scheduler_expression(unix) == aws


@pytest.mark.parametrize("bad", ["* * * *", "61 * * * *", "0 3 * * * *", "every day"])
def test_a_bad_cron_is_a_user_error_naming_the_field(bad: str) -> None:
    with pytest.raises(UserError) as error:
        check_cron(bad)
    assert error.value.field == "cron" and error.value.hint


def test_day_of_month_and_day_of_week_together_are_refused_for_eventbridge() -> None:
    with pytest.raises(UserError, match="both"):
        scheduler_expression("0 0 1 * 1")


def test_an_unknown_time_zone_is_a_user_error() -> None:
    with pytest.raises(UserError) as error:
        check_timezone("Mars/Olympus")
    assert error.value.field == "timezone"
