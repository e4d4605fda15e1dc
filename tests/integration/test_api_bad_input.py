"""Bad input is a 4xx, every time: nested bodies, empty or odd path segments and huge numbers, through the
real Chalice app and through the Lambda entry point the template names (an HTTP API payload 2.0 event);
malformed queue records are dropped with one structured log line, never retried into the DLQ."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from chalice.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_api_gateway import http_api_event

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from functions.submit import handler as submit_module
from functions.submit.app import app, handler
from functions.submit.route_table import MAX_JSON_DEPTH, ROUTES
from shared.config import Settings
from shared.store.users import create_user

EVENTS = Path(__file__).resolve().parents[1] / "events"
USER_BODY_ROUTES = sorted({(r.method, r.path) for r in ROUTES if r.body is not None and r.auth == "user"})
PARAM_ROUTES = sorted({(r.method, r.path) for r in ROUTES if "{" in r.path})
INNER_PARAM_ROUTES = [(m, p) for m, p in PARAM_ROUTES if not p.endswith("}")]
FORM_ROUTES = {(r.method, r.path) for r in ROUTES if r.form}  # the dashboard's forms
HTML_ROUTES = {(r.method, r.path) for r in ROUTES if r.media != "application/json"}  # pages, static files


def concrete(path: str, value: str) -> str:
    return re.sub(r"\{[^}]+\}", value, path)


def param_of(path: str) -> str:
    return re.findall(r"\{([^}]+)\}", path)[0]


@pytest.fixture
def key(stack: Settings) -> str:
    return create_user("alice", stack)


@pytest.fixture
def client(stack: Settings) -> Iterator[Client]:
    with Client(app) as chalice_client:
        yield chalice_client


def call(
    via: str,
    client: Client,
    key: str,
    method: str,
    path: str,
    body: str | None = None,
    content_type: str = "application/json",
) -> tuple[int, Any]:
    """One request through the Chalice test client or the Lambda handler; answers (status, JSON body)."""
    headers = {"Authorization": f"Bearer {key}", "Content-Type": content_type}
    if via == "chalice":
        send = getattr(client.http, method.lower())
        answer = (
            send(path, headers=headers, body=body or "") if method != "GET" else send(path, headers=headers)
        )
        return answer.status_code, json.loads(answer.body or b"null")
    raw_path, _, query = path.partition("?")
    response = handler(http_api_event(method, raw_path, query=query, headers=headers, body=body), None)
    return response["statusCode"], json.loads(response.get("body") or "null")


VIAS = ["chalice", "lambda"]


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize(("method", "path"), USER_BODY_ROUTES)
def test_a_deeply_nested_body_is_a_400_on_every_route_that_takes_one(
    client: Client, key: str, via: str, method: str, path: str
) -> None:
    for body in ('{"task": ' + "[" * 100_000 + "]" * 100_000 + "}", "[" * (MAX_JSON_DEPTH + 1) + "]" * 33):
        status, answer = call(via, client, key, method, concrete(path, "x"), body)

        assert status == 400, answer
        assert answer["message"] == "the request body is nested too deeply"


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize(("method", "path"), INNER_PARAM_ROUTES)
def test_an_empty_path_segment_is_a_400_naming_the_parameter(
    client: Client, key: str, via: str, method: str, path: str
) -> None:
    route = (method, path)
    if route in FORM_ROUTES or route in HTML_ROUTES:  # a page: the same 400, said on an HTML page
        status, page = call_page(via, client, method, concrete(path, ""), *_page_body(method))
        assert status == 400 and param_of(path) in page and "must not be empty" in page, page
        return
    status, answer = call(via, client, key, method, concrete(path, ""), "{}" if method != "GET" else None)

    assert status == 400, answer
    assert answer["field"] == param_of(path) and answer["message"] == "must not be empty"


def _page_body(method: str) -> tuple[str | None, str]:
    """What a browser sends: no body on a GET, an (empty) form on a POST."""
    return (None, "application/json") if method == "GET" else ("", "application/x-www-form-urlencoded")


def call_page(
    via: str, client: Client, method: str, path: str, body: str | None, content_type: str
) -> tuple[int, str]:
    """A dashboard page through the Chalice test client or the Lambda handler: (status, page text)."""
    headers = {"Content-Type": content_type}
    if via == "chalice":
        send = getattr(client.http, method.lower())
        answer = send(path, headers=headers, **({"body": body} if body else {}))
        return answer.status_code, answer.body.decode()
    response = handler(http_api_event(method, path, headers=headers, body=body), None)
    return response["statusCode"], response.get("body") or ""


@pytest.mark.parametrize(("method", "path"), PARAM_ROUTES)
@pytest.mark.parametrize(
    ("segment", "message"),
    [("%20%20", "must not be empty"), ("a" * 300, "must be at most 256 characters"),
     ("job%0A1", "must not contain control characters")],
)  # fmt: skip
def test_a_blank_overlong_or_control_character_segment_is_a_400(
    client: Client, key: str, method: str, path: str, segment: str, message: str
) -> None:
    if (method, path) in FORM_ROUTES or (method, path) in HTML_ROUTES:
        status, page = call_page("lambda", client, method, concrete(path, segment), *_page_body(method))
        assert status == 400 and param_of(path) in page and message in page, page
        return
    status, answer = call(
        "lambda", client, key, method, concrete(path, segment), "{}" if method != "GET" else None
    )

    assert status == 400, answer
    assert answer["field"] == param_of(path) and answer["message"] == message


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/uploads", '{"size_bytes": 1' + "0" * 5000 + "}", None),  # more digits than int() reads
        ("/uploads", '{"size_bytes": 1e400}', "size_bytes"),
        ("/uploads", '{"size_bytes": 1' + "0" * 60 + "}", "size_bytes"),
        ("/plan", '{"task": {"run": "echo", "num_nodes": 1' + "0" * 4000 + "}}", "num_nodes"),
        ("/plan", '{"task": "run: echo\\nnum_nodes: 1' + "0" * 5000 + '"}', None),
        ("/plan", '{"task": {"run": "echo", "resources": {"cpus": 1e308}}}', "resources.cpus"),
        ("/plan", '{"task": {"run": "echo", "resources": {"memory": -1e400}}}', "resources.memory"),
    ],
)
def test_huge_numbers_are_a_4xx(
    client: Client, key: str, via: str, path: str, body: str, field: str | None
) -> None:
    status, answer = call(via, client, key, "POST", path, body)

    assert 400 <= status < 500, answer
    assert answer["message"]
    if field:
        assert field in str(answer["field"]) + answer["message"], answer


def nested(depth: int, opener: str) -> str:
    closer = "]" if opener == "[" else "}"
    return opener * depth + "1" + closer * depth if opener == "[" else '{"a":' * depth + "1" + closer * depth


FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(
    route=st.sampled_from(USER_BODY_ROUTES),
    depth=st.integers(min_value=1, max_value=3000),
    opener=st.sampled_from(["[", "{"]),
    where=st.sampled_from(["top", "task", "env", "notify"]),
    via=st.sampled_from(VIAS),
)
def test_no_nesting_of_a_body_is_a_500(
    client: Client, key: str, route: tuple[str, str], depth: int, opener: str, where: str, via: str
) -> None:
    inner = nested(depth, opener)
    body = inner if where == "top" else f'{{"{where}": {inner}}}'
    status, answer = call(via, client, key, route[0], concrete(route[1], "x"), body)

    assert status < 500, answer
    if depth > MAX_JSON_DEPTH:
        assert status == 400 and "nested too deeply" in answer["message"]


SEGMENTS = st.one_of(
    st.just(""),
    st.text(max_size=40),
    st.text(alphabet=st.characters(max_codepoint=0x7F), min_size=200, max_size=400),
    st.sampled_from([" ", "..", ".", "%", "%2F", "\x00", "\u202e", "job-0123456789ab", "sch\u00e9dule"]),
)


@FUZZ
@given(route=st.sampled_from(PARAM_ROUTES), segment=SEGMENTS)
def test_no_path_segment_is_a_500(client: Client, key: str, route: tuple[str, str], segment: str) -> None:
    method, path = route
    url = concrete(path, quote(segment, safe=""))
    if route in FORM_ROUTES or route in HTML_ROUTES:
        status, page = call_page("lambda", client, method, url, *_page_body(method))
        assert status < 500, page
        return
    status, answer = call("lambda", client, key, method, url, "{}")

    assert status < 500, answer


NUMBERS = st.one_of(
    st.integers(min_value=1, max_value=6000).map(lambda n: "9" * n),
    st.integers(min_value=1, max_value=6000).map(lambda n: "-" + "9" * n),
    st.sampled_from(["1e400", "-1e400", "1e-400", "Infinity", "-Infinity", "NaN", "1.5e308", "0.0"]),
    st.integers().map(str),
)
NUMBER_BODIES = [
    ("/uploads", '{"size_bytes": %s}'),
    ("/plan", '{"task": {"run": "echo", "num_nodes": %s}}'),
    ("/plan", '{"task": {"run": "echo", "resources": {"cpus": %s, "accelerators": {"A100": %s}}}}'),
    ("/plan", '{"task": "run: echo\\nnum_nodes: %s\\nresources:\\n  disk_size: %s"}'),
    ("/jobs", '{"task": {"run": "echo", "resources": {"memory": %s, "max_hourly_cost": %s}}}'),
    ("/schedules", '{"name": "n", "cron": "0 3 * * *", "task": {"run": "echo", "num_nodes": %s}}'),
    ("/notifications", '{"on": [%s]}'),
]


@FUZZ
@given(template=st.sampled_from(NUMBER_BODIES), number=NUMBERS, via=st.sampled_from(VIAS))
def test_no_huge_number_in_a_body_is_a_500(
    client: Client, key: str, template: tuple[str, str], number: str, via: str
) -> None:
    path, shape = template
    body = shape.replace("%s", number)
    method = "PUT" if path == "/notifications" else "POST"
    status, answer = call(via, client, key, method, path, body)

    assert status < 500, answer


# ----------------------------------------------------------------------------- queue records


def dropped_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    lines = [r for r in caplog.records if "malformed_message_dropped" in r.getMessage()]
    assert all(r.exc_info is None and r.levelno == logging.WARNING for r in lines)
    return [json.loads(r.getMessage()) for r in lines]


def test_malformed_submit_queue_records_are_dropped_with_one_log_line_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    batch = json.loads((EVENTS / "sqs_batch_of_malformed_submit_records.json").read_text())

    answer = submit_module.handler(batch, None)

    assert answer == {"batchItemFailures": []}
    lines = dropped_lines(caplog)
    assert [line["message_id"] for line in lines] == [r["messageId"] for r in batch["Records"]]
    assert {line["queue"] for line in lines} == {"skyless-submit"}
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize(
    ("handle", "body"),
    [
        (optimize_handler, "{}"),
        (optimize_handler, '{"job_id": 5, "attempt": 0}'),
        (optimize_handler, '{"job_id": "job-0123456789ab", "attempt": "first"}'),
        (optimize_handler, '"job-0123456789ab"'),
        (provision_handler, '{"job_id": "job-0123456789ab", "attempt": 0, "action": "explode"}'),
        (provision_handler, '{"cluster": "cl-0123456789ab", "action": "explode"}'),
        (provision_handler, '{"cluster": "cl-0123456789ab", "action": "start", "incarnation": "two"}'),
        (provision_handler, "not json at all"),
    ],
)
def test_malformed_optimize_and_provision_bodies_are_dropped_not_retried(
    caplog: pytest.LogCaptureFixture, handle: Any, body: str
) -> None:
    record = {"messageId": "m-1", "body": body, "eventSource": "aws:sqs",
              "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:skyless-optimize"}  # fmt: skip

    assert handle({"Records": [record]}, None) == {"batchItemFailures": []}
    (line,) = dropped_lines(caplog)
    assert line["message_id"] == "m-1" and line["reason"]


def test_a_failure_that_may_pass_later_is_still_retried(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def unreachable(settings: Settings, body: dict[str, Any]) -> None:
        raise ConnectionError("the endpoint did not answer")

    monkeypatch.setattr(submit_module, "submit_uploads", unreachable)
    event = json.loads((EVENTS / "s3_object_created_task.json").read_text())
    record = {"messageId": "m-2", "body": json.dumps(event), "eventSource": "aws:sqs"}

    assert submit_module.handler({"Records": [record]}, None) == {
        "batchItemFailures": [{"itemIdentifier": "m-2"}]
    }
    assert dropped_lines(caplog) == []
