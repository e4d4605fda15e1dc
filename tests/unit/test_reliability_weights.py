"""The reliability prior's arithmetic (shared/optimizer/reliability.py), on plain candidates and records."""

from __future__ import annotations

import pytest

from shared.config.control_plane import ReliabilityPriorConfig
from shared.config.environment import ConfigError
from shared.optimizer.plan import Candidate
from shared.optimizer.reliability import PlaceRecord, expected_price, weigh_by_scorecard


def _candidate(region: str, price: float, *, spot: bool = True, hours: float = 1.0) -> Candidate:
    return Candidate(cloud="aws", region=region, zone=None, instance_type="m6i.large", accelerator=None,
                     accelerator_count=0, vcpus=2, memory_gib=8, use_spot=spot, hourly_price=price,
                     num_nodes=1, estimated_hours=hours, estimated_cost=price * hours)  # fmt: skip


def _record(region: str, *, requests: int = 0, refusals: int = 0, spot_hours: float = 0.0,
            preemptions: int = 0, to_running: float | None = 180.0) -> PlaceRecord:  # fmt: skip
    return PlaceRecord("aws", region, "m6i", requests, refusals, spot_hours, preemptions, to_running)


def test_preemptions_per_spot_hour_raise_the_expected_price_by_the_hours_they_lose() -> None:
    # 2 preemptions per spot-hour, each losing 3 minutes to RUNNING plus 15 minutes of work: x1.6
    one = expected_price(_candidate("us-east-1", 1.0), _record("us-east-1", spot_hours=5, preemptions=10))
    assert one.hourly == pytest.approx(1.6) and one.preemptions_per_spot_hour == 2.0


def test_refused_launches_cost_the_tries_they_take_over_the_jobs_hours() -> None:
    # half refused: one refused try per launch on average, 3 minutes of a 1-hour job
    one = expected_price(_candidate("us-east-1", 1.0), _record("us-east-1", requests=10, refusals=5))
    assert one.hourly == pytest.approx(1.05) and one.refusal_rate == 0.5


def test_too_little_evidence_changes_nothing() -> None:
    thin = _record("us-east-1", requests=2, refusals=2, spot_hours=0.1, preemptions=3)
    assert expected_price(_candidate("us-east-1", 1.0), thin).hourly == 1.0


def test_on_demand_is_not_charged_for_spot_preemptions() -> None:
    record = _record("us-east-1", spot_hours=5, preemptions=10)
    assert expected_price(_candidate("us-east-1", 1.0, spot=False), record).hourly == 1.0


def test_a_preempted_place_loses_to_a_dearer_reliable_one_and_the_plan_says_why() -> None:
    cheap, dear = _candidate("us-east-1", 1.0), _candidate("us-west-2", 1.1)
    ordered, notes = weigh_by_scorecard([cheap, dear], [_record("us-east-1", spot_hours=5, preemptions=10)],
                                        objective="cost", days=30)  # fmt: skip
    assert ordered == [dear, cheap]
    assert "aws/us-east-1 m6i.large (spot) at $1.0000/h is expected at $1.6000/h" in notes[0]
    assert "2.00 preemptions per spot-hour" in notes[0] and "chose aws/us-west-2" in notes[-1]


def test_a_small_risk_does_not_outweigh_a_large_saving() -> None:
    cheap, dear = _candidate("us-east-1", 1.0), _candidate("us-west-2", 2.0)
    records = [_record("us-east-1", spot_hours=5, preemptions=10)]
    assert weigh_by_scorecard([cheap, dear], records, objective="cost", days=30) == ([cheap, dear], [])


def test_the_time_objective_and_a_written_order_are_left_alone() -> None:
    cheap, dear = _candidate("us-east-1", 1.0), _candidate("us-west-2", 1.1)
    records = [_record("us-east-1", spot_hours=5, preemptions=10)]
    assert weigh_by_scorecard([cheap, dear], records, objective="time", days=30) == ([cheap, dear], [])
    assert weigh_by_scorecard([dear, cheap], records, objective="cost", days=30) == ([dear, cheap], [])


def test_the_prior_is_off_unless_set_and_a_bad_value_names_the_variable() -> None:
    assert ReliabilityPriorConfig.from_env({}).days == 0
    assert ReliabilityPriorConfig.from_env({"SKYLESS_RELIABILITY_PRIOR_DAYS": "14"}).days == 14
    with pytest.raises(ConfigError, match="SKYLESS_RELIABILITY_PRIOR_DAYS"):
        ReliabilityPriorConfig.from_env({"SKYLESS_RELIABILITY_PRIOR_DAYS": "-1"})
