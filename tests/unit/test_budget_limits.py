"""Budget arithmetic: month boundaries in UTC, and refusals and notices that keep a small sum's digits."""

from __future__ import annotations

from datetime import UTC, datetime

from shared.budgets.limits import Spend, month_of, month_start, notice, refusal, usd


def test_a_month_starts_at_midnight_utc_on_the_first() -> None:
    moment = datetime(2026, 11, 30, 23, 59, tzinfo=UTC).timestamp()
    assert month_of(moment) == "2026-11"
    assert month_start(moment) == datetime(2026, 11, 1, tzinfo=UTC).timestamp()
    assert month_of(moment + 120) == "2026-12"


def test_a_refusal_shows_the_sum_and_its_parts() -> None:
    text = refusal("monthly budget of 2026-11", Spend(480.0, 32.4), 500.0)
    assert text.startswith(
        "monthly budget of 2026-11 reached: spent $512.40 (ended attempts $480.00 + running $32.40) "
        "of $500.00"
    )


def test_small_sums_keep_their_digits() -> None:
    assert (usd(12.345), usd(0.272), usd(0.0000854), usd(0)) == ("$12.35", "$0.2720", "$0.000085", "$0.0000")
    assert refusal("cap", Spend(0.0, 0.000412), 0.0004).startswith("cap reached: spent $0.000412")


def test_the_last_notice_says_what_happens_next() -> None:
    assert notice("cap", 80, 8.0, 10.0, "stop") == "cap: 80 % reached ($8.0000 of $10.00)"
    assert notice("cap", 100, 10.5, 10.0, "stop").endswith("stopping the job at a checkpoint")
    assert notice("cap", 100, 10.5, 10.0, "warn").endswith("warning only, the job goes on")
