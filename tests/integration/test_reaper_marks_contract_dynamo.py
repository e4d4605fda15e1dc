"""The `ReaperMarks` contract against DynamoDB (moto's server) and the in-memory marks, side by side: the
very tests of tests/unit/test_reaper_marks_contract.py, so the fake cannot drift."""

from __future__ import annotations

import pytest
import test_reaper_marks_contract as contract

from shared.config import Settings
from shared.store.memory_records import MemoryReaperMarks
from shared.store.reaper_marks import DynamoReaperMarks, ReaperMarks

globals().update({name: getattr(contract, name) for name in dir(contract) if name.startswith("test_")})


@pytest.fixture(params=["memory", "dynamo"])
def marks(request: pytest.FixtureRequest) -> ReaperMarks:
    if request.param == "memory":
        return MemoryReaperMarks()
    stack: Settings = request.getfixturevalue("stack")
    return DynamoReaperMarks(stack)
