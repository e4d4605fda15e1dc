"""The `NotificationStore` contract (shared/store/notifications.py), one set of assertions for every
implementation: here the in-memory store; tests/integration/test_notification_store_contract_dynamo.py runs
these same tests against DynamoDB (moto's server) too."""

from __future__ import annotations

import pytest

from shared.store.memory_records import MemoryNotificationStore
from shared.store.notifications import NotificationStore


@pytest.fixture(params=["memory"])
def records(request: pytest.FixtureRequest) -> NotificationStore:
    return MemoryNotificationStore()


def test_an_item_reads_back_as_saved_and_a_missing_one_is_none(records: NotificationStore) -> None:
    assert records.read("user#alice") is None
    item = records.new_item("user#alice", email="a@example.com", topics=["failed"], updated_at=5.0)
    records.save(item)
    stored = records.read("user#alice")
    assert stored is not None
    assert (stored.email, stored.topics, stored.slack_secret, stored.updated_at) == (
        "a@example.com", ["failed"], None, 5.0,
    )  # fmt: skip


def test_a_save_replaces_the_whole_item_and_a_read_is_a_copy(records: NotificationStore) -> None:
    records.save(
        records.new_item("job#job-1", slack_secret="p/notify/job/job-1/slack", email="a@example.com")
    )
    records.save(records.new_item("job#job-1", email="b@example.com"))
    stored = records.read("job#job-1")
    assert stored is not None and (stored.slack_secret, stored.email) == (None, "b@example.com")
    stored.email = "changed@example.com"
    again = records.read("job#job-1")
    assert again is not None and again.email == "b@example.com"


def test_a_send_is_claimed_once_and_its_end_recorded(records: NotificationStore) -> None:
    key = "sent#job-1#v00003#slack"
    assert records.claim_send(key)
    claimed = records.read(key)
    assert claimed is not None and (claimed.status, claimed.attempts) == ("sending", 0)
    assert not records.claim_send(key)  # a redelivery
    records.finish_send(key, ok=False, attempts=4)
    finished = records.read(key)
    assert finished is not None and (finished.status, finished.attempts) == ("failed", 4)
    assert not records.claim_send(key)  # finished: still taken
    assert records.claim_send("sent#job-1#v00003#email")
