"""Decisions of the deadline spot policy and its baselines, one situation at a time."""

from __future__ import annotations

import pytest

from shared.spot_policy import (
    DEFAULT_CONFIG,
    AvailabilityTrace,
    DeadlineState,
    Market,
    Placement,
    PlaceOption,
    PolicyError,
    SpotHistory,
    UseOnDemand,
    UseSpot,
    Wait,
    decide,
    decide_greedy,
    decide_spot_only,
    decide_uniform_progress,
    next_check,
    replay,
)

H = 3600.0
D = 0.2 * H  # restart overhead
NET = D + DEFAULT_CONFIG.reaction
ZONES = [PlaceOption(f"aws/us-east-1/us-east-1{z}", 0.99, 3.06, "aws/us-east-1") for z in "abc"]


def job(
    *,
    slack: float,
    work_left: float = 40 * H,
    current: Placement | None = None,
    now: float = 10 * H,
    total_work: float = 48 * H,
) -> DeadlineState:
    return DeadlineState(
        now=now,
        deadline=now + work_left + slack,
        work_left=work_left,
        restart_overhead=D,
        total_work=total_work,
        submitted_at=0.0,
        current=current,
    )


def refused_now(*places: PlaceOption, at: float = 10 * H) -> dict[str, SpotHistory]:
    return {p.place: SpotHistory().refused(at) for p in places}


def test_a_fresh_job_with_slack_starts_on_spot_at_the_first_place_of_the_plan() -> None:
    decision = decide(job(slack=10 * H), ZONES)
    assert decision == UseSpot(ZONES[0].place, decision.reason)


def test_a_place_refused_moments_ago_is_skipped_for_the_next_one() -> None:
    decision = decide(job(slack=10 * H), ZONES, refused_now(ZONES[0]))
    assert isinstance(decision, UseSpot) and decision.place == ZONES[1].place


def test_a_refused_place_is_tried_again_after_the_retry_interval() -> None:
    history = refused_now(ZONES[0], at=10 * H - DEFAULT_CONFIG.retry)
    decision = decide(job(slack=10 * H), ZONES[:1], history)
    assert isinstance(decision, UseSpot) and decision.place == ZONES[0].place
    assert isinstance(decide(job(slack=10 * H), ZONES[:1], refused_now(ZONES[0])), Wait)


def test_a_place_with_long_runs_is_preferred_to_one_that_keeps_being_preempted() -> None:
    history = {
        ZONES[0].place: SpotHistory(up_seconds=2 * H, interruptions=6),
        ZONES[2].place: SpotHistory(up_seconds=30 * H, interruptions=1),
    }
    decision = decide(job(slack=10 * H), ZONES, history)
    assert isinstance(decision, UseSpot) and decision.place == ZONES[2].place


def test_after_a_preemption_another_region_is_preferred_for_an_hour() -> None:
    west = PlaceOption("aws/us-west-2/us-west-2a", 0.99, 3.06, "aws/us-west-2")
    history = {ZONES[0].place: SpotHistory().ran(5 * H, 10 * H - 60, preempted=True)}
    decision = decide(job(slack=10 * H), [*ZONES, west], history)
    assert isinstance(decision, UseSpot) and decision.place == west.place
    later = decide(job(slack=10 * H, now=12 * H), [*ZONES, west], history)
    assert isinstance(later, UseSpot) and later.place == ZONES[0].place  # its 5 h run counts for it again


def test_a_running_spot_cluster_is_kept_even_when_a_better_place_is_known() -> None:
    running = Placement(ZONES[0].place, Market.SPOT, started_at=5 * H)
    history = {ZONES[2].place: SpotHistory(up_seconds=100 * H, interruptions=1)}
    decision = decide(job(slack=3 * H, current=running), ZONES, history)
    assert decision == UseSpot(ZONES[0].place, decision.reason, None)


def test_the_safety_net_runs_on_demand_when_the_slack_covers_only_one_restart() -> None:
    decision = decide(job(slack=NET), ZONES)
    assert isinstance(decision, UseOnDemand) and decision.place == ZONES[0].place
    assert "safety net" in decision.reason


