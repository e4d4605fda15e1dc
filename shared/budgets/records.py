"""Monthly budgets, kept in the events table under the partition `budgets` (`at` = `user#<user id>` or
`team#<team>`), and the claim of each notice (`notice#<scope>#<month>#<percent>`), so a sweep run twice
notifies once.

The `BudgetStore` port, its DynamoDB adapter, and `MemoryBudgets` (same conditions, for tests). The port also
answers who is in which team (the tenancy table's), which is all a team budget needs to know of teams.
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
from shared.store import tenancy
from shared.store.models import with_shared_session

BUDGETS_PARTITION = "budgets"


@dataclass(frozen=True)
class Budget:
    scope: str  # "user#<user id>" or "team#<team>"
    monthly_limit: float
    action: str  # "stop" | "warn"
    set_by: str


def user_scope(user_id: str) -> str:
    return f"user#{user_id}"


def team_scope(team: str) -> str:
    return f"team#{team}"


class BudgetStore(Protocol):
    def get(self, scope: str) -> Budget | None: ...

    def put(self, budget: Budget) -> None:
        """Set (or replace) the scope's budget."""
        ...

    def claim_notice(self, key: str) -> bool:
        """True for the one caller that claims `key` first; False for every later one."""
        ...

    def team_budgets(self) -> dict[str, Budget]:
        """Every team's budget by team name (one Query of the partition's `team#` items)."""
        ...

    def teams_of(self, user_id: str) -> set[str]: ...

    def members_of(self, team: str) -> set[str]: ...


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


def _budget(item: BudgetItem) -> Budget:
    return Budget(item.at, float(item.monthly_limit or 0), item.action or "stop", item.set_by or "")


class DynamoBudgets:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.model = budget_model(settings)

    def get(self, scope: str) -> Budget | None:
        try:
            item = self.model.get(BUDGETS_PARTITION, scope, consistent_read=True)
        except DoesNotExist:
            return None
        return _budget(item)

    def team_budgets(self) -> dict[str, Budget]:
        items = self.model.query(BUDGETS_PARTITION, self.model.at.startswith("team#"), consistent_read=True)
        budgets = (_budget(item) for item in items)
        return {b.scope.removeprefix("team#"): b for b in budgets if b.monthly_limit > 0}

    def teams_of(self, user_id: str) -> set[str]:
        return tenancy.teams_of(self.settings, user_id)

    def members_of(self, team: str) -> set[str]:
        return tenancy.members_of(self.settings, team)

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
    def __init__(self, teams: dict[str, set[str]] | None = None) -> None:
        self._budgets: dict[str, Budget] = {}
        self._claims: set[str] = set()
        self._lock = threading.Lock()
        self.teams = teams or {}  # team -> its members

    def team_budgets(self) -> dict[str, Budget]:
        return {
            scope.removeprefix("team#"): budget
            for scope, budget in self._budgets.items()
            if scope.startswith("team#") and budget.monthly_limit > 0
        }

    def teams_of(self, user_id: str) -> set[str]:
        return {team for team, members in self.teams.items() if user_id in members}

    def members_of(self, team: str) -> set[str]:
        return set(self.teams.get(team, set()))

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
