"""Monthly budgets, kept in the events table under the partition `budgets` (`at` = `user#<user id>`), and
the claim of each notice (`notice#<scope>#<month>#<percent>`), so a sweep run twice notifies once.

The `BudgetStore` port, its DynamoDB adapter, and `MemoryBudgets` (same conditions, for tests).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import cache
from typing import Protocol

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import DoesNotExist, PutError
from pynamodb.models import Model

from shared.config import Settings
from shared.store.models import with_shared_session

BUDGETS_PARTITION = "budgets"


@dataclass(frozen=True)
class Budget:
    scope: str  # "user#<user id>"
    monthly_limit: float
    action: str  # "stop" | "warn"
    set_by: str


def user_scope(user_id: str) -> str:
    return f"user#{user_id}"


class BudgetStore(Protocol):
    def get(self, scope: str) -> Budget | None: ...

    def put(self, budget: Budget) -> None:
        """Set (or replace) the scope's budget."""
        ...

    def claim_notice(self, key: str) -> bool:
        """True for the one caller that claims `key` first; False for every later one."""
        ...


class BudgetItem(Model):
    class Meta:
        table_name = "unbound-events"

    job_id = UnicodeAttribute(hash_key=True)  # always BUDGETS_PARTITION
    at = UnicodeAttribute(range_key=True)  # the scope, or "notice#..."
    kind = UnicodeAttribute(default="budget")
    message = UnicodeAttribute(default="")
    monthly_limit = NumberAttribute(null=True)
    action = UnicodeAttribute(null=True)
    set_by = UnicodeAttribute(null=True)


@cache
def budget_model(settings: Settings) -> type[BudgetItem]:
    meta = type(
        "Meta",
        (),
        {
            "table_name": settings.table_name("events"),
            "region": settings.region,
            "host": settings.endpoint_url,
        },
    )
    return with_shared_session(type(f"BudgetItem_{settings.prefix}", (BudgetItem,), {"Meta": meta}))


class DynamoBudgets:
    def __init__(self, settings: Settings) -> None:
        self.model = budget_model(settings)

    def get(self, scope: str) -> Budget | None:
        try:
            item = self.model.get(BUDGETS_PARTITION, scope, consistent_read=True)
        except DoesNotExist:
            return None
        return Budget(scope, float(item.monthly_limit or 0), item.action or "stop", item.set_by or "")

    def put(self, budget: Budget) -> None:
        self.model(
            job_id=BUDGETS_PARTITION,
            at=budget.scope,
            message=f"monthly budget ${budget.monthly_limit:.2f} ({budget.action})",
            monthly_limit=budget.monthly_limit,
            action=budget.action,
            set_by=budget.set_by,
        ).save()

    def claim_notice(self, key: str) -> bool:
        try:
            self.model(job_id=BUDGETS_PARTITION, at=key, kind="budget_notice").save(
                condition=self.model.at.does_not_exist()
            )
        except PutError as error:
            if "ConditionalCheckFailed" in str(error.cause_response_code or error):
                return False
            raise
        return True


class MemoryBudgets:
    def __init__(self) -> None:
        self._budgets: dict[str, Budget] = {}
        self._claims: set[str] = set()
        self._lock = threading.Lock()

    def get(self, scope: str) -> Budget | None:
        return self._budgets.get(scope)

    def put(self, budget: Budget) -> None:
        self._budgets[budget.scope] = budget

    def claim_notice(self, key: str) -> bool:
        with self._lock:
            if key in self._claims:
                return False
            self._claims.add(key)
            return True