def test_spot_is_not_launched_when_its_overhead_would_cross_the_safety_net() -> None:
    decision = decide(job(slack=NET + D / 2), ZONES)
    assert isinstance(decision, UseOnDemand)


def test_with_no_spot_anywhere_and_ample_slack_the_job_waits_and_retries() -> None:
    decision = decide(job(slack=30 * H), ZONES, refused_now(*ZONES))
    assert isinstance(decision, Wait)
    assert decision.until == 10 * H + DEFAULT_CONFIG.retry


def test_a_wait_never_reaches_past_the_moment_the_safety_net_needs_to_act() -> None:
    decision = decide(job(slack=NET + D + 0.5 * DEFAULT_CONFIG.retry), ZONES, refused_now(*ZONES))
    if isinstance(decision, Wait):
        assert decision.until - 10 * H <= 0.5 * DEFAULT_CONFIG.retry


def test_a_long_outage_with_little_slack_above_the_reserve_moves_to_on_demand() -> None:
    down_for = 3 * H
    history = {p.place: SpotHistory().refused(10 * H - down_for).refused(10 * H) for p in ZONES}
    decision = decide(job(slack=2.5 * H, work_left=40 * H), ZONES, history)
    assert isinstance(decision, UseOnDemand)
    assert decision.check_at == 10 * H + DEFAULT_CONFIG.retry  # spot is tried again from on-demand


ONE_ZONE = [PlaceOption("aws/us-west-2/us-west-2b", 0.99, 3.06, "aws/us-west-2")]


def tight_one_zone_job(slack: float) -> DeadlineState:
    """48 h of work due 53.3 h after submit (ratio 0.9), 41 h left, restart 0.5 h, spot down for 3 h."""
    work_left, deadline = 41 * H, 48 * H / 0.9
    now = deadline - work_left - slack
    return DeadlineState(now, deadline, work_left, 0.5 * H, total_work=48 * H, submitted_at=0.0)


def three_hour_outage(places: list[PlaceOption], now: float) -> dict[str, SpotHistory]:
    return {p.place: SpotHistory().refused(now - 3 * H).refused(now) for p in places}


def test_one_zone_waits_for_spot_when_on_demand_now_would_hold_the_job_for_most_of_its_work() -> None:
    # The outage would eat into the reserve, but after on-demand's restart the slack would clear the reserve
    # by the two restarts leaving needs only in the last quarter of the work: it would pay those on-demand
    # hours anyway at the net, so it waits (greedy's bet), keeping the chance that spot comes back.
    state = tight_one_zone_job(slack=2.5 * H)
    decision = decide(state, ONE_ZONE, three_hour_outage(ONE_ZONE, state.now))
    assert isinstance(decision, Wait)
    assert "most of its work" in decision.reason
    assert decision.until - state.now <= DEFAULT_CONFIG.retry


def test_one_zone_goes_on_demand_early_when_it_could_leave_again_in_the_first_half_of_the_work() -> None:
    state = tight_one_zone_job(slack=3.5 * H)
    assert isinstance(decide(state, ONE_ZONE, three_hour_outage(ONE_ZONE, state.now)), UseOnDemand)


def on_demand_hours_until_left(state: DeadlineState, history: dict[str, SpotHistory]) -> float | None:
    """Run `state`'s job on on-demand from now (its restart overhead first; spot back at once) and ask the
    policy every 6 minutes, as the control plane's checks do; the work done before it answers spot, or
    None when it stays on on-demand to the end."""
    placement = Placement(ONE_ZONE[0].place, Market.ON_DEMAND, started_at=state.now)
    step, work_left, now = 0.1 * H, state.work_left, state.now + state.restart_overhead
    while work_left > 0:
        running = DeadlineState(
            now,
            state.deadline,
            work_left,
            state.restart_overhead,
            state.total_work,
            state.submitted_at,
            placement,
        )
        if isinstance(decide(running, ONE_ZONE, history), UseSpot):
            return state.work_left - work_left
        now, work_left = now + step, work_left - step
    return None


