"""The API bodies of budgets (`GET /budget`, `PUT /budget`): a user's, or with `team` a team's."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from shared.api.deferred_model import DeferredModel
from shared.api.models import RequestBody


class BudgetRequest(RequestBody):
    monthly: float = Field(
        ge=0, le=10_000_000, description="USD per calendar month (UTC); 0 removes the limit."
    )
    action: Literal["stop", "warn"] = Field("stop", description="At 100 %: stop running jobs, or only warn.")
    user_id: str | None = Field(
        None, max_length=128, description="Another user's budget (an admin key only); default: the caller's."
    )
    team: str | None = Field(
        None, max_length=63, description="A team's budget, instead of a user's (set: an admin key only)."
    )


class BudgetResponse(DeferredModel):
    user_id: str | None = Field(None, description="Whose budget; None for a team's.")
    team: str | None = Field(None, description="The team whose budget this is (its members' spend).")
    month: str = Field(description="YYYY-MM, UTC.")
    monthly: float | None = Field(None, description="USD; None: no monthly budget.")
    action: str | None = None
    spent: float = Field(
        description="USD this month: ended attempts (this month's share) plus the clusters running now."
    )
    spent_ended: float
    spent_running: float
    percent: float | None = None
    teams: list[BudgetResponse] = Field(
        default_factory=list, description="A user's answer: the budgets of the teams the user is a member of."
    )
