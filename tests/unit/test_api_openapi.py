"""The OpenAPI description: valid OpenAPI 3.1, and it lists every route Chalice serves."""

from __future__ import annotations

from chalice.test import Client
from openapi_spec_validator import validate

from functions.submit.app import app


def _spec() -> dict:
    with Client(app) as client:
        answer = client.http.get("/openapi.json")
    assert answer.status_code == 200
    return answer.json_body


def test_openapi_json_is_a_valid_openapi_document() -> None:
    spec = _spec()

    validate(spec)
    assert spec["openapi"].startswith("3.")


def test_every_chalice_route_and_method_is_described() -> None:
    spec = _spec()

    served = {(path, method.lower()) for path, methods in app.routes.items() for method in methods}
    described = {(path, method) for path, item in spec["paths"].items() for method in item}
    assert served == described
    assert len(served) >= 10


def test_every_described_request_body_is_a_resolvable_schema() -> None:
    spec = _spec()
    schemas = spec["components"]["schemas"]

    bodies = [
        op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        for item in spec["paths"].values()
        for op in item.values()
        if "application/json" in op.get("requestBody", {}).get("content", {})
    ]
    assert {ref.rsplit("/", 1)[1] for ref in bodies} >= {
        "SubmitJobRequest",
        "PlanRequest",
        "AgentStatusRequest",
    }
    for ref in bodies:
        assert ref.rsplit("/", 1)[1] in schemas
    assert schemas["SubmitJobRequest"]["additionalProperties"] is False


def test_user_routes_require_the_api_key_and_agent_routes_the_job_token() -> None:
    spec = _spec()

    assert spec["paths"]["/jobs"]["post"]["security"] == [{"apiKey": []}]
    assert spec["paths"]["/agent/{job_id}/status"]["post"]["security"] == [{"jobToken": []}]
    assert spec["paths"]["/openapi.json"]["get"]["security"] == []
    assert "401" in spec["paths"]["/jobs/{job_id}"]["get"]["responses"]
    assert "404" in spec["paths"]["/jobs/{job_id}"]["get"]["responses"]


def test_dashboard_pages_are_described_as_html_behind_the_session_cookie() -> None:
    spec = _spec()

    page = spec["paths"]["/dashboard/jobs/{job_id}"]["get"]
    assert page["security"] == [{"session": []}]
    assert "text/html" in page["responses"]["200"]["content"]
    sign_in = spec["paths"]["/dashboard/login"]["post"]
    assert sign_in["security"] == []
    form = sign_in["requestBody"]["content"]["application/x-www-form-urlencoded"]["schema"]
    assert set(form["properties"]) == {"api_key", "next", "csrf"}
    assert spec["components"]["securitySchemes"]["session"]["in"] == "cookie"