@pytest.mark.parametrize("slack_hours", [2.5, 2.9, 3.0, 3.1, 3.2, 3.3, 3.5, 4.0])
def test_the_one_way_door_opens_only_for_a_stint_the_leave_rule_ends_in_the_first_half(
    slack_hours: float,
) -> None:
    # The door's projection and the leave rule must agree: on-demand early is taken only when, run on
    # on-demand with spot back, the job is let go before `one_way_share` of its remaining work.
    state = tight_one_zone_job(slack=slack_hours * H)
    history = three_hour_outage(ONE_ZONE, state.now)
    opened = isinstance(decide(state, ONE_ZONE, history), UseOnDemand)
    left_after = on_demand_hours_until_left(state, history)
    leaves_early = left_after is not None and left_after <= DEFAULT_CONFIG.one_way_share * state.work_left
    assert opened == leaves_early, (opened, left_after and left_after / H)


def test_the_one_way_door_is_for_one_place_only_several_zones_still_go_on_demand_early() -> None:
    state = tight_one_zone_job(slack=2.5 * H)
    assert isinstance(decide(state, ZONES, three_hour_outage(ZONES, state.now)), UseOnDemand)


def test_one_zone_on_the_one_way_door_still_goes_on_demand_at_the_safety_net() -> None:
    net = 0.5 * H + DEFAULT_CONFIG.reaction
    state = tight_one_zone_job(slack=net + 0.5 * H)  # waiting any longer would cross the net
    assert isinstance(decide(state, ONE_ZONE, three_hour_outage(ONE_ZONE, state.now)), UseOnDemand)


def test_the_places_of_one_region_share_its_outage_however_many_instance_types_it_has() -> None:
    types = ("m6i.large", "r6i.large", "m6i.xlarge", "r6i.xlarge", "m6i.2xlarge", "c6i.large", "c6i.xlarge")
    one_region = [PlaceOption(f"{z.place} {t}", 0.99, 3.06, "aws/us-east-1") for z in ZONES for t in types]
    regions = [PlaceOption(f"aws/r{i}/r{i}a", 0.99, 3.06, f"aws/r{i}") for i in range(len(one_region))]
    tight = job(slack=1 * H, work_left=40 * H)
    assert isinstance(decide(tight, ZONES, refused_now(*ZONES)), UseOnDemand)
    assert isinstance(decide(tight, one_region, refused_now(*one_region)), UseOnDemand)
    assert isinstance(decide(tight, regions, refused_now(*regions)), Wait)  # independent: one is back soon


def test_on_demand_is_left_for_spot_when_the_slack_allows_it_again() -> None:
    on_demand = Placement(ZONES[0].place, Market.ON_DEMAND, started_at=2 * H)
    assert isinstance(decide(job(slack=30 * H, current=on_demand), ZONES), UseSpot)


def test_on_demand_is_kept_when_leaving_would_cross_the_net_after_the_restart() -> None:
    on_demand = Placement(ZONES[0].place, Market.ON_DEMAND, started_at=2 * H)
    decision = decide(job(slack=NET + 1.5 * D, current=on_demand), ZONES)
    assert decision == UseOnDemand(ZONES[0].place, decision.reason, 10 * H + DEFAULT_CONFIG.retry)


def test_on_demand_is_not_moved_to_another_place_of_the_same_price() -> None:
    on_demand = Placement(ZONES[2].place, Market.ON_DEMAND, started_at=2 * H)
    decision = decide(job(slack=NET, current=on_demand), ZONES)
    assert isinstance(decision, UseOnDemand) and decision.place == ZONES[2].place


def test_the_cheapest_on_demand_place_is_chosen() -> None:
    places = [PlaceOption("gcp/a", 0.9, 3.5), PlaceOption("aws/b", None, 3.0), PlaceOption("aws/c", 1.0, 3.2)]
    decision = decide(job(slack=NET), places)
    assert isinstance(decision, UseOnDemand) and decision.place == "aws/b"


def test_a_plan_without_spot_runs_on_demand_and_one_without_on_demand_has_no_safety_net() -> None:
    assert isinstance(decide(job(slack=30 * H), [PlaceOption("p", None, 3.0)]), UseOnDemand)
    spot_only = decide(job(slack=0.0), [PlaceOption("p", 1.0, None)])
    assert isinstance(spot_only, UseSpot) and "no safety net" in spot_only.reason
    with pytest.raises(ValueError):
        decide(job(slack=1 * H), [PlaceOption("p", None, None)])


