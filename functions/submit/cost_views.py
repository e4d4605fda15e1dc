"""Between `GET /costs` and shared.jobs.cost_report: the caller's report, or everyone's for an admin key."""

from __future__ import annotations

from collections.abc import Mapping

from functions.submit.route_table import every_user_asked
from shared.api.cost_models import CostReportResponse
from shared.clusters.views import named_cluster_costs
from shared.config import Settings
from shared.jobs.contract_use import deployment_reservation_use
from shared.jobs.cost_report import cost_report
from shared.jobs.job_filters import parse_days, parse_group
from shared.store.users import User


def report(settings: Settings, caller: User, params: Mapping[str, str]) -> CostReportResponse:
    days = parse_days(params.get("days"))
    by = parse_group(params.get("by"))
    all_users = every_user_asked(caller.admin, params, "every user's costs")
    owner = None if all_users else caller.user_id
    built = cost_report(settings, owner=owner, days=days, by=by)
    attempts = [attempt for job in built.jobs for attempt in job.attempts]
    response = CostReportResponse.of(built).with_reservations(
        deployment_reservation_use(settings, owner, attempts, built.since, built.until)
    )
    response = response.with_clusters(named_cluster_costs(settings, owner=owner))
    if owner is None:
        return response  # storage cost is per user: every user's buckets are the admin listing's business
    from shared.storage.storage_costs import storage_costs

    return response.with_storage(list(storage_costs(settings, owner, days=days)))
