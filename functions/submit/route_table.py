"""How every API route is registered: body parsing, authentication, error mapping, and a record of
the route (its bodies and parameters) from which the OpenAPI description is generated."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from chalice import Chalice, Response
from chalice.app import Request
from pydantic import BaseModel, ValidationError

from shared.api.auth import StaleAttemptError
from shared.errors import AuthError, ConflictError, ForbiddenError, NotFoundError, UserError

MAX_BODY_BYTES = 1024 * 1024
MAX_JSON_DEPTH = 32  # the deepest real body (a task as JSON) is about 6 levels
MAX_PATH_PARAM_CHARS = 256
# A body or answer model, or a function naming one: the API's model modules are imported by the first request
# of a route that reads one (or by /openapi.json), not at import.
ModelRef = type[BaseModel] | Callable[[], type[BaseModel]]
# session: the dashboard's signed cookie; cluster_boot/cluster_agent: a named cluster's node (shared/clusters)
Auth = Literal["user", "agent", "boot", "session", "cluster_boot", "cluster_agent", "none"]


class NotReadyError(UserError):
    """Asked too early (an agent asking for its config before every node is known): retry later."""


class PayloadTooLargeError(UserError):
    """A request body over MAX_BODY_BYTES."""


class BodyValidationError(UserError):
    """A JSON body of the wrong shape; `field` names the first offending field."""


STATUS_OF: tuple[tuple[type[UserError], int], ...] = (
    (AuthError, 401),
    (ForbiddenError, 403),
    (NotFoundError, 404),
    (ConflictError, 409),
    (StaleAttemptError, 410),
    (PayloadTooLargeError, 413),
    (BodyValidationError, 422),
    (NotReadyError, 425),
    (UserError, 400),
)


@dataclass(frozen=True)
class QueryParam:
    name: str
    kind: Literal["integer", "string"]
    description: str = ""


@dataclass(frozen=True)
class RouteSpec:
    path: str
    method: str
    summary: str
    auth: Auth
    status: int = 200
    body: ModelRef | None = None
    response: ModelRef | None = None
    query: tuple[QueryParam, ...] = ()
    errors: tuple[int, ...] = field(default=())
    media: str = "application/json"  # what the route answers (the dashboard's pages: text/html)
    form: tuple[str, ...] = ()  # the fields of an application/x-www-form-urlencoded body


LOG_QUERY = (  # a job's and a cluster job's log
    QueryParam("rank", "integer", "The node whose log to read (default 0)"),
    QueryParam("after", "string", "The cursor an earlier read answered"),
)
ROUTES: list[RouteSpec] = []


def model_of(ref: ModelRef) -> type[BaseModel]:
    return ref if isinstance(ref, type) else ref()


def error_response(error: UserError) -> Response:
    status = next(code for kind, code in STATUS_OF if isinstance(error, kind))
    headers: dict[str, str | list[str]] = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
    body = error.to_dict()
    if status == 401:  # say nothing about which part of a credential was wrong
        body["hint"] = body["hint"] or "send 'Authorization: Bearer <api key>'"
    return Response(body=body, status_code=status, headers=dict(headers))


def parse_body(raw: bytes | None, model: type[BaseModel]) -> BaseModel:
    raw = raw or b""
    if len(raw) > MAX_BODY_BYTES:
        raise PayloadTooLargeError(f"the request body is larger than {MAX_BODY_BYTES} bytes")
    try:
        data = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    except UnicodeDecodeError as exc:
        raise UserError("the request body is not UTF-8 text", hint=str(exc)) from exc
    except json.JSONDecodeError as exc:
        raise UserError(
            f"the request body is not valid JSON: {exc.msg}", line=exc.lineno, hint=f"at column {exc.colno}"
        ) from exc
    except RecursionError:
        raise _too_deep() from None
    except ValueError as exc:  # an integer of more digits than int() takes
        raise UserError("the request body holds a number too long to read", hint=str(exc)[:120]) from None
    if json_depth(data) > MAX_JSON_DEPTH:
        raise _too_deep()
    if not isinstance(data, dict):
        raise BodyValidationError(f"the request body must be a JSON object, not {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise BodyValidationError(first["msg"], field=_field_path(first["loc"])) from exc
    except RecursionError as exc:
        raise BodyValidationError("the request body is nested too deeply") from exc


def _too_deep() -> UserError:
    return UserError(
        "the request body is nested too deeply", hint=f"at most {MAX_JSON_DEPTH} levels of arrays and objects"
    )


def json_depth(value: Any) -> int:
    """How deeply arrays and objects nest in a parsed JSON value (iterative: no recursion to exhaust)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if deepest > MAX_JSON_DEPTH:
                return deepest
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def check_path_params(path_args: dict[str, str]) -> None:
    """Every path parameter is a non-empty, printable, bounded string (`POST /schedules//pause` is a 400)."""
    for name, value in path_args.items():
        if not value or not value.strip():
            raise UserError("must not be empty", field=name, hint="the URL has an empty path segment")
        if len(value) > MAX_PATH_PARAM_CHARS:
            raise UserError(f"must be at most {MAX_PATH_PARAM_CHARS} characters", field=name)
        if not value.isprintable():
            raise UserError("must not contain control characters", field=name)


