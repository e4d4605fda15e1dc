"""The outage the deadline policy expects when no spot place has capacity: the typical outage of the place
(a geometric mean: most outages are short, a rare long one makes the mean), or the age of the outage under
way once it has lasted longer; and the history that holds it, stored and read back as the store does."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest

from shared.jobs.deadlines import history_json, history_of
from shared.spot_policy import (
    DEFAULT_CONFIG,
    DeadlineState,
    PlaceOption,
    SpotHistory,
    UseOnDemand,
    Wait,
    decide,
)

H = 3600.0
D = 0.2 * H
ZONE = PlaceOption("aws/us-west-2/us-west-2b", 0.99, 3.06, "aws/us-west-2")
NOW = 100 * H


def seen(outages: list[float], *, run: float = 2 * H) -> SpotHistory:
    """A place that ran `run` of spot, was preempted, and got capacity back after each of `outages`; the
    last run ended (let go) at 90 h."""
    history, t = SpotHistory(), H
    for outage in outages:
        history = history.launched(t).ran(t, t + run, preempted=True)
        t += run + outage
        history = history.launched(t)
    return history.ran(t, 90 * H, preempted=False)


def job(slack: float) -> DeadlineState:
    return DeadlineState(
        now=NOW, deadline=NOW + 40 * H + slack, work_left=40 * H, restart_overhead=D, total_work=48 * H,
        submitted_at=NOW - 10 * H,
    )  # fmt: skip


MOSTLY_SHORT = [0.1 * H] * 9 + [20 * H]  # mean 2.1 h; typical (geometric) 0.2 h


def test_typical_outage_is_the_geometric_mean_shrunk_to_the_prior() -> None:
    history = seen(MOSTLY_SHORT)
    assert history.logged_outages == history.outages == 10
    prior = DEFAULT_CONFIG.outage
    expected = math.exp((9 * math.log(0.1 * H) + math.log(20 * H) + math.log(prior)) / 11)
    assert history.typical_outage(prior) == pytest.approx(expected)
    assert history.mean_outage(prior) == pytest.approx((20.9 * H + prior) / 11)
    assert history.typical_outage(prior) < 0.25 * history.mean_outage(prior)
    assert SpotHistory().typical_outage(0.0) == pytest.approx(60.0)  # a zero prior is no error


def test_a_fresh_outage_where_outages_are_mostly_short_is_waited_out() -> None:
    # The mean outage (2 h) would leave the 3 h of slack below the reserve (~1.9 h): on-demand at once.
    # Most outages here lasted 6 min, so the job waits for this one and asks again.
    history = {ZONE.place: seen(MOSTLY_SHORT).refused(NOW)}
    decision = decide(job(3 * H), [ZONE], history)
    assert isinstance(decision, Wait)
    assert decision.until == NOW + DEFAULT_CONFIG.retry


def test_an_outage_that_has_lasted_long_moves_to_on_demand_all_the_same() -> None:
    # Down since 2 h ago (refused then, and again now): expected to last as long again.
    history = {ZONE.place: seen(MOSTLY_SHORT).refused(NOW - 2 * H).refused(NOW)}
    assert isinstance(decide(job(3 * H), [ZONE], history), UseOnDemand)


def test_where_outages_were_long_a_fresh_one_still_moves_to_on_demand() -> None:
    history = {ZONE.place: seen([3 * H] * 10).refused(NOW)}
    assert isinstance(decide(job(3 * H), [ZONE], history), UseOnDemand)


def test_the_history_round_trips_through_the_store_and_an_older_or_newer_one_still_reads() -> None:
    history = {ZONE.place: seen(MOSTLY_SHORT)}
    stored = SimpleNamespace(spot_history=history_json(history))
    assert history_of(stored) == history  # type: ignore[arg-type]
    # Stored before the typical outage existed: its outages count for the mean, none for the typical one.
    fields = json.loads(stored.spot_history)[ZONE.place]
    del fields["outage_log_seconds"], fields["logged_outages"]
    older = SimpleNamespace(spot_history=json.dumps({ZONE.place: fields}))
    read = history_of(older)[ZONE.place]  # type: ignore[arg-type]
    assert read.outages == 10 and read.logged_outages == 0
    assert read.typical_outage(DEFAULT_CONFIG.outage) == pytest.approx(DEFAULT_CONFIG.outage)

    # Written by a newer version (a rollback while the job runs): what this one does not know is dropped.
    fields = json.loads(stored.spot_history)[ZONE.place]
    newer = SimpleNamespace(spot_history=json.dumps({ZONE.place: {**fields, "run_log_seconds": 5.0}}))
    assert history_of(newer) == history  # type: ignore[arg-type]


def test_an_outage_that_began_at_time_zero_counts_its_whole_length() -> None:
    history = SpotHistory().refused(0.0).launched(1800.0)
    assert (history.outages, history.outage_seconds) == (1, 1800.0)
    assert history.mean_outage(600.0) == (1800.0 + 600.0) / 2
