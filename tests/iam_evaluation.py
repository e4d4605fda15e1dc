"""From a recorded botocore call to the IAM requests AWS would authorize for it (action, resource, context),
and a small evaluator of Allow statements over them: exact and wildcard actions and resources, and the
condition operators the template uses. Enough to say "this role may make this call", not a full IAM."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from template_resolution import as_list

ACCOUNT = "123456789012"


@dataclass(frozen=True)
class IamRequest:
    action: str  # "s3:GetObject"
    resource: str  # an ARN, or "*" for actions AWS does not scope to a resource
    context: dict[str, Any] = field(default_factory=dict)  # condition keys the request carries
    why: str = ""  # the call it came from

    def describe(self) -> str:
        return f"{self.action} on {self.resource} ({self.why})"


def _queue_arn(url: str, region: str) -> str:
    return f"arn:aws:sqs:{region}:{ACCOUNT}:{url.rstrip('/').rsplit('/', 1)[-1]}"


def _secret_arn(secret_id: str, region: str) -> str:
    if secret_id.startswith("arn:"):
        return secret_id
    return f"arn:aws:secretsmanager:{region}:{ACCOUNT}:secret:{secret_id}-AbCdEf"  # AWS adds 6 characters


def _tags(specs: list[dict[str, Any]], resource_type: str) -> dict[str, str]:
    return {
        tag["Key"]: tag["Value"]
        for spec in specs or []
        if spec.get("ResourceType") == resource_type
        for tag in spec.get("Tags", [])
    }


def iam_requests(
    call: dict[str, Any], region: str, profile_roles: Mapping[str, str] | None = None
) -> list[IamRequest]:
    """What IAM checks for one recorded call (presigned URLs are checked when they are used, against the
    rights of the function that signed them, so they count as that function's calls)."""
    service, operation, params = call["signing_name"], call["operation"], call["params"]
    why = f"{service}.{operation}" + (" (presigned)" if call.get("presigned") else "")

    def one(action: str, resource: str, **context: Any) -> IamRequest:
        return IamRequest(action, resource, context, why)

    if service == "dynamodb":
        table = f"arn:aws:dynamodb:{region}:{ACCOUNT}:table/"
        if operation == "TransactWriteItems":
            kinds = {
                "Put": "PutItem",
                "Update": "UpdateItem",
                "Delete": "DeleteItem",
                "ConditionCheck": "ConditionCheckItem",
            }
            return [
                one(f"dynamodb:{kinds[kind]}", table + body["TableName"])
                for item in params["TransactItems"]
                for kind, body in item.items()
            ]
        if operation == "TransactGetItems":
            return [
                one("dynamodb:GetItem", table + item["Get"]["TableName"]) for item in params["TransactItems"]
            ]
        if operation in ("BatchGetItem", "BatchWriteItem"):
            return [one(f"dynamodb:{operation}", table + name) for name in params["RequestItems"]]
        resource = table + params["TableName"]
        if params.get("IndexName"):
            resource += f"/index/{params['IndexName']}"
        if operation == "UpdateItem":  # the top-level attributes it names: the key and the expressions'
            named = [*params["Key"], *params.get("ExpressionAttributeNames", {}).values()]
            return [one(f"dynamodb:{operation}", resource, **{"dynamodb:Attributes": named})]
        return [one(f"dynamodb:{operation}", resource)]
    if service == "sqs":
        if operation == "GetQueueUrl":
            return [one("sqs:GetQueueUrl", f"arn:aws:sqs:{region}:{ACCOUNT}:{params['QueueName']}")]
        return [one(f"sqs:{operation}", _queue_arn(params["QueueUrl"], region))]
    if service == "s3":
        bucket = f"arn:aws:s3:::{params['Bucket']}"
        if operation in ("ListObjectsV2", "ListObjects", "HeadBucket"):
            return [one("s3:ListBucket", bucket, **{"s3:prefix": params.get("Prefix", "")})]
        renamed = {
            "HeadObject": "GetObject",
            "GetBucketNotificationConfiguration": "GetBucketNotification",
            "PutBucketNotificationConfiguration": "PutBucketNotification",
            "PutBucketLifecycleConfiguration": "PutLifecycleConfiguration",
        }
        if "Key" in params:
            return [one(f"s3:{renamed.get(operation, operation)}", f"{bucket}/{params['Key']}")]
        return [one(f"s3:{renamed.get(operation, operation)}", bucket)]
    if service == "secretsmanager":
        return [
            one(f"secretsmanager:{operation}", _secret_arn(params.get("SecretId") or params["Name"], region))
        ]
    if service == "ses":
        source = params.get("Source") or params.get("FromEmailAddress", "")
        address = source.rsplit("<", 1)[-1].rstrip(">")
        return [
            one(
                f"ses:{operation}",
                f"arn:aws:ses:{region}:{ACCOUNT}:identity/{address}",
                **{"ses:FromAddress": address},
            )
        ]
    if service == "scheduler":
        group = params.get("GroupName") or "default"
        schedule = f"arn:aws:scheduler:{region}:{ACCOUNT}:schedule/{group}/{params['Name']}"
        found = [one(f"scheduler:{operation}", schedule)]
        role = (params.get("Target") or {}).get("RoleArn")
        if role:
            found.append(one("iam:PassRole", role, **{"iam:PassedToService": "scheduler.amazonaws.com"}))
        return found
    if service == "ec2":
        return _ec2_requests(operation, params, region, one, profile_roles or {})
    return [one(f"{service}:{operation}", "*")]


def _ec2_requests(
    operation: str,
    params: dict[str, Any],
    region: str,
    one: Callable[..., IamRequest],
    profile_roles: Mapping[str, str],
) -> list[IamRequest]:
    arn = f"arn:aws:ec2:{region}:{ACCOUNT}:"
    specs = params.get("TagSpecifications") or []
    if operation == "RunInstances":
        tags = _tags(specs, "instance")
        found = [
            one("ec2:RunInstances", arn + "instance/*", **{f"aws:RequestTag/{k}": v for k, v in tags.items()})
        ]
        found.append(one("ec2:RunInstances", f"arn:aws:ec2:{region}::image/{params['ImageId']}"))
        for group in params.get("SecurityGroupIds", []):
            found.append(one("ec2:RunInstances", arn + f"security-group/{group}"))
        for kind in ("instance", "volume"):
            kind_tags = _tags(specs, kind)
            if kind_tags:
                context = {
                    "ec2:CreateAction": "RunInstances",
                    "aws:TagKeys": sorted(kind_tags),
                    **{f"aws:RequestTag/{k}": v for k, v in kind_tags.items()},
                }
                found.append(one("ec2:CreateTags", arn + f"{kind}/*", **context))
        profile = (params.get("IamInstanceProfile") or {}).get("Arn")
        if profile:
            role = profile_roles.get(profile, f"the role of {profile}")
            found.append(one("iam:PassRole", role, **{"iam:PassedToService": "ec2.amazonaws.com"}))
        return found
    if operation == "CreateSecurityGroup":
        tags = _tags(specs, "security-group")
        context = {f"aws:RequestTag/{k}": v for k, v in tags.items()}
        found = [one("ec2:CreateSecurityGroup", arn + "security-group/*", **context)]
        if params.get("VpcId"):
            found.append(one("ec2:CreateSecurityGroup", arn + f"vpc/{params['VpcId']}"))
        if tags:
            found.append(
                one(
                    "ec2:CreateTags",
                    arn + "security-group/*",
                    **{"ec2:CreateAction": "CreateSecurityGroup", "aws:TagKeys": sorted(tags), **context},
                )
            )
        return found
    if operation == "TerminateInstances":
        return [one("ec2:TerminateInstances", arn + f"instance/{i}") for i in params["InstanceIds"]]
    if operation in ("AuthorizeSecurityGroupIngress", "DeleteSecurityGroup"):
        return [one(f"ec2:{operation}", arn + f"security-group/{params['GroupId']}")]
    if operation == "CreateTags":
        kinds = {"i-": "instance", "sg-": "security-group", "vol-": "volume"}
        return [
            one(
                "ec2:CreateTags",
                arn + f"{next(v for k, v in kinds.items() if rid.startswith(k))}/{rid}",
                **{"aws:TagKeys": sorted(t["Key"] for t in params["Tags"])},
            )
            for rid in params["Resources"]
        ]
    return [one(f"ec2:{operation}", "*")]


# -- evaluation -----------------------------------------------------------------------------------------

OPERATORS: dict[str, Callable[[str, str], bool]] = {
    "StringEquals": lambda value, pattern: value == pattern,
    "StringLike": lambda value, pattern: fnmatch.fnmatchcase(value, pattern),
    "ArnEquals": lambda value, pattern: value == pattern,
    "ArnLike": lambda value, pattern: fnmatch.fnmatchcase(value, pattern),
    "ArnNotLike": lambda value, pattern: not fnmatch.fnmatchcase(value, pattern),  # one pattern only
}


def _condition_holds(condition: dict[str, Any], context: dict[str, Any]) -> bool:
    for operator, tests in condition.items():
        qualifier, _, base = operator.rpartition(":")
        compare = OPERATORS[base]
        for key, patterns in tests.items():
            if key not in context:
                return False
            values = [str(v) for v in as_list(context[key])]
            patterns = [str(p) for p in as_list(patterns)]
            hits = [any(compare(v, p) for p in patterns) for v in values]
            if not (all(hits) if qualifier == "ForAllValues" else any(hits)):
                return False
    return True


def allowing_statement(
    statements: list[dict[str, Any]], request: IamRequest, resource_context: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """The first Allow statement that grants the request (its conditions evaluated), or None."""
    context = {**(resource_context or {}), **request.context}
    for statement in statements:
        assert "NotAction" not in statement and "NotResource" not in statement, statement
        if statement.get("Effect") != "Allow":
            continue
        actions = [a.lower() for a in as_list(statement["Action"])]
        if not any(fnmatch.fnmatchcase(request.action.lower(), a) for a in actions):
            continue
        if not any(fnmatch.fnmatchcase(request.resource, r) for r in as_list(statement["Resource"])):
            continue
        if _condition_holds(statement.get("Condition") or {}, context):
            return statement
    return None


def denying_statement(statements: list[dict[str, Any]], request: IamRequest) -> dict[str, Any] | None:
    """The first Deny statement that matches the request (its conditions evaluated), or None."""
    for statement in statements:
        if statement.get("Effect") != "Deny":
            continue
        actions = [a.lower() for a in as_list(statement["Action"])]
        if not any(fnmatch.fnmatchcase(request.action.lower(), a) for a in actions):
            continue
        if not any(fnmatch.fnmatchcase(request.resource, r) for r in as_list(statement["Resource"])):
            continue
        if _condition_holds(statement.get("Condition") or {}, request.context):
            return statement
    return None
