"""The dashboard's provider scorecard page (`/dashboard/providers`): the table `skyless report providers`
prints, and a chart of each place's launch requests (launched, refused for capacity, refused otherwise)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chalice import Chalice

from functions.submit.dashboard.charts import Bar, Chart, Tick
from functions.submit.dashboard.page_routes import BASE, Page, PageRequest, page_route
from functions.submit.lazy_modules import module_on_first_use
from functions.submit.route_table import ForbiddenError, QueryParam
from shared.wiring import wiring_for

if TYPE_CHECKING:
    from shared.jobs import job_filters
    from shared.reports import provider_reads
    from shared.reports.provider_scorecard import ProviderLine
else:  # imported by the first request of the page
    job_filters = module_on_first_use("shared.jobs.job_filters")
    provider_reads = module_on_first_use("shared.reports.provider_reads")

OUTCOME_COLOURS = (("launched", "#16a34a"), ("no capacity", "#f59e0b"), ("other refusal", "#dc2626"))


def launch_outcomes(lines: list[ProviderLine]) -> Chart:
    """One horizontal bar per place, its launch requests split by what the cloud answered."""
    left, right, row, gap, top = 230.0, 140.0, 22.0, 8.0, 10.0
    width = 900
    if not lines:
        return Chart(width=width, height=40, empty="no launch in this window")
    peak = max(line.launch_requests for line in lines) or 1
    plot = width - left - right
    chart = Chart(width=width, height=int(top + (row + gap) * len(lines) + 10))
    for n, line in enumerate(lines):
        y = top + n * (row + gap)
        place = f"{line.cloud}/{line.region} {line.family}"
        chart.row_labels.append(Tick(8, y + row * 0.68, place))
        x = left
        counts = (line.launches, line.capacity_refusals, line.other_refusals)
        for (label, colour), count in zip(OUTCOME_COLOURS, counts, strict=True):
            if count == 0:
                continue
            w = round(count / peak * plot, 2)
            title = f"{place}: {count} {label} of {line.launch_requests} launch requests"
            chart.bars.append(Bar(round(x, 2), y, w, row, colour, str(count) if w >= 18 else "", title))
            x += w
        rate = line.preemptions_per_spot_hour
        said = f"{rate:.3f} preempt/spot-h" if rate is not None else "no spot hours"
        chart.row_labels.append(Tick(round(x + 6, 2), y + row * 0.68, said))
    chart.legend = [(colour, label) for label, colour in OUTCOME_COLOURS]
    return chart


def register_provider_page(app: Chalice, settings_of: Any) -> None:
    query = (
        QueryParam("days", "integer", "The last N days (default 30)"),
        QueryParam("all_users", "string", "true: every user's (an admin key)"),
    )

    @page_route(
        app,
        settings_of,
        f"{BASE}/providers",
        "GET",
        "What each cloud, region and instance family delivered",
        query=query,
        errors=(400, 403),
    )
    def providers_page(request: PageRequest) -> Page:
        assert request.session is not None
        days = job_filters.parse_days(request.query.get("days"), default=30)
        all_users = job_filters.parse_flag(request.query.get("all_users"), "all_users")
        if all_users and not request.session.user.admin:
            raise ForbiddenError("only an admin key may see every user's jobs", field="all_users")
        owner = None if all_users else request.session.user.user_id
        card = provider_reads.provider_scorecard(wiring_for(request.settings), owner=owner, days=days)
        return Page(
            "providers.html",
            {"card": card, "outcomes": launch_outcomes(card.lines), "days": days, "all_users": all_users},
        )
