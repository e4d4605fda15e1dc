"""The dashboard's pages: each asks `shared` for the signed-in user's records and hands them to a template.

A user sees only what is theirs: every read names `owner=session.user.user_id`, and another user's job
answers the same 404 as a job that does not exist.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from chalice import Chalice, Response

from functions.submit.dashboard import charts
from functions.submit.dashboard.page_routes import (
    BASE,
    CSRF_FIELD,
    Page,
    PageRequest,
    Redirect,
    json_response,
    page_route,
)
from functions.submit.dashboard.rendering import STATIC_FILES, static_file
from functions.submit.dashboard.sessions import (
    SESSION_COOKIE,
    SIGN_IN_COOKIE,
    SIGN_IN_SECONDS,
    SignInNeeded,
    cookie_header,
    session_seconds,
)
from functions.submit.lazy_modules import module_on_first_use
from functions.submit.route_table import ForbiddenError, QueryParam, every_user_asked
from shared.api.models import PlanRequest
from shared.config import Settings
from shared.errors import NotFoundError, UserError
from shared.states import JobState, is_terminal
from shared.wiring import wiring_for

SIGN_IN_REASONS = {
    "expired": "Your session has ended. Sign in again.",
    "revoked": "The API key of your session was revoked. Sign in with another.",
    "signed_out": "You signed out. Sign in again.",
}
STATES = tuple(s.value for s in JobState)
MAX_RANKS_SHOWN = 16

if TYPE_CHECKING:
    from functions.submit import budget_views, job_views, schedule_views
    from shared.clusters import views as cluster_views
    from shared.jobs import blocks, cancellation, every_users_jobs, job_filters, job_listing
    from shared.jobs import cost_report as cost_reports
    from shared.jobs import views as job_reads
    from shared.notifications import settings as notification_settings
    from shared.schedules import operations as schedule_operations
    from shared.store import users
else:  # imported by the first request of a page that uses them
    budget_views = module_on_first_use("functions.submit.budget_views")
    job_views = module_on_first_use("functions.submit.job_views")
    schedule_views = module_on_first_use("functions.submit.schedule_views")
    cluster_views = module_on_first_use("shared.clusters.views")
    blocks = module_on_first_use("shared.jobs.blocks")
    cancellation = module_on_first_use("shared.jobs.cancellation")
    cost_reports = module_on_first_use("shared.jobs.cost_report")
    every_users_jobs = module_on_first_use("shared.jobs.every_users_jobs")
    job_filters = module_on_first_use("shared.jobs.job_filters")
    job_listing = module_on_first_use("shared.jobs.job_listing")
    job_reads = module_on_first_use("shared.jobs.views")
    notification_settings = module_on_first_use("shared.notifications.settings")
    schedule_operations = module_on_first_use("shared.schedules.operations")
    users = module_on_first_use("shared.store.users")


def _owner(request: PageRequest) -> str:
    assert request.session is not None
    return request.session.user.user_id


def _safe_next(value: str | None) -> str:
    """Only a dashboard path (never another site) is a place to go after signing in."""
    if value and value.startswith(BASE) and not value.startswith("//") and "\\" not in value:
        return value
    return BASE


def register_pages(app: Chalice, settings_of: Any) -> None:
    def route(path: str, method: str, summary: str, **spec: Any) -> Any:
        return page_route(app, settings_of, path, method, summary, **spec)

    @route("/", "GET", "The dashboard (a redirect)", auth="none", status=302)
    def root(request: PageRequest) -> Redirect:
        return Redirect(BASE, status=302)

    @route(
        f"{BASE}/login",
        "GET",
        "The dashboard's sign-in form",
        auth="none",
        query=(QueryParam("next", "string", "Where to go after signing in"),),
    )
    def sign_in_page(request: PageRequest) -> Page:
        cookie, token = request.keeper.sign_in_form()
        request.set_cookies.append(
            cookie_header(SIGN_IN_COOKIE, cookie, max_age=SIGN_IN_SECONDS, secure=request.secure)
        )
        reason = SIGN_IN_REASONS.get(request.query.get("why", ""))
        return Page(
            "login.html",
            {
                "sign_in_token": token,
                "next": _safe_next(request.query.get("next")),
                "reason": reason,
                "error": None,
            },
        )

    @route(
        f"{BASE}/login",
        "POST",
        "Sign in: an API key for a session cookie",
        auth="none",
        status=303,
        form=("api_key", "next"),
        errors=(401, 403),
    )
    def sign_in(request: PageRequest) -> Page | Redirect:
        request.keeper.check_sign_in_form(request.headers, request.form.get(CSRF_FIELD))
        try:
            _, cookie = request.keeper.sign_in(request.form.get("api_key", ""))
        except SignInNeeded as exc:
            cookie, token = request.keeper.sign_in_form()
            request.set_cookies.append(
                cookie_header(SIGN_IN_COOKIE, cookie, max_age=SIGN_IN_SECONDS, secure=request.secure)
            )
            return Page(
                "login.html",
                {
                    "sign_in_token": token,
                    "next": _safe_next(request.form.get("next")),
                    "reason": None,
                    "error": exc.message,
                },
                status=401,
            )
        request.set_cookies.append(
            cookie_header(SESSION_COOKIE, cookie, max_age=session_seconds(), secure=request.secure)
        )
        request.set_cookies.append(cookie_header(SIGN_IN_COOKIE, "", max_age=0, secure=request.secure))
        return Redirect(_safe_next(request.form.get("next")))

    @route(
        f"{BASE}/logout", "POST", "Sign out (the session ends server-side; the cookie is cleared)", status=303
    )
    def sign_out(request: PageRequest) -> Redirect:
        assert request.session is not None  # a session route: signed in, CSRF checked
        request.keeper.sign_out(request.session)
        request.set_cookies.append(cookie_header(SESSION_COOKIE, "", max_age=0, secure=request.secure))
        return Redirect(f"{BASE}/login")

    @route(
        f"{BASE}/static/{{name}}",
        "GET",
        "The dashboard's stylesheet and script",
        auth="none",
        media="text/plain",
        errors=(404,),
    )
    def static(request: PageRequest, name: str) -> Response:
        text = static_file(name)
        if text is None:
            raise NotFoundError(f"no file {name[:40]}")
        return Response(
            body=text,
            status_code=200,
            headers={"Content-Type": STATIC_FILES[name], "Cache-Control": "max-age=300"},
        )

    job_query = (
        QueryParam("state", "string", "Only jobs in this state"),
        QueryParam("name", "string", "Only jobs whose name contains this"),
        QueryParam("since", "string", "Only jobs submitted since (2d, 12h, or an ISO time)"),
        QueryParam("limit", "integer", "At most this many jobs"),
        QueryParam("cursor", "string", "The page after this one's last job"),
        QueryParam("all_users", "string", "true: every user's jobs, each with its owner (an admin key)"),
    )

    @route(BASE, "GET", "The dashboard: the user's jobs and their spend", query=job_query, errors=(400, 403))
    def jobs_page(request: PageRequest) -> Page:
        assert request.session is not None
        q = request.query
        where = job_filters.job_filter(
            state=q.get("state"),
            since=q.get("since"),
            name=q.get("name"),
            limit=q.get("limit") or "100",
            cursor=q.get("cursor"),
        )
        all_users = every_user_asked(request.session.user.admin, q, "every user's jobs")
        if all_users:  # the page `GET /jobs?all_users=true` answers
            page = every_users_jobs.list_every_users_page(wiring_for(request.settings), where)
        else:
            page = job_listing.list_job_page(wiring_for(request.settings), owner=_owner(request), where=where)
        jobs = page.jobs
        next_page = (
            urlencode({**{k: v for k, v in q.items() if v}, "cursor": page.cursor}) if page.cursor else None
        )
        now = time.time()
        report = cost_reports.cost_report(
            request.settings, owner=None if all_users else _owner(request), days=14, by="cloud", now=now
        )
        counts: dict[str, int] = {}
        for job in jobs:
            counts[job.state] = counts.get(job.state, 0) + 1
        return Page(
            "jobs.html",
            {
                "jobs": jobs,
                "counts": counts,
                "states": STATES,
                "filters": q,
                "next_page": next_page,
                "report": report,
                "spend": charts.spend_by_cloud(report.daily, days=14, now=now),
                "all_users": all_users,
                "owners": users.user_names(request.settings) if all_users else {},
            },
        )

    @route(
        f"{BASE}/jobs/{{job_id}}", "GET", "One job: timeline, plan, failover, attempts, logs", errors=(404,)
    )
    def job_page(request: PageRequest, job_id: str) -> Page:
        return Page("job.html", _job_context(request, job_id))

    @route(
        f"{BASE}/jobs/{{job_id}}/logs",
        "GET",
        "A node's log from a cursor, for the job page",
        media="application/json",
        errors=(400, 401, 404),
        query=(QueryParam("rank", "integer", "The node"), QueryParam("after", "string", "A cursor")),
    )
    def job_logs(request: PageRequest, job_id: str) -> Response:
        rank = _rank(request.query.get("rank"))
        asked = job_reads.ReadLogs(
            job_id, _owner(request), rank=rank, after=request.query.get("after") or None
        )
        page = job_reads.read_logs(wiring_for(request.settings), asked)
        return json_response({"text": page.text, "cursor": page.cursor, "finished": page.finished})

    @route(f"{BASE}/jobs/{{job_id}}/cancel", "POST", "Cancel a job", status=303, errors=(403, 404, 409))
    def cancel(request: PageRequest, job_id: str) -> Redirect:
        cancellation.cancel_job(wiring_for(request.settings), job_id, owner=_owner(request))
        return Redirect(f"{BASE}/jobs/{quote(job_id, safe='')}")

    cost_query = (
        QueryParam("days", "integer", "The last N days (default 7)"),
        QueryParam("by", "string", "cloud, user, job or day"),
        QueryParam("all_users", "string", "true: every user's (an admin key)"),
    )

    @route(
        f"{BASE}/costs",
        "GET",
        "Cost report: per attempt, against on-demand, savings",
        query=cost_query,
        errors=(400, 403),
    )
    def costs_page(request: PageRequest) -> Page:
        assert request.session is not None
        days, by = (
            job_filters.parse_days(request.query.get("days")),
            job_filters.parse_group(request.query.get("by")),
        )
        all_users = job_filters.parse_flag(request.query.get("all_users"), "all_users")
        if all_users and not request.session.user.admin:
            raise ForbiddenError("only an admin key may see every user's costs", field="all_users")
        now = time.time()
        report = cost_reports.cost_report(
            request.settings, owner=None if all_users else _owner(request), days=days, by=by, now=now
        )
        clusters = cluster_views.named_cluster_costs(
            request.settings, owner=None if all_users else _owner(request)
        )
        return Page(
            "costs.html",
            {
                "report": report,
                "clusters": clusters,
                "clusters_cost": round(sum(float(c["cost"]) for c in clusters), 6),
                "spend": charts.spend_by_cloud(report.daily, days=days, now=now),
                "budget": budget_views.budget_of(request.settings, _owner(request)),
                "days": days,
                "by": by,
                "all_users": all_users,
            },
        )

    @route(f"{BASE}/schedules", "GET", "The user's schedules: next firing and last runs")
    def schedules_page(request: PageRequest) -> Page:
        owner = _owner(request)
        schedules = [
            schedule_views.view_of(row)
            for row in schedule_operations.list_schedules(request.settings, owner=owner)
        ]
        runs: dict[str, list[Any]] = {s.name: [] for s in schedules}
        for job in job_listing.list_jobs(
            wiring_for(request.settings), owner=owner, where=job_filters.job_filter(limit="500")
        ):
            if job.source == "schedule" and job.source_ref in runs and len(runs[job.source_ref]) < 5:
                runs[job.source_ref].append(job)
        return Page("schedules.html", {"schedules": schedules, "runs": runs})

    @route(f"{BASE}/notifications", "GET", "The user's notification settings (webhook masked)")
    def notifications_page(request: PageRequest) -> Page:
        return Page(
            "notifications.html",
            {"settings": notification_settings.user_settings(request.settings, _owner(request))},
        )

    @route(f"{BASE}/plan", "GET", "A form to plan a task file")
    def plan_form(request: PageRequest) -> Page:
        return Page("plan.html", {"task": "", "filename": "task.yaml", "plan": None, "error": None})

    @route(
        f"{BASE}/plan",
        "POST",
        "The failover plan of a pasted task file (nothing is recorded)",
        form=("task", "filename", "minimize"),
        errors=(400, 403),
    )
    def plan_task(request: PageRequest) -> Page:
        return Page(*_plan_context(request.settings, request.form))


def _rank(value: str | None) -> int:
    try:
        rank = int(value or 0)
    except ValueError:
        raise UserError("must be an integer", field="rank") from None
    if not 0 <= rank < 10_000:
        raise UserError("must be 0 or more", field="rank")
    return rank


def _plan_context(settings: Settings, form: dict[str, str]) -> tuple[str, dict[str, Any], int]:
    text = form.get("task", "")
    filename = (form.get("filename") or "task.yaml")[:512]
    minimize = form.get("minimize") if form.get("minimize") in ("cost", "time") else "cost"
    context: dict[str, Any] = {"task": text, "filename": filename, "plan": None, "error": None}
    if not text.strip():
        context["error"] = UserError("paste a task file first", field="task")
        return "plan.html", context, 400
    try:
        body = PlanRequest(task=text, filename=filename, minimize=minimize)
        context["plan"] = job_views.plan_task_file(settings, body)
    except UserError as exc:
        context["error"] = exc
        return "plan.html", context, 400
    except ValueError as exc:  # the body's own limits (pydantic): the text is too long
        context["error"] = UserError(str(exc).splitlines()[0], field="task")
        return "plan.html", context, 400
    return "plan.html", context, 200


def _job_context(request: PageRequest, job_id: str) -> dict[str, Any]:
    store = wiring_for(request.settings).store
    job = store.get(job_id) if len(job_id) <= 128 else None
    if job is None or job.owner != _owner(request):
        raise NotFoundError(f"no job {job_id[:40]}", field="job_id")
    cluster = store.cluster(job.cluster_id)
    view = job_reads.with_group(
        wiring_for(request.settings), job, job_reads.job_view(job, cluster, store.timeline(job_id))
    )
    now = time.time()
    attempts = cost_reports.job_attempts(request.settings, job, now=now)
    live = not is_terminal(job.state)
    num_nodes = int(cluster.num_nodes) if cluster is not None else 0
    if not num_nodes and view.plan and view.plan.get("tasks"):
        num_nodes = int(
            view.plan["tasks"][min(int(job.task_index), len(view.plan["tasks"]) - 1)]["num_nodes"]
        )
    logs = []
    for rank in range(min(max(num_nodes, 1), MAX_RANKS_SHOWN)):
        page = job_reads.read_logs(
            wiring_for(request.settings), job_reads.ReadLogs(job_id, _owner(request), rank=rank)
        )
        logs.append({"rank": rank, "text": page.text, "cursor": page.cursor or "", "finished": page.finished})
    deadline = job.deadline_at  # set for a deadline job (shared/jobs/deadlines.py)
    return {
        "job": view,
        "live": live,
        "attempts": attempts,
        "blocks": blocks.blocks_of(job),
        "timeline_chart": charts.job_timeline(view.timeline, attempts.attempts, now=now, live=live),
        "logs": logs,
        "deadline": float(deadline) if deadline else None,
        "spot_probes": job_reads.spot_probe_lines(wiring_for(request.settings), job),
        "slack_seconds": float(deadline) - now if deadline and live else None,
        "chosen": (int(job.task_index), int(job.candidate_index)),
    }
