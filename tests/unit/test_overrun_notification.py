"""What a deadline job's overrun of its `--hours` estimate tells its owner (pure), from the facts the first
decision past it records (shared/jobs/deadlines.py `overrun_facts`)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.notifications.dispatch import topics_of
from shared.notifications.events import JobFacts, TimelineRecord
from shared.notifications.overruns import compose_overrun
from shared.notifications.slack import slack_payload

JOB = "job-0123456789ab"
AT = 1_796_000_000.0
BASE = {"estimate": 36_000.0, "work_counted": 36_180.0, "deadline_at": AT + 5 * 3600, "at": AT}
SPOT = {"market": "spot", "place": "aws/us-east-1/us-east-1a p3.2xlarge", "hourly_price": 0.918}
ON_DEMAND = {"place": "aws/us-east-1/us-east-1b p3.2xlarge", "hourly_price": 3.06}
FACTS = JobFacts(job_id=JOB, name="train", state="RUNNING", cloud="aws", use_spot=True)


def told(detail: dict[str, Any]) -> tuple[str, str, dict[str, str]]:
    record = TimelineRecord(JOB, f"{AT}#v00007", "overrun", "RUNNING", "ran its estimated 10.0 h", detail)
    notification = compose_overrun(record, FACTS)
    return notification.subject, notification.event_message, dict(notification.lines())


def test_a_spot_cluster_kept_says_the_on_demand_price_after_a_preemption() -> None:
    subject, message, lines = told(
        {**BASE, "running": SPOT, "on_demand": ON_DEMAND, "spot_hourly_price": 0.918}
    )
    assert subject == "skyless: train ran past its 10 h estimate"
    assert message.startswith("It has run 10.05 h of compute, past the 10 h given with --hours")
    assert "the deadline (2026-11-30T05:53:20Z, 5 h away)" in message
    assert "keeps the spot cluster on aws/us-east-1/us-east-1a p3.2xlarge ($0.9180/h)" in message
    assert "after a preemption it restarts on on-demand at once, on aws/us-east-1/us-east-1b" in message
    assert f"`skyless cancel {JOB}`" in message
    assert (lines["Estimate"], lines["Work counted"]) == ("10 h", "10.05 h")
    assert lines["Now"] == "spot kept ($0.9180/h)"
    assert lines["After a preemption"] == (
        "on-demand on aws/us-east-1/us-east-1b p3.2xlarge at $3.0600/h, 3.3x the spot price ($0.9180/h)"
    )


def test_an_on_demand_cluster_kept_stays_to_the_end_and_says_no_preemption_plan() -> None:
    running = {**SPOT, "market": "on_demand", "hourly_price": 3.06}
    _, message, lines = told({**BASE, "running": running, "on_demand": ON_DEMAND})
    assert (
        "keeps the on-demand cluster on aws/us-east-1/us-east-1a p3.2xlarge ($3.0600/h) to the end" in message
    )
    assert lines["Now"] == "on-demand kept to the end ($3.0600/h)" and "After a preemption" not in lines


def test_a_relaunch_past_the_estimate_restarts_on_on_demand_now() -> None:
    _, message, lines = told({**BASE, "on_demand": ON_DEMAND, "spot_hourly_price": 1.02})
    assert (
        "it restarts now on on-demand, on aws/us-east-1/us-east-1b p3.2xlarge at $3.0600/h, 3.0x" in message
    )
    assert lines["Now"].startswith("restarting on on-demand on aws/us-east-1/us-east-1b")


def test_a_plan_without_on_demand_says_it_waits_for_spot() -> None:
    _, message, lines = told({**BASE, "running": SPOT, "spot_hourly_price": 0.918})
    assert "the plan has no on-demand place, so after a preemption it waits for spot" in message
    assert lines["After a preemption"] == "waits for spot (the plan has no on-demand place)"
    _, message, lines = told(dict(BASE))
    assert message.count("waits for spot") == 1 and lines["Now"] == "waiting for spot (no on-demand place)"


@pytest.mark.parametrize(
    ("kind", "topics"), [("overrun", ["overrun"]), ("note", []), ("budget", ["budget"])]
)  # fmt: skip
def test_only_the_overrun_event_tells_the_overrun(kind: str, topics: list[str]) -> None:
    record = TimelineRecord(JOB, f"{AT}#v00007", kind, "RUNNING", "ran its estimated 10.0 h", dict(BASE))
    assert topics_of(record, []) == topics


def test_the_slack_message_carries_the_facts() -> None:
    record = TimelineRecord(JOB, f"{AT}#v1", "overrun", "RUNNING", "", {**BASE, "running": SPOT})
    payload = slack_payload(compose_overrun(record, FACTS))
    assert payload["text"] == "skyless: train ran past its 10 h estimate"
    shown = str(payload["blocks"])
    assert "*Estimate*" in shown and "*Work counted*" in shown and "*Deadline*" in shown and JOB in shown
