"""The `ScheduleStore` contract against DynamoDB (moto's server) and the in-memory store, side by side: the
very tests of tests/unit/test_schedule_store_contract.py, so the fake the unit tier runs on cannot drift."""

from __future__ import annotations

import pytest
import test_schedule_store_contract as contract

from shared.config import Settings
from shared.store.memory_records import MemoryScheduleStore
from shared.store.schedules import DynamoScheduleStore, ScheduleStore

globals().update({name: getattr(contract, name) for name in dir(contract) if name.startswith("test_")})


@pytest.fixture(params=["memory", "dynamo"])
def schedules(request: pytest.FixtureRequest) -> ScheduleStore:
    if request.param == "memory":
        return MemoryScheduleStore()
    stack: Settings = request.getfixturevalue("stack")
    return DynamoScheduleStore(stack)
