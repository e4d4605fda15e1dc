"""The cut EC2 and DynamoDB models (shared/aws/botocore_data, shared.aws.service_models): what the installed
botocore's models give when cut, holding every operation the AWS provider and pynamodb call, and used only by
them."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pynamodb.constants

from shared.aws.service_models import CUTS, DATA_PATH, EC2_API_VERSION, model_files
from shared.aws.sessions import boto3_session

CLOUDS = Path(__file__).resolve().parents[2] / "shared" / "clouds"


def ec2_client(api_version: str | None = EC2_API_VERSION) -> object:
    return boto3_session().client(
        "ec2", region_name="us-east-1", endpoint_url="http://127.0.0.1:9", api_version=api_version,
        aws_access_key_id="unit", aws_secret_access_key="unit",
    )  # fmt: skip


def test_the_cut_agrees_with_the_installed_botocore_on_everything_it_holds() -> None:
    """A newer botocore may add members, shapes and operations (the cut need not know them); it must not
    contradict the cut: same protocol and version, the same operations on the same paths, every shape and
    member the cut holds still there with the same type. `python -m shared.aws.service_models` rewrites it."""
    for service, (_, version, _) in CUTS.items():
        cut = json.loads((DATA_PATH / service / version / "service-2.json").read_text())
        fresh = model_files(service)["service-2.json"]
        stale = f"{service}'s cut contradicts this botocore: run `python -m shared.aws.service_models`"

        for key in ("protocol", "apiVersion", "endpointPrefix", "signatureVersion"):
            assert cut["metadata"].get(key) == fresh["metadata"].get(key), stale
        assert sorted(cut["operations"]) == sorted(fresh["operations"]), stale
        for name, operation in cut["operations"].items():
            for key in ("http", "input", "output"):
                assert operation.get(key) == fresh["operations"][name].get(key), f"{stale} ({name}.{key})"
        for name, shape in cut["shapes"].items():
            now = fresh["shapes"].get(name)
            assert now is not None and now["type"] == shape["type"], f"{stale} ({name})"
            for member, ref in (shape.get("members") or {}).items():
                assert (now.get("members") or {}).get(member, {}).get("shape") == ref["shape"], (
                    f"{stale} ({name}.{member})"
                )


def test_the_cut_is_what_the_command_writes_from_the_same_botocore() -> None:
    """Only the shapes the operations reach, nothing dropped: a cut written now by the command from this
    botocore reaches the same shapes, or more where botocore has grown."""
    for service, (_, version, _) in CUTS.items():
        cut = json.loads((DATA_PATH / service / version / "service-2.json").read_text())
        fresh = model_files(service)["service-2.json"]

        assert set(cut["shapes"]) <= set(fresh["shapes"])
        assert "documentation" not in json.dumps(cut)


# The operations pynamodb's connection dispatches (pynamodb/constants.py, its first block).
PYNAMODB_OPERATIONS = (
    "TRANSACT_WRITE_ITEMS", "TRANSACT_GET_ITEMS", "BATCH_WRITE_ITEM", "DESCRIBE_TABLE", "BATCH_GET_ITEM",
    "CREATE_TABLE", "UPDATE_TABLE", "DELETE_TABLE", "LIST_TABLES", "UPDATE_ITEM", "DELETE_ITEM", "GET_ITEM",
    "PUT_ITEM", "QUERY", "SCAN",
)  # fmt: skip


def test_pynamodbs_clients_get_the_cut_model_with_every_operation_pynamodb_dispatches() -> None:
    """(The integration tier runs every table call of the handlers through it, against moto's server.)"""
    from shared.config import Settings
    from shared.store.models import models_for

    settings = Settings(prefix="cut", region="us-east-1", endpoint_url="http://127.0.0.1:9")
    model = models_for(settings).connection.client.meta.service_model

    assert model.api_version == "2012-08-10" and len(model.operation_names) < 20
    dispatched = {getattr(pynamodb.constants, name) for name in PYNAMODB_OPERATIONS}
    assert sorted(dispatched - set(model.operation_names)) == []


def called_ec2_methods() -> set[str]:
    """Every method called on an EC2 client in the provider's modules (`ec2.x(...)`, `self.client(r).x(...)`,
    `ec2.get_paginator("x")`)."""
    called: set[str] = set()
    for path in CLOUDS.glob("aws*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            target = node.func.value
            on_ec2 = (isinstance(target, ast.Name) and target.id == "ec2") or (
                isinstance(target, ast.Call) and ast.unparse(target.func) == "self.client"
            )
            if on_ec2 and node.func.attr == "get_paginator":
                called.add(node.args[0].value)  # type: ignore[attr-defined]
            elif on_ec2:
                called.add(node.func.attr)
    return called


def test_every_operation_the_provider_calls_is_in_the_cut_model() -> None:
    called = called_ec2_methods()
    client = ec2_client()

    assert {"run_instances", "terminate_instances", "describe_instances"} <= called
    assert [name for name in sorted(called) if not hasattr(client, name)] == []
    assert client.can_paginate("describe_instances")  # type: ignore[attr-defined]
    assert client.meta.service_model.api_version == "2016-11-15"  # type: ignore[attr-defined]


def test_a_client_that_does_not_ask_for_the_cut_model_gets_botocores_whole() -> None:
    whole = ec2_client(api_version=None)
    operations = whole.meta.service_model.operation_names  # type: ignore[attr-defined]

    assert len(operations) > 500 and "DescribeSpotPriceHistory" in operations
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", whole.meta.service_model.api_version)  # type: ignore[attr-defined]