def test_next_check_is_the_wait_time_or_the_check_time() -> None:
    assert next_check(Wait(5.0, "x")) == 5.0
    assert next_check(UseSpot("p", "x", 7.0)) == 7.0
    assert next_check(UseOnDemand("p", "x")) is None


def test_spot_history_counts_one_interruption_per_outage_not_per_retry() -> None:
    history = SpotHistory().refused(10.0).refused(20.0).refused(30.0)
    assert history.interruptions == 1 and history.down_since == 10.0
    back = history.launched(100.0)
    assert back.outages == 1 and back.outage_seconds == 90.0 and back.down_since is None
    gone = back.ran(100.0, 400.0, preempted=True)
    assert gone.interruptions == 2 and gone.up_seconds == 300.0 and gone.down_since == 400.0
    assert gone.unavailable_at(450.0, cooldown=300.0) and not gone.unavailable_at(800.0, cooldown=300.0)


def test_greedy_waits_for_spot_then_stays_on_demand_to_the_end() -> None:
    assert isinstance(decide_greedy(job(slack=30 * H), ZONES, refused_now(*ZONES)), Wait)
    assert isinstance(decide_greedy(job(slack=NET + D), ZONES), UseOnDemand)
    on_demand = Placement(ZONES[0].place, Market.ON_DEMAND, started_at=2 * H)
    assert isinstance(decide_greedy(job(slack=30 * H, current=on_demand), ZONES), UseOnDemand)


def test_uniform_progress_uses_on_demand_only_when_behind_the_even_pace() -> None:
    ahead = job(slack=12 * H, work_left=20 * H, total_work=48 * H)  # 28 h done in the first 10 h
    assert isinstance(decide_uniform_progress(ahead, ZONES[:1], refused_now(ZONES[0])), Wait)
    behind = job(slack=12 * H, work_left=45 * H, total_work=48 * H)
    assert isinstance(decide_uniform_progress(behind, ZONES[:1], refused_now(ZONES[0])), UseOnDemand)


def test_spot_only_never_uses_on_demand() -> None:
    assert isinstance(decide_spot_only(job(slack=0.0), ZONES, refused_now(*ZONES)), Wait)


def trace(place: str, pattern: str, gap: float = 600.0) -> AvailabilityTrace:
    return AvailabilityTrace(place, gap, tuple(c == "1" for c in pattern))


def test_replay_of_spot_that_never_fails_costs_the_work_and_one_overhead_at_spot_price() -> None:
    place = PlaceOption("z", 1.0, 3.0)
    result = replay(
        decide,
        [trace("z", "1" * 100)],
        [place],
        start_tick=0,
        total_work=5 * H,
        deadline_after=8 * H,
        restart_overhead=D,
    )
    assert result.restarts == 1 and not result.missed
    assert result.cost == pytest.approx(1.0 * (5 * H + D) / H)
    assert result.finished_at == pytest.approx(5 * H + D)


def test_replay_records_a_preemption_and_resumes_on_the_other_place() -> None:
    places = [PlaceOption("a", 1.0, 3.0), PlaceOption("b", 1.0, 3.0)]
    traces = [trace("a", "111" + "0" * 97), trace("b", "1" * 100)]
    result = replay(
        decide, traces, places, start_tick=0, total_work=3 * H, deadline_after=10 * H, restart_overhead=D
    )
    assert result.restarts == 2 and result.on_demand_seconds == 0 and not result.missed
    assert result.finished_at == pytest.approx(3 * H + 2 * D)  # 30 min on a (10 min lost), then b


def test_replay_refuses_a_decision_for_a_place_outside_the_plan() -> None:
    def rogue(job, places, history):  # type: ignore[no-untyped-def]
        return UseSpot("somewhere-else", "rogue")

    with pytest.raises(PolicyError):
        replay(
            rogue,
            [trace("z", "1" * 10)],
            [PlaceOption("z", 1.0, 3.0)],
            start_tick=0,
            total_work=H,
            deadline_after=2 * H,
            restart_overhead=D,
        )
