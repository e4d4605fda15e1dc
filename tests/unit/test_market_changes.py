"""Which RUNNING events tell a deadline job's market change, and what the message says (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.notifications.dispatch import topics_of
from shared.notifications.events import JobFacts, TimelineRecord
from shared.notifications.market_changes import compose_market, market_change
from shared.notifications.records import send_key
from shared.notifications.slack import slack_payload

JOB = "job-0123456789ab"
SPOT_A = {
    "market": "spot",
    "place": "aws/us-east-1/us-east-1a p3.2xlarge",
    "policy_reason": "spot: slack 5 h",
    "hourly_price": 0.918,
}
DEMAND_B = {
    "market": "on_demand",
    "place": "aws/us-east-1/us-east-1b p3.2xlarge",
    "policy_reason": "on-demand: slack 0.4 h is below the safety net",
    "hourly_price": 3.06,
}
SPOT_C = {**SPOT_A, "place": "aws/us-east-1/us-east-1c p3.2xlarge"}


def event(state: str, detail: dict[str, Any] | None = None, at: int = 0) -> TimelineRecord:
    return TimelineRecord(JOB, f"{at}#v{at}", "state", state, state.lower(), detail or {})


def history(*steps: str | dict[str, Any]) -> list[TimelineRecord]:
    """States; a dict is a launch (SETTING_UP) whose detail it is; "MOVE" a planned move's RECOVERING."""
    out = []
    for n, step in enumerate(steps):
        if isinstance(step, dict):
            out.append(event("SETTING_UP", {"instances": ["i-1"], **step}, n))
        elif step == "MOVE":
            out.append(event("RECOVERING", {"cluster": "c", "planned_move": True}, n))
        else:
            out.append(event(step, at=n))
    return out


RUNNING = event("RUNNING", at=99)


@pytest.mark.parametrize(
    ("earlier", "topics"),
    [
        (history("PLANNED", SPOT_A), []),  # a deadline job starting on spot: what its owner expects
        (history("PLANNED", DEMAND_B), ["market"]),  # starting on on-demand is the change of plan
        (history("PLANNED", SPOT_A, "RUNNING", "RECOVERING", "PLANNED", DEMAND_B), ["recovered", "market"]),
        (history("PLANNED", SPOT_A, "RUNNING", "RECOVERING", "WAITING", "PLANNED", SPOT_C), ["recovered"]),
        (history("PLANNED", DEMAND_B, "RUNNING", "MOVE", SPOT_A), ["market"]),  # a move, not a recovery
        (history("PLANNED", SPOT_A, "RUNNING", "MOVE", SPOT_C), []),  # a cheaper place, same market
        (history("PLANNED", DEMAND_B, "RUNNING", "MOVE", "PLANNED", SPOT_A), ["market"]),  # fence waited
        (  # spot A was lost before it ran (never told): the job goes from on-demand to spot C
            history("PLANNED", DEMAND_B, "RUNNING", "MOVE", SPOT_A, "RECOVERING", "PLANNED", SPOT_C),
            ["recovered", "market"],
        ),
        (history("PLANNED", SPOT_A, "RECOVERING", "PLANNED", DEMAND_B), ["recovered", "market"]),  # first run
        (history("PLANNED", DEMAND_B, "RECOVERING", "PLANNED", SPOT_A), ["recovered"]),
        (history("PLANNED", {}, "RUNNING", "RECOVERING", "PLANNED", {}), ["recovered"]),  # plain spot job
        (
            history("PLANNED", {}, "RUNNING", "RECOVERING", "PLANNED", DEMAND_B),
            ["recovered"],
        ),  # unknown before
        (history("PLANNED", DEMAND_B, "RUNNING"), []),  # told at the first RUNNING only
    ],
)
def test_the_topics_a_running_event_tells(earlier: list[TimelineRecord], topics: list[str]) -> None:
    assert topics_of(RUNNING, earlier) == topics


def test_a_planned_moves_recovering_is_no_preemption_and_a_real_one_still_is() -> None:
    assert topics_of(history("MOVE")[0], []) == []
    assert topics_of(event("RECOVERING", {"cluster": "c"}), []) == ["preempted"]


def test_the_message_says_which_way_why_where_and_the_price_before_and_after() -> None:
    change = market_change(RUNNING, history("PLANNED", SPOT_A, "RUNNING", "RECOVERING", "PLANNED", DEMAND_B))
    assert change is not None
    facts = JobFacts(job_id=JOB, name="train", state="RUNNING", cloud="aws", region="us-east-1")
    notification = compose_market(change, RUNNING, facts)
    assert notification.subject == "skyless: train moved from spot to on-demand"
    assert notification.event_message == (
        "The deadline policy moved it from spot on aws/us-east-1/us-east-1a p3.2xlarge ($0.9180/h) to"
        " on-demand on aws/us-east-1/us-east-1b p3.2xlarge ($3.0600/h):"
        " on-demand: slack 0.4 h is below the safety net."
    )
    lines = dict(notification.lines())
    assert lines["Market"] == "spot -> on-demand" and lines["Price now"] == "$3.0600/h (was $0.9180/h)"
    assert "Market: spot -> on-demand" in notification.text()
    fields = slack_payload(notification)["blocks"][2]["fields"]
    assert len(fields) <= 10  # Block Kit's limit for a section's fields
    first = market_change(RUNNING, history("PLANNED", {**DEMAND_B, "hourly_price": None}))
    assert first is not None and first.headline == "started on on-demand"
    assert dict(first.lines())["Price now"] == "price unknown"


def test_a_second_topic_of_one_event_has_its_own_send_record() -> None:
    at = "1700000000.5#v7"
    assert send_key(JOB, at, "slack") == f"sent#{JOB}#v7#slack"  # the key every send had
    assert send_key(JOB, at, "slack", also="market") == f"sent#{JOB}#v7#slack#market"
