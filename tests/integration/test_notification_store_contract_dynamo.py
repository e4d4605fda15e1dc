"""The `NotificationStore` contract against DynamoDB (moto's server) and the in-memory store, side by side:
the very tests of tests/unit/test_notification_store_contract.py, so the fake cannot drift."""

from __future__ import annotations

import pytest
import test_notification_store_contract as contract

from shared.config import Settings
from shared.store.memory_records import MemoryNotificationStore
from shared.store.notifications import DynamoNotificationStore, NotificationStore

globals().update({name: getattr(contract, name) for name in dir(contract) if name.startswith("test_")})


@pytest.fixture(params=["memory", "dynamo"])
def records(request: pytest.FixtureRequest) -> NotificationStore:
    if request.param == "memory":
        return MemoryNotificationStore()
    stack: Settings = request.getfixturevalue("stack")
    return DynamoNotificationStore(stack)
