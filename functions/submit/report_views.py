"""Between `GET /reports/providers` and shared.reports: the caller's scorecard, or everyone's for an admin."""

from __future__ import annotations

from collections.abc import Mapping

from functions.submit.route_table import every_user_asked
from shared.api.report_models import ProviderScorecardResponse
from shared.config import Settings
from shared.jobs.job_filters import parse_days
from shared.reports.provider_reads import provider_scorecard
from shared.store.users import User
from shared.wiring import wiring_for


def providers(settings: Settings, caller: User, params: Mapping[str, str]) -> ProviderScorecardResponse:
    days = parse_days(params.get("days"), default=30)
    all_users = every_user_asked(caller.admin, params, "every user's jobs")
    owner = None if all_users else caller.user_id
    return ProviderScorecardResponse.of(provider_scorecard(wiring_for(settings), owner=owner, days=days))
