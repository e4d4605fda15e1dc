"""The dashboard's Jinja2 environment (autoescaping every template) and its static files (package data)."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jinja2 import Environment

    from functions.submit.dashboard.page_routes import PageRequest

STATIC_FILES = {"style.css": "text/css; charset=utf-8", "dashboard.js": "text/javascript; charset=utf-8"}
NAV = (
    ("jobs", "/dashboard", "Jobs"),
    ("clusters", "/dashboard/clusters", "Clusters"),
    ("costs", "/dashboard/costs", "Costs"),
    ("providers", "/dashboard/providers", "Providers"),
    ("schedules", "/dashboard/schedules", "Schedules"),
    ("notifications", "/dashboard/notifications", "Notifications"),
    ("plan", "/dashboard/plan", "Plan a task"),
)
ACTIVE = {
    "jobs.html": "jobs",
    "job.html": "jobs",
    "costs.html": "costs",
    "clusters.html": "clusters",
    "cluster.html": "clusters",
    "providers.html": "providers",
    "schedules.html": "schedules",
    "notifications.html": "notifications",
    "plan.html": "plan",
}


def _when(value: str | float | None) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, int | float):
        moment = datetime.fromtimestamp(float(value), UTC)
    else:
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _money(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 10:
        return f"${value:,.2f}"
    return f"${value:,.4f}" if abs(value) >= 0.01 or value == 0 else f"${value:.6f}"


@cache
def environment() -> Environment:
    # Imported here: only the dashboard's pages render templates, not the API's routes.
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    env = Environment(
        loader=PackageLoader("functions.submit.dashboard", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = _when
    env.filters["money"] = _money
    return env


def render(template: str, request: PageRequest, **context: Any) -> str:
    session = request.session
    return (
        environment()
        .get_template(template)
        .render(
            user=session.user if session else None,
            csrf=request.csrf,
            nav=NAV,
            active=ACTIVE.get(template, ""),
            **context,
        )
    )


@cache
def static_file(name: str) -> str | None:
    if name not in STATIC_FILES:
        return None
    return resources.files("functions.submit.dashboard").joinpath("static", name).read_text("utf-8")
