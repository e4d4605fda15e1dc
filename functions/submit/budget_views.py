"""Between `GET/PUT /budget` and shared/budgets: a user's or a team's monthly budget and this month's spend
against it. A user sets their own; an admin key sets anyone's, and a team's; a team's admin sets the team's.
A team's budget is read by its members and admin keys; to anyone else the team does not exist."""

from __future__ import annotations

import time
from collections.abc import Mapping

from functions.submit.route_table import ForbiddenError, NotFoundError
from shared.api.budget_models import BudgetRequest, BudgetResponse
from shared.budgets.limits import Spend, month_of
from shared.budgets.records import Budget, team_scope, user_scope
from shared.config import Settings
from shared.jobs.budget_checks import month_spend, team_spend
from shared.store.users import User
from shared.tenants import admin, members
from shared.wiring import wiring_for


def _whose(caller: User, user_id: str | None) -> str:
    if user_id and user_id != caller.user_id and not caller.admin:
        raise ForbiddenError("only an admin key may read or set another user's budget", field="user_id")
    return user_id or caller.user_id


def _readable_team(settings: Settings, caller: User, team: str) -> str:
    members = wiring_for(settings).budgets.members_of(team) if len(team) <= 63 else set()
    if caller.user_id not in members and not (caller.admin and team in admin.teams(settings)):
        raise NotFoundError(f"no team {team}", field="team", hint="`skyless team list` shows your teams")
    return team


def show(settings: Settings, caller: User, params: Mapping[str, str]) -> BudgetResponse:
    if params.get("team"):
        return team_budget_of(settings, _readable_team(settings, caller, params["team"]))
    return budget_of(settings, _whose(caller, params.get("user_id")))


def put(settings: Settings, caller: User, body: BudgetRequest) -> BudgetResponse:
    if body.team is not None:
        if not (caller.admin or members.is_team_admin(settings, body.team, caller.user_id)):
            raise ForbiddenError(
                "only an admin key or the team's admin may set a team's budget", field="team"
            )
        team = _readable_team(settings, caller, body.team)
        wiring_for(settings).budgets.put(Budget(team_scope(team), body.monthly, body.action, caller.user_id))
        return team_budget_of(settings, team)
    user_id = _whose(caller, body.user_id)
    wiring_for(settings).budgets.put(Budget(user_scope(user_id), body.monthly, body.action, caller.user_id))
    return budget_of(settings, user_id)


def _answer(budget: Budget | None, spent: Spend, now: float, **whose: str) -> BudgetResponse:
    limit = budget.monthly_limit if budget is not None and budget.monthly_limit > 0 else None
    return BudgetResponse(
        **whose,
        month=month_of(now),
        monthly=limit,
        action=budget.action if limit is not None and budget is not None else None,
        spent=spent.total,
        spent_ended=spent.finished,
        spent_running=spent.live,
        percent=round(100 * spent.total / limit, 1) if limit else None,
    )


def team_budget_of(settings: Settings, team: str) -> BudgetResponse:
    """A team's monthly budget (if any) and its members' spend this month."""
    wiring = wiring_for(settings)
    now = time.time()
    return _answer(wiring.budgets.get(team_scope(team)), team_spend(wiring, team, now), now, team=team)


def budget_of(settings: Settings, user_id: str) -> BudgetResponse:
    """The user's monthly budget (if any) and this month's spend: the API's answer and the costs page's."""
    wiring = wiring_for(settings)
    now = time.time()
    answer = _answer(wiring.budgets.get(user_scope(user_id)), month_spend(wiring, user_id, now), now,
                     user_id=user_id)  # fmt: skip
    team_budgets = wiring.budgets.team_budgets()
    if team_budgets:
        mine = sorted(wiring.budgets.teams_of(user_id) & team_budgets.keys())
        answer.teams = [team_budget_of(settings, team) for team in mine]
    return answer
