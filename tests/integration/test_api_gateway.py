"""The Lambda entry point behind API Gateway's catch-all route: HTTP API (payload 2.0) and REST proxy events,
in the shapes AWS documents, reach the right Chalice route."""

from __future__ import annotations

import base64
import json
from typing import Any

from functions.submit.app import handler
from shared.config import Settings
from shared.store.users import create_user


def http_api_event(method: str, path: str, *, query: str = "", headers: dict[str, str] | None = None,
                   body: str | None = None, base64_body: bool = False) -> dict[str, Any]:  # fmt: skip
    """An API Gateway HTTP API payload 2.0 event for the `ANY /{proxy+}` route."""
    encoded = base64.b64encode(body.encode()).decode() if body is not None and base64_body else body
    return {
        "version": "2.0",
        "routeKey": "ANY /{proxy+}",
        "rawPath": path,
        "rawQueryString": query,
        "headers": {"accept": "*/*", "user-agent": "skyless-test", **(headers or {})},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "abc123",
            "domainName": "abc123.execute-api.us-east-1.amazonaws.com",
            "domainPrefix": "abc123",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "192.0.2.1",
                "userAgent": "skyless-test",
            },
            "requestId": "JKJaXmPLvHcESHA=",
            "routeKey": "ANY /{proxy+}",
            "stage": "$default",
            "time": "21/Nov/2026:00:00:00 +0000",
            "timeEpoch": 1795305600000,
        },
        "pathParameters": {"proxy": path.lstrip("/")},
        "body": encoded,
        "isBase64Encoded": base64_body,
    }


def rest_proxy_event(method: str, path: str, headers: dict[str, str]) -> dict[str, Any]:
    """An API Gateway REST API proxy event for the `/{proxy+}` resource."""
    return {
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": {"proxy": path.lstrip("/")},
        "stageVariables": None,
        "requestContext": {
            "resourcePath": "/{proxy+}",
            "httpMethod": method,
            "path": f"/prod{path}",
            "stage": "prod",
            "requestId": "c6af9ac6",
        },
        "body": None,
        "isBase64Encoded": False,
    }


def test_openapi_is_served_through_an_http_api_event() -> None:
    answer = handler(http_api_event("GET", "/openapi.json"), None)

    assert answer["statusCode"] == 200
    assert json.loads(answer["body"])["openapi"].startswith("3.")
    assert "multiValueHeaders" not in answer


def test_a_job_submitted_through_http_api_events_can_be_read_back(stack: Settings) -> None:
    auth = {"authorization": f"Bearer {create_user('alice', stack)}", "content-type": "application/json"}
    body = json.dumps({"task": "name: gw\nresources:\n  cpus: 1+\nrun: echo hi\n"})

    created = handler(http_api_event("POST", "/jobs", headers=auth, body=body, base64_body=True), None)
    assert created["statusCode"] == 201, created["body"]
    job_id = json.loads(created["body"])["job_id"]

    shown = handler(http_api_event("GET", f"/jobs/{job_id}", headers=auth), None)
    assert shown["statusCode"] == 200
    assert json.loads(shown["body"])["name"] == "gw"
    bad_rank = handler(http_api_event("GET", f"/jobs/{job_id}/logs", query="rank=first", headers=auth), None)
    assert bad_rank["statusCode"] == 400
    assert json.loads(bad_rank["body"])["field"] == "rank"


def test_a_rest_proxy_event_reaches_the_route(stack: Settings) -> None:
    auth = {"Authorization": f"Bearer {create_user('bob', stack)}"}

    answer = handler(rest_proxy_event("GET", "/jobs", auth), None)

    assert answer["statusCode"] == 200
    assert json.loads(answer["body"]) == {"jobs": [], "cursor": None}


def test_a_path_no_route_matches_is_404_and_a_missing_key_401(stack: Settings) -> None:
    unknown = handler(http_api_event("GET", "/no/such/route"), None)
    no_key = handler(http_api_event("GET", "/jobs"), None)

    assert unknown["statusCode"] == 404
    assert json.loads(unknown["body"])["error"] == "NotFoundError"
    assert no_key["statusCode"] == 401
