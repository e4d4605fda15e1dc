"""Job numbers against DynamoDB (moto's server) and the in-memory store, side by side: the very tests of
tests/unit/test_job_numbers.py; concurrent submissions here race through moto's transactions."""

from __future__ import annotations

import pytest
import test_job_numbers as numbers
from test_job_store_contract import StoreUnderTest, memory_store

from shared.config import Settings
from shared.store.cooldowns import CooldownStore
from shared.store.jobs import DynamoJobStore

globals().update({name: getattr(numbers, name) for name in dir(numbers) if name.startswith("test_")})


@pytest.fixture(params=["memory", "dynamo"])
def under_test(request: pytest.FixtureRequest) -> StoreUnderTest:
    if request.param == "memory":
        return memory_store()
    stack: Settings = request.getfixturevalue("stack")
    return StoreUnderTest(DynamoJobStore(stack), CooldownStore(stack))
