"""The DynamoDB store keeps a job's first event and each launch's inside the records written with them, so the
events table's stream never carries those: nothing that reads the stream may act on their states."""

from __future__ import annotations

import pytest

from shared.jobs.run_status import TERMINAL_STATES, record_finished_runs
from shared.notifications.events import TimelineRecord, needs_history, topic_of
from shared.store.jobs import FIRST_STATES_KEPT, LAUNCH_STATE_KEPT

KEPT = (*FIRST_STATES_KEPT, LAUNCH_STATE_KEPT)


@pytest.mark.parametrize("state", KEPT)
def test_no_notification_follows_a_state_whose_event_is_kept_aside(state: str) -> None:
    record = TimelineRecord(job_id="job-00000000000a", at="1#v00000", kind="state", state=state, message="m")
    assert topic_of(record, ["PENDING", "PLANNED", "RECOVERING", "WAITING"]) is None
    assert not needs_history(record)


@pytest.mark.parametrize("state", KEPT)
def test_no_status_file_follows_a_state_whose_event_is_kept_aside(state: str) -> None:
    assert state not in TERMINAL_STATES
    image = {"job_id": {"S": "job-00000000000a"}, "kind": {"S": "state"}, "state": {"S": state}}
    assert record_finished_runs(None, [{"dynamodb": {"NewImage": image}}]) == []  # type: ignore[arg-type]
