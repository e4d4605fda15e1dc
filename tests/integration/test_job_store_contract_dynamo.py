"""The `JobStore` contract against DynamoDB (moto's server) and the in-memory store, side by side: the very
tests of tests/unit/test_job_store_contract.py, so the fake the unit tier runs on cannot drift."""

from __future__ import annotations

import pytest
import test_job_store_contract as contract

from shared.config import Settings
from shared.store.cooldowns import CooldownStore
from shared.store.jobs import DynamoJobStore

globals().update({name: getattr(contract, name) for name in dir(contract) if name.startswith("test_")})


@pytest.fixture(params=["memory", "dynamo"])
def under_test(request: pytest.FixtureRequest) -> contract.StoreUnderTest:
    if request.param == "memory":
        return contract.memory_store()
    stack: Settings = request.getfixturevalue("stack")
    return contract.StoreUnderTest(DynamoJobStore(stack), CooldownStore(stack))
