"""The API bodies of budgets (`GET /budget`, `PUT /budget`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from shared.api.models import RequestBody


class BudgetRequest(RequestBody):
    monthly: float = Field(
        ge=0, le=10_000_000, description="USD per calendar month (UTC); 0 removes the limit."
    )
    action: Literal["stop", "warn"] = Field("stop", description="At 100 %: stop running jobs, or only warn.")
    user_id: str | None = Field(
        None, max_length=128, description="Another user's budget (an admin key only); default: the caller's."
    )


class BudgetResponse(BaseModel):
    user_id: str
    month: str = Field(description="YYYY-MM, UTC.")
    monthly: float | None = Field(None, description="USD; None: no monthly budget.")
    action: str | None = None
    spent: float = Field(description="USD this month: ended jobs plus running ones up to now.")
    spent_ended: float
    spent_running: float
    percent: float | None = None
