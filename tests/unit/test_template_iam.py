"""Least privilege in infra/template.yaml, rule by rule, over the roles as deployed (SAM's transform applied,
names resolved): an IAM policy linter (parliament) over every role, then one test per rule. Whether each
role covers what its code really calls is tests/test_template_functions.py's part."""

from __future__ import annotations

import ast
import fnmatch
import json
import sys
from typing import Any

import pytest
from parliament import analyze_policy_string
from template_resolution import (
    DeployedFunction,
    StackResolver,
    as_list,
    deployed_functions,
    load_template,
    resolved_role_statements,
)

PREFIX = "skyless"
BUCKET_ARN = f"arn:aws:s3:::{PREFIX}-artifacts"
PROFILE_ARN = f"arn:aws:iam::123456789012:instance-profile/{PREFIX}-NodeInstanceProfile"
SENDER = "skyless@example.com"  # the NotifySender parameter's default
STORAGE_BUCKETS = "acme-ml-*"  # a deploy names the buckets tasks may use; there is no default


@pytest.fixture(scope="module")
def resolver() -> StackResolver:
    resolver = StackResolver(
        load_template(), parameters={"Prefix": PREFIX, "StorageBuckets": STORAGE_BUCKETS}
    )
    resolver.physical.update(
        AgentSecret=f"arn:aws:secretsmanager:us-east-1:123456789012:secret:{PREFIX}/agent-token-key-AbCdEf",
        NodeRole=f"{PREFIX}-NodeRole",
        NodeInstanceProfile=f"{PREFIX}-NodeInstanceProfile",
        SchedulerRole=f"{PREFIX}-SchedulerRole",
        StorageRole=f"{PREFIX}-StorageRole",
        HttpApi="a1b2c3d4e5",
    )
    resolver.attributes[("EventsTable", "StreamArn")] = (
        f"arn:aws:dynamodb:us-east-1:123456789012:table/{PREFIX}-events/stream/2026-11-22T21:00:00.000"
    )
    return resolver


@pytest.fixture(scope="module")
def functions(resolver: StackResolver) -> dict[str, DeployedFunction]:
    return deployed_functions(resolver)


def _grants(statement: dict[str, Any], action: str) -> bool:
    return any(fnmatch.fnmatchcase(action.lower(), a.lower()) for a in as_list(statement["Action"]))


def _statements_granting(
    functions: dict[str, DeployedFunction], action: str
) -> list[tuple[str, dict[str, Any]]]:
    return [(name, s) for name, f in functions.items() for s in f.statements if _grants(s, action)]


# -- the linter --------------------------------------------------------------------------------------------


def _covered_elsewhere(finding: Any, statements: list[dict[str, Any]]) -> bool:
    """parliament judges statements one by one: RunInstances granted on the instance in one statement (with
    a tag condition) and on images/subnets in another is flagged twice, though the role grants all of it."""
    if finding.issue != "RESOURCE_MISMATCH":
        return False
    for missing in finding.detail:
        resources = [r for s in statements if _grants(s, missing["action"]) for r in as_list(s["Resource"])]
        pattern = missing["required_format"].replace("arn:*:", "arn:aws:", 1)
        if not any(fnmatch.fnmatchcase(r, pattern) or fnmatch.fnmatchcase(pattern, r) for r in resources):
            return False
    return True


def test_parliament_finds_nothing_wrong_in_any_role(
    resolver: StackResolver, functions: dict[str, DeployedFunction]
) -> None:
    roles = {name: f.statements for name, f in functions.items()}
    roles["SchedulerRole"] = resolved_role_statements(resolver, "SchedulerRole")
    findings = []
    for name, statements in roles.items():
        policy = analyze_policy_string(json.dumps({"Version": "2012-10-17", "Statement": statements}))
        assert policy.policy_json, name
        for finding in policy.findings:
            if not _covered_elsewhere(finding, statements):
                findings.append(f"{name}: {finding.issue} {finding.detail}")
    assert not findings, "\n".join(findings)


# -- one rule each -------------------------------------------------------------------------------------------


