"""infra/template.yaml as CloudFormation would deploy it onto one stack: SAM's transform (policy templates,
Globals) applied by aws-sam-translator, then every Ref/GetAtt/Sub resolved to the names of a concrete stack
(the moto stack the tests create). What a function's environment and role really are, not what they read."""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cfnlint.decode import decode

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "infra" / "template.yaml"
ACCOUNT = "123456789012"  # moto's default account
SUB_VARIABLE = re.compile(r"\$\{([^}!][^}]*)\}")


def load_template() -> dict[str, Any]:
    parsed, problems = decode(str(TEMPLATE))
    assert not problems, problems
    return json.loads(json.dumps(parsed))  # plain dicts and lists, no cfn-lint node types


class _NoManagedPolicyNames:
    """The transform asks for managed policies by name only when a template names one: ours name none."""

    def load(self) -> dict[str, str]:
        return {}


def transformed_template(template: dict[str, Any] | None = None, region: str = "us-east-1") -> dict[str, Any]:
    """The CloudFormation SAM's transform makes (functions -> Lambda functions + roles + event mappings)."""
    from samtranslator.translator.transform import transform

    document = copy.deepcopy(template or load_template())
    document["Globals"]["Function"]["CodeUri"] = "s3://bucket/code.zip"  # the transform wants an S3 URI
    saved = os.environ.get("AWS_DEFAULT_REGION")
    os.environ["AWS_DEFAULT_REGION"] = region
    try:
        return transform(document, {}, _NoManagedPolicyNames())
    finally:
        if saved is None:
            os.environ.pop("AWS_DEFAULT_REGION", None)
        else:
            os.environ["AWS_DEFAULT_REGION"] = saved


@dataclass
class StackResolver:
    """Resolves intrinsic functions against one stack. `physical` and `attributes` hold what only the live
    stack knows (a secret's ARN, a stream's ARN, generated role names); everything else follows from the
    template's own naming (`${Prefix}-jobs`, ...)."""

    template: dict[str, Any]
    parameters: dict[str, str]
    region: str = "us-east-1"
    account: str = ACCOUNT
    physical: dict[str, str] = field(default_factory=dict)  # logical id -> what Ref answers
    attributes: dict[tuple[str, str], str] = field(default_factory=dict)  # (logical id, attribute) -> value

    def __post_init__(self) -> None:
        for name, spec in self.template.get("Parameters", {}).items():
            self.parameters.setdefault(name, str(spec.get("Default", "")))

    # -- intrinsics ------------------------------------------------------------------------------

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, argument),) = value.items()
            if key == "Ref":
                return self.ref(argument)
            if key == "Fn::GetAtt":
                logical, attribute = argument if isinstance(argument, list) else argument.split(".", 1)
                return self.get_att(logical, attribute)
            if key == "Fn::Sub":
                return self.sub(argument)
            if key == "Fn::Join":
                separator, items = argument
                return separator.join(str(self.resolve(item)) for item in items)
            if key == "Fn::Select":
                index, items = argument
                return self.resolve(items)[int(index)]
        return {key: self.resolve(item) for key, item in value.items()}

    def sub(self, argument: Any) -> str:
        text, variables = (argument, {}) if isinstance(argument, str) else argument
        local = {name: self.resolve(value) for name, value in variables.items()}

        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in local:
                return str(local[name])
            if "." in name and not name.startswith("AWS::"):
                logical, attribute = name.split(".", 1)
                return str(self.get_att(logical, attribute))
            return str(self.ref(name))

        return SUB_VARIABLE.sub(one, text)

    def ref(self, name: str) -> str:
        pseudo = {
            "AWS::Region": self.region,
            "AWS::AccountId": self.account,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": self.parameters.get("Prefix", "skyless"),
        }
        if name in pseudo:
            return pseudo[name]
        if name in self.parameters:
            return self.parameters[name]
        if name in self.physical:
            return self.physical[name]
        resource = self._resource(name)
        kind, props = resource["Type"], resource.get("Properties", {})
        if kind == "AWS::SQS::Queue":
            return (
                f"https://sqs.{self.region}.amazonaws.com/{self.account}/{self.resolve(props['QueueName'])}"
            )
        for key in ("TableName", "BucketName", "RoleName", "Name", "InstanceProfileName"):
            if key in props:
                return str(self.resolve(props[key]))
        raise KeyError(f"no physical name known for {name} ({kind}): give it in `physical`")

    def get_att(self, logical: str, attribute: str) -> str:
        if (logical, attribute) in self.attributes:
            return self.attributes[(logical, attribute)]
        kind = self._resource(logical)["Type"]
        name = self.ref(logical)
        arns = {
            "AWS::SQS::Queue": f"arn:aws:sqs:{self.region}:{self.account}:{name.rsplit('/', 1)[-1]}",
            "AWS::DynamoDB::Table": f"arn:aws:dynamodb:{self.region}:{self.account}:table/{name}",
            "AWS::S3::Bucket": f"arn:aws:s3:::{name}",
            "AWS::IAM::Role": f"arn:aws:iam::{self.account}:role/{name}",
            "AWS::IAM::InstanceProfile": f"arn:aws:iam::{self.account}:instance-profile/{name}",
            "AWS::Events::Rule": f"arn:aws:events:{self.region}:{self.account}:rule/{name}",
        }
        if attribute == "Arn" and kind in arns:
            return arns[kind]
        if attribute == "QueueName" and kind == "AWS::SQS::Queue":
            return name.rsplit("/", 1)[-1]
        raise KeyError(f"no value known for {logical}.{attribute}: give it in `attributes`")

    def _resource(self, logical: str) -> dict[str, Any]:
        try:
            return self.template["Resources"][logical]
        except KeyError:
            raise KeyError(f"{logical} is neither a parameter nor a resource of the template") from None


