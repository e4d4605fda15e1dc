"""The EC2 service model cut to the operations the AWS provider (shared/clouds/aws*.py) calls, for boto3 to
load instead of the whole.

botocore's EC2 model is ~3.7 MB of JSON describing ~750 operations: parsing it and building a client class
of every operation costs a cold provision, reaper or reconcile function ~80 ms of CPU, more than any call it
makes. The provider calls a dozen operations; this model holds them and every shape they reach, under
botocore's own service metadata (the wire protocol and `Version` are unchanged), with documentation left out.
It is still botocore's client, serializer, parser, endpoint rules and retries: only the data is smaller.

The files live in `DATA_PATH` (every session of shared.aws.sessions searches it) under an API version of
their own (`EC2_API_VERSION`, which sorts below EC2's real one, so a client that does not ask for it gets
botocore's full model: tests' own clients, the price refresh). `python -m shared.aws.service_models` writes
them from the installed botocore; tests/unit/test_aws_service_models.py fails when they are not what that
command writes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA_PATH = Path(__file__).with_name("botocore_data")
SOURCE_VERSION = "2016-11-15"
EC2_API_VERSION = "2016-11-14-skyless"
# Every EC2 operation shared/clouds/aws*.py calls (a call outside it fails loudly: no such method).
EC2_OPERATIONS = (
    "AuthorizeSecurityGroupIngress",
    "CreateSecurityGroup",
    "DeleteSecurityGroup",
    "DescribeImages",
    "DescribeInstances",
    "DescribeRegions",
    "DescribeSecurityGroups",
    "DescribeSubnets",
    "DescribeVpcs",
    "RunInstances",
    "StartInstances",
    "StopInstances",
    "TerminateInstances",
)


def model_files() -> dict[str, Any]:
    """File name -> content of the cut model, from the installed botocore's EC2 model."""
    import botocore.session

    loader = botocore.session.get_session().get_component("data_loader")
    full = loader.load_service_model("ec2", "service-2", SOURCE_VERSION)
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

    operations = {name: full["operations"][name] for name in EC2_OPERATIONS}
    for operation in operations.values():
        for ref in [operation.get("input"), operation.get("output"), *operation.get("errors", [])]:
            if ref:
                keep(ref["shape"])
    service = {
        **{key: value for key, value in full.items() if key not in ("operations", "shapes", "documentation")},
        "operations": operations,
        "shapes": {name: shapes[name] for name in sorted(kept)},
    }
    pages = loader.load_service_model("ec2", "paginators-1", SOURCE_VERSION)["pagination"]
    return {
        "service-2.json": _without_documentation(service),
        "paginators-1.json": {"pagination": {k: v for k, v in pages.items() if k in EC2_OPERATIONS}},
        "endpoint-rule-set-1.json": loader.load_service_model("ec2", "endpoint-rule-set-1", SOURCE_VERSION),
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


def write_model(folder: Path = DATA_PATH) -> list[Path]:
    import shutil

    target = folder / "ec2" / EC2_API_VERSION
    shutil.rmtree(folder / "ec2", ignore_errors=True)
    target.mkdir(parents=True)
    written = []
    for name, content in model_files().items():
        path = target / name
        path.write_text(json.dumps(content, separators=(",", ":"), sort_keys=True) + "\n")
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write_model():
        print(path)
