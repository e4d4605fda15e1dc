"""The web dashboard, served by the API's own Lambda: jobs, a job's timeline/plan/attempts/logs, costs,
schedules, notification settings and a planner, behind a sign-in with the user's API key.

    from functions.submit.dashboard import register_dashboard
    register_dashboard(app)          # adds GET / and /dashboard/... to the Chalice app

Server-rendered Jinja2 (autoescaped) with one small script for live logs; pictures are inline SVG.
Sessions and CSRF: `sessions.py`; how routes are registered: `page_routes.py`; the pages: `pages.py`;
the named clusters' pages: `cluster_pages.py`.
"""

from __future__ import annotations

from collections.abc import Callable

from chalice import Chalice

from functions.submit.dashboard.cluster_pages import register_cluster_pages
from functions.submit.dashboard.pages import register_pages
from functions.submit.dashboard.provider_page import register_provider_page
from shared.config import Settings

__all__ = ["register_dashboard"]


def register_dashboard(app: Chalice, settings_of: Callable[[], Settings] = Settings.from_env) -> None:
    register_pages(app, settings_of)
    register_cluster_pages(app, settings_of)
    register_provider_page(app, settings_of)