UNION_MEMBER_TAG = re.compile(r"^(constrained-)?(str|int|float|bool|none|dict\[.*|list\[.*|function-.*)$")


def _field_path(loc: tuple[int | str, ...]) -> str | None:
    """`("task", "constrained-str")` -> "task": pydantic names the union member it tried; callers
    only care about the field."""
    parts: list[str] = []
    for part in loc:
        if isinstance(part, str) and UNION_MEMBER_TAG.match(part):
            break
        parts.append(str(part))
    return ".".join(parts) or None


def body_bytes(raw: str | bytes | None) -> bytes:
    return raw.encode() if isinstance(raw, str) else raw or b""


def current_request(app: Chalice) -> Request:
    request = app.current_request
    if request is None:
        raise RuntimeError("asked for the request outside of one")
    return request


def query_params(app: Chalice) -> Mapping[str, str]:
    return current_request(app).query_params or {}


def int_param(params: Mapping[str, str] | None, name: str, default: int) -> int:
    value = (params or {}).get(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise UserError(f"must be an integer, not {value[:40]!r}", field=name) from None
    if number < 0:
        raise UserError("must not be negative", field=name)
    return number


def every_user_asked(caller_is_admin: bool, params: Mapping[str, str], what: str) -> bool:
    """The `all_users` query parameter: True when asked by an admin key; a ForbiddenError naming the field
    when asked by any other key (`what`: what it would read, "every user's jobs")."""
    from shared.jobs.job_filters import parse_flag

    if not parse_flag(params.get("all_users"), "all_users"):
        return False
    if not caller_is_admin:
        raise ForbiddenError(
            f"only an admin key may read {what}",
            field="all_users",
            hint="an operator makes one with `python -m shared.store.users create NAME --admin`",
        )
    return True


def register_route(
    app: Chalice,
    spec: RouteSpec,
    authenticate: Callable[[Auth, dict[str, str], dict[str, str]], Any],
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a view with Chalice. The view receives the path arguments, `caller` (whatever
    `authenticate` answered) and `body` (the parsed model) when the route has one; it answers a
    pydantic model, a dict, or a Response. Every UserError becomes its 4xx."""
    ROUTES.append(spec)

    def decorate(view: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(view)
        def handle(**path_args: str) -> Response:
            request = current_request(app)
            try:
                check_path_params(path_args)
                caller = authenticate(spec.auth, dict(request.headers), path_args)
                kwargs: dict[str, Any] = dict(path_args)
                if spec.auth != "none":
                    kwargs["caller"] = caller
                if spec.body is not None:
                    kwargs["body"] = parse_body(body_bytes(request.raw_body), model_of(spec.body))
                answer = view(**kwargs)
            except UserError as exc:
                return error_response(exc)
            if isinstance(answer, Response):
                return answer
            if isinstance(answer, BaseModel):
                answer = answer.model_dump(mode="json")
            return Response(body=answer, status_code=spec.status)

        app.route(spec.path, methods=[spec.method], content_types=["application/json"])(handle)
        return handle

    return decorate
