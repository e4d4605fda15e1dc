"""How every dashboard route is registered: the session, CSRF on every POST, HTML error pages, and the
headers every page carries. Each route is also recorded in the API's route table, so the OpenAPI
description lists it (as text/html with the session cookie)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, quote

from chalice import Chalice, Response

from functions.submit.dashboard.rendering import render
from functions.submit.dashboard.sessions import (
    SESSION_COOKIE,
    CsrfError,
    Session,
    SessionKeeper,
    SignInNeeded,
    cookie_header,
    is_https,
)
from functions.submit.route_table import (
    MAX_BODY_BYTES,
    ROUTES,
    STATUS_OF,
    Auth,
    QueryParam,
    RouteSpec,
    body_bytes,
    check_path_params,
    current_request,
)
from shared.config import Settings
from shared.errors import UserError

BASE = "/dashboard"
FORM = "application/x-www-form-urlencoded"
HTML = "text/html; charset=utf-8"
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
CSRF_FIELD = "csrf"


@dataclass
class PageRequest:
    """What a page view gets: the settings, the signed-in session (None on the sign-in pages), the query
    and form fields, and the headers (for cookies)."""

    settings: Settings
    keeper: SessionKeeper
    session: Session | None
    query: dict[str, str]
    form: dict[str, str]
    headers: dict[str, str]
    set_cookies: list[str] = field(default_factory=list)

    @property
    def csrf(self) -> str:
        return self.keeper.csrf_token(self.session) if self.session else ""

    @property
    def secure(self) -> bool:
        return is_https(self.headers)


@dataclass(frozen=True)
class Page:
    template: str
    context: dict[str, Any]
    status: int = 200


@dataclass(frozen=True)
class Redirect:
    location: str
    status: int = 303


def _status_of(error: UserError) -> int:
    if isinstance(error, CsrfError):
        return 403
    return next(code for kind, code in STATUS_OF if isinstance(error, kind))


def parse_form(raw: bytes | None) -> dict[str, str]:
    raw = raw or b""
    if len(raw) > MAX_BODY_BYTES:
        raise UserError(f"the form is larger than {MAX_BODY_BYTES} bytes")
    try:
        fields = parse_qs(raw.decode("utf-8"), keep_blank_values=True, max_num_fields=50)
    except (UnicodeDecodeError, ValueError) as exc:
        raise UserError("the form could not be read", hint=str(exc)[:200]) from None
    return {name: values[0] for name, values in fields.items()}


def html_response(body: str, status: int, cookies: list[str] | None = None) -> Response:
    headers: dict[str, str | list[str]] = {"Content-Type": HTML, **SECURITY_HEADERS}
    if cookies:
        headers["Set-Cookie"] = cookies if len(cookies) > 1 else cookies[0]
    return Response(body=body, status_code=status, headers=headers)


def _sign_in_redirect(request: PageRequest, path: str, error: SignInNeeded) -> Response:
    clear = cookie_header(SESSION_COOKIE, "", max_age=0, secure=request.secure)
    target = f"{BASE}/login?next={quote(path, safe='/')}"
    if error.field:  # a reason code (expired, revoked), never free text taken from anywhere
        target += f"&why={quote(error.field)}"
    return Response(
        body="", status_code=303, headers={"Location": target, "Set-Cookie": clear, **SECURITY_HEADERS}
    )


def page_route(
    app: Chalice,
    settings_of: Callable[[], Settings],
    path: str,
    method: str,
    summary: str,
    *,
    auth: Auth = "session",
    form: tuple[str, ...] = (),
    query: tuple[QueryParam, ...] = (),
    status: int = 200,
    media: str = "text/html",
    errors: tuple[int, ...] = (),
) -> Callable[[Callable[..., Page | Redirect | Response]], Callable[..., Response]]:
    """Register a dashboard view. It gets a PageRequest and the path arguments and answers a Page (rendered
    with the session's CSRF token and user), a Redirect, or a Response. Any UserError becomes an HTML
    error page with its status; a missing or expired session goes to the sign-in page (a JSON route
    answers 401 instead)."""
    form_fields = (*form, CSRF_FIELD) if method == "POST" else ()
    ROUTES.append(
        RouteSpec(
            path,
            method,
            summary,
            auth,
            status=status,
            query=query,
            errors=errors,
            media=media,
            form=form_fields,
        )
    )

    def decorate(view: Callable[..., Page | Redirect | Response]) -> Callable[..., Response]:
        @functools.wraps(view)
        def handle(**path_args: str) -> Response:
            raw = current_request(app)
            settings = settings_of()
            keeper = SessionKeeper(settings)
            headers = {k.lower(): v for k, v in dict(raw.headers).items()}
            request = PageRequest(settings, keeper, None, dict(raw.query_params or {}), {}, headers)
            try:
                check_path_params(path_args)  # before the session: a bad URL is a 400 for everyone
                if auth == "session":
                    request.session = keeper.session(headers)
                if method == "POST":
                    request.form = parse_form(body_bytes(raw.raw_body))
                    if auth == "session":
                        assert request.session is not None
                        keeper.check_csrf(request.session, request.form.get(CSRF_FIELD))
                answer = view(request, **path_args)
            except SignInNeeded as exc:
                if media == "application/json":
                    return Response(
                        body={"error": "SignInNeeded", "message": str(exc.message)}, status_code=401
                    )
                here = path.format(**{k: quote(v, safe="") for k, v in path_args.items()})
                return _sign_in_redirect(request, here if method == "GET" else BASE, exc)
            except UserError as exc:
                code = _status_of(exc)
                if media == "application/json":
                    return Response(body=exc.to_dict(), status_code=code)
                return html_response(render("error.html", request, error=exc, status=code), code)
            return _answer(request, answer)

        # A GET has no body: Chalice takes its content type to be application/json.
        app.route(path, methods=[method], content_types=[FORM] if method == "POST" else ["application/json"])(
            handle
        )
        return handle

    return decorate


def _answer(request: PageRequest, answer: Page | Redirect | Response) -> Response:
    if isinstance(answer, Response):
        for name, value in SECURITY_HEADERS.items():
            answer.headers.setdefault(name, value)
        return answer
    if isinstance(answer, Redirect):
        headers: dict[str, str | list[str]] = {"Location": answer.location, **SECURITY_HEADERS}
        if request.set_cookies:
            headers["Set-Cookie"] = (
                request.set_cookies if len(request.set_cookies) > 1 else request.set_cookies[0]
            )
        return Response(body="", status_code=answer.status, headers=headers)
    body = render(answer.template, request, **answer.context)
    return html_response(body, answer.status, request.set_cookies)


def json_response(data: Any, status: int = 200) -> Response:
    return Response(body=json.dumps(data), status_code=status, headers={"Content-Type": "application/json"})
