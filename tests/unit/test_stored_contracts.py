"""The stored contracts as plans read them: once per warm process per minute however many plans there are, a
change made by another process seen once that minute is past, an admin's own change at once; a set over a
version that moved is a conflict."""

from __future__ import annotations

import pytest

from shared.config import Settings
from shared.errors import ConflictError
from shared.jobs import contract_admin, contract_use
from shared.jobs.contract_admin import set_contracts
from shared.store.contract_records import MemoryContractRecords
from shared.store.users import User
from shared.wiring import wiring_for

ADMIN = User("u-root", "root", admin=True)


@pytest.fixture(autouse=True)
def audited(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The audit table is DynamoDB's (tests/integration/test_admin_contracts.py reads it); here, the calls."""
    actions: list[str] = []
    monkeypatch.setattr(
        contract_admin, "append_audit", lambda settings, **entry: actions.append(entry["action"])
    )
    return actions


def discount(percent: int) -> str:
    return f"contracts: {{discounts: [{{cloud: aws, on_demand: {percent}}}]}}\n"


def percent_off(stack: Settings) -> float:
    prices = contract_use.prices_for(wiring_for(stack), "u-alice")
    assert prices is not None
    (found,) = prices.contracts.discounts
    return found.on_demand


def test_a_thousand_plans_in_a_warm_process_read_the_stored_contracts_once(stack: Settings) -> None:
    wiring = wiring_for(stack)
    records = wiring.contracts
    assert isinstance(records, MemoryContractRecords)
    set_contracts(wiring, ADMIN, file="deal.yaml", text=discount(20))
    contract_use._stored.clear()  # a cold process: nothing read yet
    before = records.reads
    assert [percent_off(stack) for _ in range(1000)] == [20.0] * 1000
    assert records.reads - before == 1


def test_a_change_by_another_process_is_planned_at_once_the_minute_is_past(
    stack: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    wiring = wiring_for(stack)
    set_contracts(wiring, ADMIN, file="deal.yaml", text=discount(20))
    assert percent_off(stack) == 20.0
    wiring.contracts.put(discount(35), "deal.yaml", "u-other-admin", after=1)  # the API, elsewhere
    assert percent_off(stack) == 20.0  # still within this process's minute
    now = contract_use.time.monotonic()
    monkeypatch.setattr(contract_use.time, "monotonic", lambda: now + contract_use.STORED_TTL_SECONDS + 1)
    assert percent_off(stack) == 35.0


def test_the_admins_own_change_is_planned_at_at_once(stack: Settings, audited: list[str]) -> None:
    wiring = wiring_for(stack)
    set_contracts(wiring, ADMIN, file="deal.yaml", text=discount(20))
    assert percent_off(stack) == 20.0
    set_contracts(wiring, ADMIN, file="deal.yaml", text=discount(30))
    assert percent_off(stack) == 30.0
    assert audited == ["contracts.set", "contracts.set"]


def test_a_set_over_a_version_that_moved_is_a_conflict(stack: Settings) -> None:
    records = wiring_for(stack).contracts
    records.put(discount(20), "deal.yaml", "u-a", after=0)
    records.put(discount(25), "deal.yaml", "u-b", after=1)
    with pytest.raises(ConflictError):
        records.put(discount(30), "deal.yaml", "u-a", after=1)
    stored = records.get()
    assert stored is not None and (stored.version, stored.set_by) == (2, "u-b")