# -- what each function is, deployed ------------------------------------------------------------------


@dataclass(frozen=True)
class DeployedFunction:
    logical_id: str
    handler: str
    code_root: Path  # the CodeUri folder: what Lambda puts at /var/task
    environment: dict[str, str]
    events: dict[str, dict[str, Any]]  # the SAM Events, resolved
    statements: list[dict[str, Any]]  # every statement of the role's inline policies, resolved
    managed_policies: list[str]


def deployed_functions(resolver: StackResolver) -> dict[str, DeployedFunction]:
    sam = resolver.template
    cfn = transformed_template(sam, resolver.region)
    globals_code = sam.get("Globals", {}).get("Function", {}).get("CodeUri")
    found: dict[str, DeployedFunction] = {}
    for logical, resource in sam["Resources"].items():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        props = resource["Properties"]
        lambda_props = cfn["Resources"][logical]["Properties"]
        role_logical = lambda_props["Role"]["Fn::GetAtt"][0]
        role = cfn["Resources"][role_logical]["Properties"]
        statements = [
            statement
            for policy in role.get("Policies", [])
            for statement in resolver.resolve(policy["PolicyDocument"])["Statement"]
        ]
        variables = lambda_props.get("Environment", {}).get("Variables", {})
        found[logical] = DeployedFunction(
            logical_id=logical,
            handler=props["Handler"],
            code_root=(TEMPLATE.parent / props.get("CodeUri", globals_code)).resolve(),
            environment={name: str(resolver.resolve(value)) for name, value in variables.items()},
            events={name: resolver.resolve(event) for name, event in props.get("Events", {}).items()},
            statements=statements,
            managed_policies=list(role.get("ManagedPolicyArns", [])),
        )
    return found


def resolved_role_statements(resolver: StackResolver, logical: str) -> list[dict[str, Any]]:
    """The inline statements of a plain AWS::IAM::Role of the template (NodeRole, SchedulerRole)."""
    role = resolver.template["Resources"][logical]["Properties"]
    return [s for p in role.get("Policies", []) for s in resolver.resolve(p["PolicyDocument"])["Statement"]]


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def matches_pattern(pattern: Mapping[str, Any], event: Mapping[str, Any]) -> bool:
    """An event filter / EventBridge pattern of exact values (the subset the template uses)."""
    for key, expected in pattern.items():
        if key not in event:
            return False
        if isinstance(expected, dict):
            if not isinstance(event[key], dict) or not matches_pattern(expected, event[key]):
                return False
        elif event[key] not in expected:
            return False
    return True
