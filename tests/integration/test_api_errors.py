"""Every way a request can be wrong answers a 4xx naming what is wrong; nothing a caller sends is a 500."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from chalice.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from functions.submit.app import app
from functions.submit.route_table import MAX_BODY_BYTES
from shared.config import Settings
from shared.store.users import create_user


@pytest.fixture
def client(stack: Settings) -> Iterator[Client]:
    with Client(app) as chalice_client:
        yield chalice_client


@pytest.fixture
def headers(stack: Settings) -> dict[str, str]:
    return {"Authorization": f"Bearer {create_user('alice', stack)}", "Content-Type": "application/json"}


def _post(client: Client, path: str, headers: dict[str, str], body: object | bytes) -> tuple[int, dict]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    answer = client.http.post(path, headers=headers, body=raw)
    return answer.status_code, answer.json_body


def test_a_request_without_credentials_is_401_with_a_bearer_challenge(client: Client) -> None:
    answer = client.http.get("/jobs")

    assert answer.status_code == 401
    assert answer.json_body["error"] == "AuthError"
    assert answer.json_body["field"] == "Authorization"
    assert answer.headers["WWW-Authenticate"] == "Bearer"


def test_an_unknown_api_key_is_401(client: Client) -> None:
    answer = client.http.get("/jobs", headers={"Authorization": "Bearer sky_not-a-key"})

    assert answer.status_code == 401
    assert answer.json_body["message"] == "credentials not recognised"


def test_credentials_are_checked_before_the_body_is_read(client: Client) -> None:
    status, body = _post(client, "/jobs", {"Content-Type": "application/json"}, b"{not json")

    assert status == 401
    assert body["error"] == "AuthError"


def test_malformed_json_is_400_naming_the_line(client: Client, headers: dict[str, str]) -> None:
    status, body = _post(client, "/jobs", headers, b'{\n  "task": "run: echo",\n  oops\n}')

    assert status == 400
    assert "not valid JSON" in body["message"]
    assert body["line"] == 3


def test_a_body_that_is_not_an_object_is_422(client: Client, headers: dict[str, str]) -> None:
    status, body = _post(client, "/jobs", headers, ["run: echo hi"])

    assert status == 422
    assert "JSON object" in body["message"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "task"),
        ({"task": "run: echo", "env": "A=1"}, "env"),
        ({"task": "run: echo", "env": {"A": 1}}, "env.A"),
        ({"task": "run: echo", "minimize": "speed"}, "minimize"),
        ({"task": "run: echo", "clouds": "aws"}, "clouds"),
        ({"task": "run: echo", "workers": 3}, "workers"),
        ({"task": 42}, "task"),
    ],
)
def test_a_body_of_the_wrong_shape_is_422_naming_the_field(
    client: Client, headers: dict[str, str], body: dict, field: str
) -> None:
    status, answer = _post(client, "/jobs", headers, body)

    assert status == 422
    assert answer["error"] == "BodyValidationError"
    assert answer["field"] == field


def test_a_body_over_the_limit_is_413(client: Client, headers: dict[str, str]) -> None:
    status, body = _post(client, "/jobs", headers, {"task": "run: echo " + "x" * MAX_BODY_BYTES})

    assert status == 413
    assert body["error"] == "PayloadTooLargeError"


def test_a_body_that_is_not_utf8_is_400(client: Client, headers: dict[str, str]) -> None:
    status, body = _post(client, "/plan", headers, b'{"task": "\xff\xfe"}')

    assert status == 400
    assert "UTF-8" in body["message"]


def test_a_body_that_is_not_json_content_is_415(client: Client, headers: dict[str, str]) -> None:
    answer = client.http.post("/jobs", headers={**headers, "Content-Type": "text/plain"}, body=b"run: echo")

    assert answer.status_code == 415


def test_bad_yaml_is_400_with_the_file_and_line(client: Client, headers: dict[str, str]) -> None:
    task = "name: demo\nrun: |\n  echo hi\nresources: [unclosed\n"
    status, body = _post(client, "/plan", headers, {"task": task, "filename": "demo.yaml"})

    assert status == 400
    assert body["error"] == "TaskFileError"
    assert body["file"] == "demo.yaml"
    assert isinstance(body["line"], int) and body["line"] >= 4


def test_an_unknown_task_field_is_400_naming_it(client: Client, headers: dict[str, str]) -> None:
    status, body = _post(client, "/plan", headers, {"task": "run: echo\nnum_node: 2\n", "filename": "t.yaml"})

    assert status == 400
    assert body["error"] == "TaskFileError"
    assert "num_node" in (body["field"] or "") + body["message"]
    assert body["line"] == 2


def test_a_log_rank_that_is_not_a_number_is_400_naming_rank(client: Client, headers: dict[str, str]) -> None:
    answer = client.http.get("/jobs/j-1/logs?rank=first", headers=headers)

    assert answer.status_code == 400
    assert answer.json_body["field"] == "rank"


def test_an_unknown_route_and_a_wrong_method_are_4xx(client: Client, headers: dict[str, str]) -> None:
    assert client.http.get("/nothing-here", headers=headers).status_code in (403, 404)
    assert client.http.delete("/jobs", headers=headers).status_code == 405


def test_agent_routes_refuse_missing_and_unknown_tokens(client: Client) -> None:
    no_token = client.http.get("/agent/j-1/config?instance_id=i-1")
    unknown_job = client.http.post(
        "/agent/j-unknown/status",
        headers={"Authorization": "Bearer whatever", "Content-Type": "application/json"},
        body=json.dumps({"instance_id": "i-1", "phase": "running"}),
    )

    assert no_token.status_code == 401
    assert unknown_job.status_code == 401


def test_a_user_api_key_is_not_an_agent_token(client: Client, headers: dict[str, str]) -> None:
    answer = client.http.get("/agent/j-1/config?instance_id=i-1", headers=headers)

    assert answer.status_code == 401


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
FIELD_NAMES = st.sampled_from(["task", "filename", "env", "minimize", "clouds", "workdir_key", "size_bytes"])
BODIES = st.one_of(
    JSON_VALUES,
    st.dictionaries(FIELD_NAMES, JSON_VALUES, max_size=5),
    st.fixed_dictionaries({"task": st.text(max_size=200)}),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(["/jobs", "/plan", "/uploads"]), body=BODIES)
def test_no_body_sent_to_jobs_plan_or_uploads_is_a_500(
    client: Client, headers: dict[str, str], path: str, body: object
) -> None:
    status, answer = _post(client, path, headers, body)

    assert status < 500, answer
    if status >= 400:
        assert answer["message"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=200))
def test_no_raw_bytes_sent_as_a_body_are_a_500(client: Client, headers: dict[str, str], raw: bytes) -> None:
    status, answer = _post(client, "/plan", headers, raw)

    assert status < 500, answer
