"""Between `GET/PUT /budget` and shared/budgets: a user's monthly budget and this month's spend against it.
A user sets their own; an admin key sets anyone's."""

from __future__ import annotations

import time
from collections.abc import Mapping

from functions.submit.route_table import ForbiddenError
from shared.api.budget_models import BudgetRequest, BudgetResponse
from shared.budgets.limits import month_of
from shared.budgets.records import Budget, user_scope
from shared.config import Settings
from shared.jobs.budget_checks import month_spend
from shared.store.users import User
from shared.wiring import wiring_for


def _whose(caller: User, user_id: str | None) -> str:
    if user_id and user_id != caller.user_id and not caller.admin:
        raise ForbiddenError("only an admin key may read or set another user's budget", field="user_id")
    return user_id or caller.user_id


def show(settings: Settings, caller: User, params: Mapping[str, str]) -> BudgetResponse:
    return budget_of(settings, _whose(caller, params.get("user_id")))


def put(settings: Settings, caller: User, body: BudgetRequest) -> BudgetResponse:
    user_id = _whose(caller, body.user_id)
    wiring_for(settings).budgets.put(Budget(user_scope(user_id), body.monthly, body.action, caller.user_id))
    return budget_of(settings, user_id)


def budget_of(settings: Settings, user_id: str) -> BudgetResponse:
    """The user's monthly budget (if any) and this month's spend: the API's answer and the costs page's."""
    wiring = wiring_for(settings)
    now = time.time()
    budget = wiring.budgets.get(user_scope(user_id))
    limit = budget.monthly_limit if budget is not None and budget.monthly_limit > 0 else None
    spent = month_spend(wiring, user_id, now)
    return BudgetResponse(
        user_id=user_id,
        month=month_of(now),
        monthly=limit,
        action=budget.action if limit is not None and budget is not None else None,
        spent=spent.total,
        spent_ended=spent.finished,
        spent_running=spent.live,
        percent=round(100 * spent.total / limit, 1) if limit else None,
    )
