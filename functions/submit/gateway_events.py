"""API Gateway proxy events -> the REST event Chalice routes on.

Chalice dispatches on `requestContext.resourcePath` ("/jobs/{job_id}"), which API Gateway only sends when
every route is declared in it. The SAM template declares one catch-all route (HTTP API, payload 2.0, or a
REST `{proxy+}`), so the Lambda entry point matches the concrete path against the app's routes here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qs, unquote

from chalice.local import RouteMatcher


def is_routed(event: dict[str, Any], routes: Iterable[str]) -> bool:
    """The event already names one of the app's routes (a REST API that declares each route)."""
    return event.get("requestContext", {}).get("resourcePath") in set(routes)


def to_rest_event(event: dict[str, Any], routes: Iterable[str]) -> dict[str, Any] | None:
    """The Chalice REST event for a proxy event, or None when no route matches the path."""
    http = event.get("requestContext", {}).get("http")
    if event.get("version") == "2.0" and http:
        method, path = http["method"], event.get("rawPath") or http.get("path", "/")
        query = parse_qs(event.get("rawQueryString") or "", keep_blank_values=True) or None
    else:
        method, path = event.get("httpMethod", "GET"), event.get("path", "/")
        query = event.get("multiValueQueryStringParameters") or None
    stage = event.get("requestContext", {}).get("stage")
    if stage and stage != "$default" and path.startswith(f"/{stage}/"):
        path = path[len(stage) + 1 :]
    try:
        match = RouteMatcher(list(routes)).match_route(path)
    except ValueError:
        return None
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    if event.get("cookies"):
        headers["cookie"] = "; ".join(event["cookies"])
    return {
        "requestContext": {
            **event.get("requestContext", {}),
            "httpMethod": method,
            "resourcePath": match.route,
            "path": path,
        },
        "headers": headers,
        "pathParameters": {name: unquote(value) for name, value in match.captured.items()} or None,
        "multiValueQueryStringParameters": query,
        "body": event.get("body"),
        "isBase64Encoded": bool(event.get("isBase64Encoded")),
        "stageVariables": event.get("stageVariables") or {},
    }


def for_payload(event: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    """Chalice answers in the REST shape; a payload 2.0 response has no multiValueHeaders."""
    if event.get("version") != "2.0":
        return response
    headers = dict(response.get("headers") or {})
    cookies: list[str] = []
    for name, values in (response.get("multiValueHeaders") or {}).items():
        if (
            name.lower() == "set-cookie"
        ):  # cookies cannot share one comma-joined header: payload 2.0 lists them
            cookies.extend(str(v) for v in values)
            continue
        headers[name] = ",".join(str(v) for v in values)
    for name in [n for n in headers if n.lower() == "set-cookie"]:
        cookies.append(str(headers.pop(name)))
    answer = {
        "statusCode": response["statusCode"],
        "headers": headers,
        "body": response.get("body"),
        "isBase64Encoded": bool(response.get("isBase64Encoded")),
    }
    if cookies:
        answer["cookies"] = cookies
    return answer


def not_found(path: str) -> dict[str, Any]:
    body = {"error": "NotFoundError", "message": f"no route {path}", "field": None, "line": None}
    return {"statusCode": 404, "headers": {"Content-Type": "application/json"}, "body": json.dumps(body)}
