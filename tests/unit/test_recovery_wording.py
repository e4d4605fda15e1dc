"""What a move to RECOVERING, and the RUNNING after it, are told as, from the event's detail (pure)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from shared.notifications.dispatch import topics_of
from shared.notifications.events import JobFacts, TimelineRecord, compose
from shared.notifications.recoveries import compose_restart

JOB = "job-0123456789ab"
FACTS = JobFacts(job_id=JOB, name="train", state="RECOVERING")
PREEMPTED = {"cluster": "c", "preempted": True, "restart": False, "warned": True}
LOST = {"cluster": "c", "preempted": False, "restart": False, "warned": False}
RESTART = {"cluster": "c", "preempted": False, "restart": True, "warned": False, "task_failed": True,
           "setup_failed": False, "exit_code": 3, "restart_number": 1, "max_restarts": 2}  # fmt: skip
LISTED = {**RESTART, "exit_code": 42, "exit_code_listed": True}
POLICY_WAIT = {"cluster": "c", "preempted": False, "restart": True, "warned": False, "policy_wait": True}


def event(state: str, detail: dict[str, Any] | None = None, at: int = 0) -> TimelineRecord:
    return TimelineRecord(JOB, f"{at}#v{at}", "state", state, f"{state.lower()} message", detail or {})


def subject(detail: dict[str, Any]) -> str:
    record = event("RECOVERING", detail)
    [topic] = topics_of(record, [])
    notification = compose_restart(record, FACTS) if topic == "restarting" else compose(topic, record, FACTS)
    return notification.subject.removeprefix("skyless: train ")


@pytest.mark.parametrize(
    ("detail", "told"),
    [
        (PREEMPTED, "was preempted; recovering"),
        (LOST, "lost a node; recovering"),
        (RESTART, "failed with exit code 3; restarting (restart 1 of 2)"),
        ({**RESTART, "setup_failed": True}, "failed in setup with exit code 3; restarting (restart 1 of 2)"),
        ({k: v for k, v in RESTART.items() if k != "exit_code"}, "failed; restarting (restart 1 of 2)"),
        (LISTED, "failed with exit code 42; restarting (exit code listed in recover_on_exit_codes)"),
        (
            {**RESTART, "exit_code": Decimal(3), "restart_number": Decimal(2)},  # as a stream image has them
            "failed with exit code 3; restarting (restart 2 of 2)",
        ),
        ({}, "was preempted; recovering"),  # written before the detail said which
        ({"cluster": "c"}, "was preempted; recovering"),
        (POLICY_WAIT, "was stopped by its deadline policy; waiting"),
        ({k: v for k, v in POLICY_WAIT.items() if k != "policy_wait"}, "was preempted; recovering"),  # older
    ],
)  # fmt: skip
def test_each_recovering_says_what_happened(detail: dict[str, Any], told: str) -> None:
    assert subject(detail) == told


def test_the_restart_lines_say_how_many_restarts_are_left_or_that_it_was_not_counted() -> None:
    counted = compose_restart(event("RECOVERING", RESTART), FACTS)
    assert dict(counted.lines())["Restarts"] == "1 of 2 (max_restarts_on_errors); 1 left"
    listed = compose_restart(event("RECOVERING", LISTED), FACTS)
    assert dict(listed.lines())["Restarts"] == "not counted: its exit code is in recover_on_exit_codes"
    assert "recovering message" in listed.text()


@pytest.mark.parametrize(
    ("recoverings", "topic"),
    [
        ([RESTART], "restarted"),
        ([RESTART, RESTART], "restarted"),
        ([RESTART, PREEMPTED], "recovered"),  # the restart's relaunch was preempted too
        ([LOST], "recovered"),
        ([PREEMPTED], "recovered"),
        ([{}], "recovered"),
        ([POLICY_WAIT], "recovered"),
    ],
)
def test_the_running_after_says_restarted_only_when_every_recovery_was_a_restart(
    recoverings: list[dict[str, Any]], topic: str
) -> None:
    earlier = [event("RUNNING", at=0), event("RECOVERING", PREEMPTED, at=1)]  # before the last RUNNING
    earlier += [event("RUNNING", at=2)]
    earlier += [event("RECOVERING", d, at=3 + n) for n, d in enumerate(recoverings)]
    earlier += [event("PLANNED", at=9), event("SETTING_UP", at=10)]
    assert topics_of(event("RUNNING", at=11), earlier) == [topic]