def test_nodes_have_no_rights_at_all_and_the_agent_needs_none(resolver: StackResolver) -> None:
    assert resolved_role_statements(resolver, "NodeRole") == []
    assert "ManagedPolicyArns" not in resolver.template["Resources"]["NodeRole"]["Properties"]
    # the agent reaches its run data only through the URLs its config carries: no SDK, no credentials
    from node_agent.user_data import bundled_agent_source

    tree = ast.parse(bundled_agent_source())
    imported = {
        (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


def test_no_function_may_write_or_delete_on_a_wildcard_resource(
    functions: dict[str, DeployedFunction],
) -> None:
    read_only = ("ec2:Describe", "pricing:GetProducts")
    for name, function in functions.items():
        for statement in function.statements:
            if "*" in as_list(statement["Resource"]):
                for action in as_list(statement["Action"]):
                    assert action.startswith(read_only), f"{name}: {action} on *"


def test_ec2_tags_may_be_set_only_by_the_call_creating_the_resource(
    functions: dict[str, DeployedFunction],
) -> None:
    granting = _statements_granting(functions, "ec2:CreateTags")
    assert [name for name, _ in granting] == ["ProvisionFunction"]
    for _, statement in granting:
        assert statement["Condition"] == {
            "StringEquals": {"ec2:CreateAction": ["RunInstances", "CreateSecurityGroup"]}
        }


def test_launches_and_groups_must_carry_the_skyless_tag(functions: dict[str, DeployedFunction]) -> None:
    for action, kind in (("ec2:RunInstances", "instance"), ("ec2:CreateSecurityGroup", "security-group")):
        for name, statement in _statements_granting(functions, action):
            if any(f":{kind}/" in r for r in as_list(statement["Resource"])):
                assert statement["Condition"] == {
                    "StringEquals": {"aws:RequestTag/skyless-managed": "true"}
                }, name


def test_terminations_need_the_skyless_tag_and_the_nodes_profile_only_provision_may_pass(
    functions: dict[str, DeployedFunction],
) -> None:
    terminating = _statements_granting(functions, "ec2:TerminateInstances")
    # spot_watch only re-plans a recovered job: provision fences its earlier attempt, then launches
    assert {name for name, _ in terminating} == {"ProvisionFunction", "ReconcileFunction", "ReaperFunction"}
    for _, statement in terminating:
        assert statement["Condition"] == {
            "StringEquals": {"aws:ResourceTag/skyless-managed": "true"},
            "ArnEquals": {"ec2:InstanceProfile": PROFILE_ARN},
        }
    for action in ("ec2:DeleteSecurityGroup", "ec2:AuthorizeSecurityGroupIngress"):
        for name, statement in _statements_granting(functions, action):
            assert statement["Condition"] == {"StringEquals": {"aws:ResourceTag/skyless-managed": "true"}}, (
                name
            )
    passing = _statements_granting(functions, "iam:PassRole")
    node_role = [s for name, s in passing if name == "ProvisionFunction"]
    assert [s["Resource"] for s in node_role] == [f"arn:aws:iam::123456789012:role/{PREFIX}-NodeRole"]
    assert all("iam:PassedToService" in s["Condition"]["StringEquals"] for _, s in passing)
    assert {name for name, _ in passing} == {
        "ProvisionFunction",
        "ApiFunction",
    }  # the API: the scheduler role


def test_email_may_be_sent_only_as_the_configured_sender(functions: dict[str, DeployedFunction]) -> None:
    sending = _statements_granting(functions, "ses:SendEmail")
    assert {name for name, _ in sending} == {"NotifyFunction", "ApiFunction"}
    for _, statement in sending:
        assert statement["Resource"] == f"arn:aws:ses:us-east-1:123456789012:identity/{SENDER}"
        assert statement["Condition"] == {"StringEquals": {"ses:FromAddress": SENDER}}


# The StorageBuckets parameter bounds the buckets tasks may name (default "*": any; a deployment narrows it).
TASK_BUCKETS_ARN = f"arn:aws:s3:::{STORAGE_BUCKETS}"
TASK_BUCKET_ACTIONS = {
    "s3:CreateBucket",
    "s3:PutLifecycleConfiguration",
    "s3:DeleteBucket",
    "s3:ListBucket",
    "s3:DeleteObject",
}


def test_bucket_rights_are_per_prefix_and_per_function(functions: dict[str, DeployedFunction]) -> None:
    expected = {
        "ApiFunction": {"runs", "uploads", "catalog", "clusters"},  # clusters/: named clusters' jobs
        "SubmitFunction": {"tasks", "runs", "catalog"},
        "OptimizeFunction": {"runs", "catalog"},
        "ProvisionFunction": {"runs"},
        "SpotWatchFunction": {"runs", "catalog"},  # it re-plans a recovered job in the same call
        "ReconcileFunction": {"runs"},
        "CatalogRefreshFunction": {"catalog"},
        "NotifyFunction": set(),
        "ReaperFunction": set(),
    }
    for name, function in functions.items():
        prefixes = set()
        for statement in function.statements:
            if statement.get("Effect") == "Deny":  # grants nothing (NeverTheArtifactsBucket)
                continue
            for resource in as_list(statement["Resource"]):
                if not resource.startswith("arn:aws:s3:::"):
                    continue
                sid = statement.get("Sid")
                if sid in ("CreateAndDeleteTaskBuckets", "DeleteTaskBucketsSkylessMadeOnRequest"):
                    # buckets named in task files: made and removed at job end, or by `skyless storage delete`
                    owner = "ProvisionFunction" if sid == "CreateAndDeleteTaskBuckets" else "ApiFunction"
                    assert name == owner, name
                    assert resource in (TASK_BUCKETS_ARN, TASK_BUCKETS_ARN + "/*"), resource
                    assert set(as_list(statement["Action"])) <= TASK_BUCKET_ACTIONS, statement
                    continue
                if sid == "PlacesOfTaskBuckets":  # data gravity: where a bucket a task reads lives, its size
                    assert name in ("ApiFunction", "SubmitFunction"), name
                    assert resource == TASK_BUCKETS_ARN, resource  # the buckets, never an object in them
                    assert set(as_list(statement["Action"])) == {"s3:GetBucketLocation", "s3:ListBucket"}
                    continue
                if resource == BUCKET_ARN:  # the bucket itself: listing, under one prefix only
                    assert as_list(statement["Action"]) == ["s3:ListBucket"], name
                    listed = statement["Condition"]["StringLike"]["s3:prefix"]
                    assert listed in ("runs/*/logs/*", "clusters/*/jobs/*/logs/*"), name
                    continue
                assert resource.startswith(BUCKET_ARN + "/") and resource.endswith("/*"), (name, resource)
                prefix = resource[len(BUCKET_ARN) + 1 : -2]
                assert prefix and "*" not in prefix, (name, resource)
                prefixes.add(prefix)
        assert prefixes == expected[name], name


def test_only_the_functions_that_sign_node_credentials_read_the_generated_key(
    resolver: StackResolver, functions: dict[str, DeployedFunction]
) -> None:
    secret = resolver.template["Resources"]["AgentSecret"]["Properties"]
    assert secret["GenerateSecretString"]["PasswordLength"] >= 32 and "SecretString" not in secret
    key_arn = resolver.ref("AgentSecret")
    readers = {
        name
        for name, s in _statements_granting(functions, "secretsmanager:GetSecretValue")
        if key_arn in as_list(s["Resource"])
    }
    # every function that starts an attempt (submit, recovery) writes the hash of its agents' token
    assert readers == {
        "ApiFunction",
        "ProvisionFunction",
        "SubmitFunction",
        "SpotWatchFunction",
        "ReconcileFunction",
    }
    for name, function in functions.items():
        has_key = function.environment.get("SKYLESS_AGENT_SECRET_ARN") == key_arn
        assert has_key == (name in readers), name
        assert "SKYLESS_AGENT_SECRET" not in function.environment, name  # never the key itself


def test_no_function_may_touch_another_stacks_tables_or_queues(
    functions: dict[str, DeployedFunction],
) -> None:
    for name, function in functions.items():
        for statement in function.statements:
            for resource in as_list(statement["Resource"]):
                if resource.startswith(("arn:aws:dynamodb:", "arn:aws:sqs:")):
                    assert f":table/{PREFIX}-" in resource or f":{PREFIX}-" in resource, (name, resource)
                    assert "*" not in resource.replace("/index/*", ""), (name, resource)


def test_no_role_reaches_a_bucket_the_deploy_did_not_name(
    resolver: StackResolver, functions: dict[str, DeployedFunction]
) -> None:
    """No `arn:aws:s3:::*`: the stack owns no account-wide storage rights (issue 19). StorageBuckets has no
    default and refuses `*`; every S3 resource of every role (functions, the storage role nodes' credentials
    come from, the scheduler's, the nodes') names the artifacts bucket or the deploy's pattern."""
    import re

    parameter = resolver.template["Parameters"]["StorageBuckets"]
    assert "Default" not in parameter
    for refused in ("*", "**", "a*", "*-logs", ""):
        assert not re.fullmatch(parameter["AllowedPattern"], refused), refused
    for accepted in ("acme-ml-*", "team.data", "abc*"):
        assert re.fullmatch(parameter["AllowedPattern"], accepted), accepted
    roles = {name: f.statements for name, f in functions.items()}
    for logical in ("StorageRole", "SchedulerRole", "NodeRole"):
        roles[logical] = resolved_role_statements(resolver, logical)
    strangers = ("terraform-state-of-the-account", "cloudtrail-logs", "another-stack-artifacts")
    for name, statements in roles.items():
        for statement in (s for s in statements if s.get("Effect") == "Allow"):
            actions = [a.lower() for a in as_list(statement["Action"])]
            for resource in as_list(statement["Resource"]):
                if resource == "*":
                    assert not any(a.startswith("s3:") for a in actions), (name, statement)
                if not resource.startswith("arn:aws:s3:::"):
                    continue
                bucket = resource.removeprefix("arn:aws:s3:::").split("/", 1)[0]
                assert bucket.strip("*"), (name, resource)
                assert not any(fnmatch.fnmatchcase(b, bucket) for b in strangers), (name, resource)
    storage = resolved_role_statements(resolver, "StorageRole")
    assert {r for s in storage if s["Effect"] == "Allow" for r in as_list(s["Resource"])} == {
        TASK_BUCKETS_ARN, TASK_BUCKETS_ARN + "/*"}  # fmt: skip


def test_the_audit_log_may_be_appended_and_read_but_never_changed(
    functions: dict[str, DeployedFunction],
) -> None:
    audit = f"arn:aws:dynamodb:us-east-1:123456789012:table/{PREFIX}-audit"
    granted = {
        (name, action.lower())
        for name, function in functions.items()
        for statement in function.statements
        if statement.get("Effect") == "Allow" and audit in as_list(statement["Resource"])
        for action in as_list(statement["Action"])
    }
    assert granted == {("ApiFunction", "dynamodb:putitem"), ("ApiFunction", "dynamodb:query")}
