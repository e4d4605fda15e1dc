"""The OpenAPI 3.1 description of the API, generated from the route table and the pydantic bodies."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from functions.submit.route_table import RouteSpec, model_of
from shared.api.models import ErrorBody

REF = "#/components/schemas/{model}"
REASONS = {
    400: "The request or the task is invalid (message, file, line and field say where)",
    401: "Missing or unknown credentials",
    403: "The key may not do that (e.g. a report across users without an admin key)",
    404: "No such job or cluster (or not the caller's)",
    409: "The request conflicts with the job's or the cluster's state",
    410: "A node agent of an attempt the job has moved past: `stop` is true; kill the task and exit",
    413: "The body is too large",
    415: "The body is not application/json",
    422: "The body has the wrong shape (field names the first offending field)",
    425: "Not ready yet: retry shortly",
}
SUCCESS = {200: "OK", 201: "Created", 302: "Found: go to Location", 303: "See Other: go to Location"}


def build_openapi(
    routes: list[RouteSpec], *, title: str = "skyless", version: str = "0.1.0"
) -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    paths: dict[str, dict[str, Any]] = {}
    _add_schema(ErrorBody, schemas)
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route, schemas)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": title,
            "version": version,
            "description": "Run SkyPilot task files on the cheapest cloud capacity, serverless.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "apiKey": {"type": "http", "scheme": "bearer", "description": "A user's API key"},
                "jobToken": {"type": "http", "scheme": "bearer", "description": "A job's agent token"},
                "session": {
                    "type": "apiKey",
                    "in": "cookie",
                    "name": "skyless_session",
                    "description": "The dashboard's signed session, from signing in with an API key",
                },
                "bootToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A node's boot token (user-data), with the agent's own X-Skyless-Node-Key",
                },
                "clusterToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A named cluster's agent token",
                },
            },
        },
    }


def _operation(route: RouteSpec, schemas: dict[str, Any]) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": route.summary,
        "operationId": _operation_id(route),
        "responses": {str(route.status): _success(route, schemas)},
    }
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in _path_names(route.path)
    ]
    parameters += [
        {
            "name": q.name,
            "in": "query",
            "required": False,
            "schema": {"type": q.kind},
            "description": q.description,
        }
        for q in route.query
    ]
    if parameters:
        operation["parameters"] = parameters
    if route.body is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _add_schema(model_of(route.body), schemas)}},
        }
    if route.form:
        fields = {name: {"type": "string"} for name in route.form}
        form_schema = {"type": "object", "properties": fields}
        operation["requestBody"] = {
            "required": True,
            "content": {"application/x-www-form-urlencoded": {"schema": form_schema}},
        }
    schemes = {"user": "apiKey", "agent": "jobToken", "boot": "bootToken", "session": "session",
               "cluster_boot": "bootToken", "cluster_agent": "clusterToken"}  # fmt: skip
    operation["security"] = [{schemes[route.auth]: []}] if route.auth in schemes else []
    codes = set(route.errors)
    if route.auth in ("user", "agent", "cluster_boot", "cluster_agent"):
        codes.add(401)
    if route.body is not None:
        codes.update({400, 413, 415, 422})
    error_ref = {"$ref": REF.format(model="ErrorBody")}
    error_content = {"application/json": {"schema": error_ref}}
    if route.media != "application/json":
        error_content = {route.media: {"schema": {"type": "string"}}}
    for code in sorted(codes):
        operation["responses"][str(code)] = {"description": REASONS[code], "content": error_content}
    return operation


def _success(route: RouteSpec, schemas: dict[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = {"description": SUCCESS.get(route.status, "OK")}
    if route.status in (302, 303):
        return answer
    if route.media != "application/json":
        answer["content"] = {route.media: {"schema": {"type": "string"}}}
        return answer
    schema = (
        _add_schema(model_of(route.response), schemas) if route.response is not None else {"type": "object"}
    )
    answer["content"] = {"application/json": {"schema": schema}}
    return answer


def _add_schema(model: type[BaseModel], schemas: dict[str, Any]) -> dict[str, Any]:
    schema = model.model_json_schema(ref_template=REF, mode="validation")
    for name, definition in schema.pop("$defs", {}).items():
        schemas.setdefault(name, definition)
    schemas.setdefault(model.__name__, schema)
    return {"$ref": REF.format(model=model.__name__)}


def _path_names(path: str) -> list[str]:
    return [part[1:-1] for part in path.split("/") if part.startswith("{") and part.endswith("}")]


def _operation_id(route: RouteSpec) -> str:
    words = [p.strip("{}") for p in route.path.strip("/").split("/") if p] or ["root"]
    return route.method.lower() + "_" + "_".join(w.replace(".", "_") for w in words)
