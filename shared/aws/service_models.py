"""The EC2 and DynamoDB service models cut to the operations the AWS provider (shared/clouds/aws*.py) and
pynamodb call, for their clients to load instead of the whole.

botocore's EC2 model is ~3.7 MB of JSON describing ~750 operations: parsing it and building a client class
of every operation costs a cold provision, reaper or reconcile function ~80 ms of CPU, more than any call it
makes. The provider calls a dozen operations; this model holds them and every shape they reach, under
botocore's own service metadata (the wire protocol and `Version` are unchanged), with documentation left out.
It is still botocore's client, serializer, parser, endpoint rules and retries: only the data is smaller.
DynamoDB's model is smaller (~15 ms), but every handler's first client is pynamodb's.

The files live in `DATA_PATH` (every session of shared.aws.sessions searches it) under API versions of
their own (`EC2_API_VERSION`, `DYNAMODB_API_VERSION`, each sorting below the real one, so a client that does
not ask for it gets botocore's full model: tests' own clients, the price refresh, boto3's DynamoDB clients).
`python -m shared.aws.service_models` writes them from the installed botocore;
tests/unit/test_aws_service_models.py fails when the installed botocore contradicts them (what a newer
botocore only adds, the cut need not hold).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA_PATH = Path(__file__).with_name("botocore_data")
EC2_API_VERSION = "2016-11-14-skyless"
DYNAMODB_API_VERSION = "2012-08-09-skyless"
# service -> (botocore's API version, the cut one's, the operations kept). EC2: every operation
# shared/clouds/aws*.py calls (a call outside it fails loudly: no such method). DynamoDB: every operation
# pynamodb's connection dispatches (pynamodb/constants.py), for its clients only (shared.store.models).
CUTS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "ec2": (
        "2016-11-15",
        EC2_API_VERSION,
        (
            "AuthorizeSecurityGroupIngress", "CreateSecurityGroup", "DeleteSecurityGroup",
            "DescribeImages", "DescribeInstances", "DescribeRegions", "DescribeSecurityGroups",
            "DescribeSubnets", "DescribeVpcs", "RunInstances", "StartInstances", "StopInstances",
            "TerminateInstances",
        ),
    ),
    "dynamodb": (
        "2012-08-10",
        DYNAMODB_API_VERSION,
        (
            "BatchGetItem", "BatchWriteItem", "CreateTable", "DeleteItem", "DeleteTable", "DescribeEndpoints",
            "DescribeTable", "GetItem", "ListTables", "PutItem", "Query", "Scan", "TransactGetItems",
            "TransactWriteItems", "UpdateItem", "UpdateTable",
        ),
    ),
}  # fmt: skip


def model_files(service: str) -> dict[str, Any]:
    """File name -> content of `service`'s cut model, from the installed botocore's model."""
    import botocore.session

    source_version, _, kept_operations = CUTS[service]
    loader = botocore.session.get_session().get_component("data_loader")
    full = loader.load_service_model(service, "service-2", source_version)
    shapes: dict[str, Any] = full["shapes"]
    kept: set[str] = set()

    def keep(name: str) -> None:
        if name in kept:
            return
        kept.add(name)
        shape = shapes[name]
        members = (shape.get("members") or {}).values()
        for ref in [shape.get("member"), shape.get("key"), shape.get("value"), *members]:
            if ref:
                keep(ref["shape"])

    operations = {name: full["operations"][name] for name in kept_operations}
    for operation in operations.values():
        for ref in [operation.get("input"), operation.get("output"), *operation.get("errors", [])]:
            if ref:
                keep(ref["shape"])
    model = {
        **{key: value for key, value in full.items() if key not in ("operations", "shapes", "documentation")},
        "operations": operations,
        "shapes": {name: shapes[name] for name in sorted(kept)},
    }
    pages = loader.load_service_model(service, "paginators-1", source_version)["pagination"]
    return {
        "service-2.json": _without_documentation(model),
        "paginators-1.json": {"pagination": {k: v for k, v in pages.items() if k in kept_operations}},
        "endpoint-rule-set-1.json": loader.load_service_model(service, "endpoint-rule-set-1", source_version),
    }


def _without_documentation(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _without_documentation(v)
            for k, v in value.items()
            if k not in ("documentation", "documentationUrl")
        }
    if isinstance(value, list):
        return [_without_documentation(v) for v in value]
    return value


def write_models(folder: Path = DATA_PATH) -> list[Path]:
    import shutil

    written = []
    for service, (_, version, _) in CUTS.items():
        target = folder / service / version
        shutil.rmtree(folder / service, ignore_errors=True)
        target.mkdir(parents=True)
        for name, content in model_files(service).items():
            path = target / name
            path.write_text(json.dumps(content, separators=(",", ":"), sort_keys=True) + "\n")
            written.append(path)
    return written


if __name__ == "__main__":
    for path in write_models():
        print(path)
