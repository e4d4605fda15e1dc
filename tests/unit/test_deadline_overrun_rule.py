"""The rule for a deadline job past its `--hours` estimate (shared/jobs/deadlines.py `overrun_decision`), as
the control plane asks it before the policy: within the estimate it answers nothing and the policy decides."""

from __future__ import annotations

from shared.jobs.deadlines import overrun_decision, past_estimate
from shared.spot_policy import DeadlineState, Market, Placement, PlaceOption, UseOnDemand, UseSpot, decide

HOUR = 3600.0
PLACES = [
    PlaceOption("aws/us-east-1/us-east-1a m5.large", 0.03, 0.10, "aws/us-east-1"),
    PlaceOption("aws/us-east-1/us-east-1b m5.large", 0.02, 0.09, "aws/us-east-1"),
    PlaceOption("aws/us-east-1/us-east-1c m5.large", 0.02, 0.09, "aws/us-east-1"),
]


def state(work_left: float, current: Placement | None = None, now: float = 10 * HOUR) -> DeadlineState:
    return DeadlineState(
        now=now, deadline=30 * HOUR, work_left=work_left, restart_overhead=300.0,
        total_work=10 * HOUR, submitted_at=0.0, current=current,
    )  # fmt: skip


def test_within_the_estimate_the_rule_answers_nothing_and_the_policy_decides() -> None:
    within = state(work_left=1.0)
    assert not past_estimate(within) and overrun_decision(within, PLACES) is None
    assert isinstance(decide(within, PLACES), UseSpot)  # 20 h of slack: spot, as before


def test_past_the_estimate_without_a_cluster_it_is_the_cheapest_on_demand_even_with_spot_offered() -> None:
    past = state(work_left=0.0)
    decision = overrun_decision(past, PLACES)
    assert isinstance(decision, UseOnDemand) and decision.check_at is None  # on on-demand it stays
    assert decision.place == "aws/us-east-1/us-east-1b m5.large"  # cheapest; the plan's order among equals
    assert decision.reason == "past its 10.0 h estimate: on-demand, the rest of the work being unknown"
    assert isinstance(decide(past, PLACES), UseSpot)  # what the policy alone would do: all slack, no work


def test_past_the_estimate_a_running_cluster_is_kept_whatever_its_market_or_place() -> None:
    for market in Market:
        running = Placement("aws/us-east-1/us-east-1a m5.large", market, started_at=0.0)
        decision = overrun_decision(state(work_left=0.0, current=running), PLACES)
        assert isinstance(decision, (UseSpot, UseOnDemand)) and decision.place == running.place
        assert decision.market is market
        assert decision.check_at is None and "the running cluster is kept" in decision.reason


def test_a_plan_without_on_demand_is_left_to_the_policy_past_the_estimate_too() -> None:
    spot_only = [PlaceOption(p.place, p.spot_price, None, p.group) for p in PLACES]
    assert overrun_decision(state(work_left=0.0), spot_only) is None
