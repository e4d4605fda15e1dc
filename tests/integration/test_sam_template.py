"""infra/template.yaml: cfn-lint clean, and its functions, queues, tables and rules agree with the code."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cfnlint.decode import decode

from local_runtime.dispatcher import QUEUE_HANDLERS
from shared.config import QUEUE_KINDS, Settings
from shared.stack import SPOT_EVENT_PATTERN

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "infra" / "template.yaml"
CFN_LINT = Path(sys.executable).with_name("cfn-lint")
SETTINGS = Settings(prefix="skyless")


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    parsed, problems = decode(str(TEMPLATE))
    assert not problems, problems
    return parsed


def _of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {name: r for name, r in template["Resources"].items() if r["Type"] == kind}


def _name(value: Any) -> str:
    """A `!Sub "${Prefix}-x"` name as the default prefix makes it."""
    text = value["Fn::Sub"] if isinstance(value, dict) else value
    return text.replace("${Prefix}", SETTINGS.prefix)


def _keys(schema: list[dict[str, str]]) -> set[tuple[str, str]]:
    return {(k["AttributeName"], k["KeyType"]) for k in schema}


def test_cfn_lint_reports_nothing():
    result = subprocess.run([str(CFN_LINT), str(TEMPLATE)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_function_handler_imports_and_is_callable(template: dict[str, Any]):
    functions = _of_type(template, "AWS::Serverless::Function")
    handlers = {r["Properties"]["Handler"] for r in functions.values()}
    assert handlers == {
        "functions.submit.app.handler",
        "functions.optimize.handler.handler",
        "functions.provision.handler.handler",
        "functions.spot_watch.handler.handler",
        "functions.reconcile.handler.handler",
        "functions.notify.handler.handler",
        "functions.catalog_refresh.handler.handler",
        "functions.reaper.handler.handler",
        "functions.submit.handler.handler",
    }
    # callable is not enough (a Chalice app is): tests/test_template_functions.py calls them as Lambda does
    for handler in sorted(handlers):
        module, _, attribute = handler.rpartition(".")
        assert callable(getattr(importlib.import_module(module), attribute)), handler


def test_tables_match_the_pynamodb_models(template: dict[str, Any]):
    from shared.storage.registry import buckets_model
    from shared.store.audit import audit_model
    from shared.store.cluster_records import cluster_models
    from shared.store.models import models_for
    from shared.store.notifications import notifications_model
    from shared.store.schedules import schedules_model
    from shared.store.tenancy import tenancy_model
    from shared.store.users import users_model

    models = (*models_for(SETTINGS).all(), users_model(SETTINGS), schedules_model(SETTINGS))
    models = (*models, buckets_model(SETTINGS), cluster_models(SETTINGS).table())
    models = (*models, tenancy_model(SETTINGS), audit_model(SETTINGS))
    expected = {m.Meta.table_name: m for m in (*models, notifications_model(SETTINGS))}
    tables = {_name(r["Properties"]["TableName"]): r["Properties"]
              for r in _of_type(template, "AWS::DynamoDB::Table").values()}  # fmt: skip
    assert set(tables) == set(expected)
    for name, model in expected.items():
        schema = model._get_schema()
        props = tables[name]
        assert props["BillingMode"] == "PAY_PER_REQUEST"
        assert _keys(props["KeySchema"]) == _keys(schema["key_schema"]), name
        assert {(a["AttributeName"], a["AttributeType"]) for a in props["AttributeDefinitions"]} == {
            (a["AttributeName"], a["AttributeType"]) for a in schema["attribute_definitions"]
        }, name
        indexes = {i["IndexName"]: i for i in props.get("GlobalSecondaryIndexes", [])}
        assert set(indexes) == {i["index_name"] for i in schema["global_secondary_indexes"]}, name
        for index in schema["global_secondary_indexes"]:
            ours = indexes[index["index_name"]]
            assert _keys(ours["KeySchema"]) == _keys(index["key_schema"])
            assert ours["Projection"]["ProjectionType"] == index["projection"]["ProjectionType"]


def test_queues_match_the_code_and_each_redrives_to_a_dead_letter_queue(template: dict[str, Any]):
    queues = {_name(r["Properties"]["QueueName"]): (logical, r["Properties"])
              for logical, r in _of_type(template, "AWS::SQS::Queue").items()}  # fmt: skip
    for kind in QUEUE_KINDS:
        name = SETTINGS.queue_name(kind)
        assert name in queues and f"{name}-dlq" in queues
        _, props = queues[name]
        dlq_logical, _ = queues[f"{name}-dlq"]
        assert props["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": [dlq_logical, "Arn"]}
        assert props["MaximumMessageSize"] == 262144


def test_each_queue_feeds_its_handler_with_partial_batch_responses(template: dict[str, Any]):
    queue_logical = {_name(r["Properties"]["QueueName"]): logical
                     for logical, r in _of_type(template, "AWS::SQS::Queue").items()}  # fmt: skip
    by_queue: dict[str, tuple[str, dict[str, Any]]] = {}
    for function in _of_type(template, "AWS::Serverless::Function").values():
        for event in function["Properties"].get("Events", {}).values():
            if event["Type"] == "SQS":
                by_queue[event["Properties"]["Queue"]["Fn::GetAtt"][0]] = (
                    function["Properties"]["Handler"],
                    event["Properties"],
                )
    for kind in QUEUE_KINDS:
        handler, props = by_queue[queue_logical[SETTINGS.queue_name(kind)]]
        assert handler == f"{QUEUE_HANDLERS[kind]}.handler"  # the local dispatcher's wiring is the template's
        assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        function_timeout = 60
        visibility = template["Resources"][queue_logical[SETTINGS.queue_name(kind)]]["Properties"]
        assert visibility["VisibilityTimeout"] >= function_timeout


def test_ec2_events_rule_routes_to_spot_watch_queue_which_allows_only_that_rule(template: dict[str, Any]):
    rules = _of_type(template, "AWS::Events::Rule")
    ((rule_name, rule),) = rules.items()
    assert json.loads(json.dumps(rule["Properties"]["EventPattern"])) == SPOT_EVENT_PATTERN
    assert rule["Properties"]["Targets"][0]["Arn"] == {"Fn::GetAtt": ["SpotWatchQueue", "Arn"]}
    policy = _of_type(template, "AWS::SQS::QueuePolicy")["SpotWatchQueuePolicy"]
    statement = policy["Properties"]["PolicyDocument"]["Statement"][0]
    assert statement["Principal"] == {"Service": "events.amazonaws.com"}
    assert statement["Condition"]["ArnEquals"]["aws:SourceArn"] == {"Fn::GetAtt": [rule_name, "Arn"]}


def test_reconcile_runs_every_minute_and_iam_is_scoped_per_function(template: dict[str, Any]):
    functions = _of_type(template, "AWS::Serverless::Function")
    reconcile = functions["ReconcileFunction"]["Properties"]
    assert reconcile["Events"]["EveryMinute"]["Properties"]["Schedule"] == "rate(1 minute)"
    for logical, function in functions.items():
        policies = json.dumps(function["Properties"]["Policies"])
        assert '"Action": "*"' not in policies and "AdministratorAccess" not in policies, logical
    # Only provision may start instances; terminating is limited to instances tagged as ours.
    assert "ec2:RunInstances" in json.dumps(functions["ProvisionFunction"]["Properties"]["Policies"])
    for logical in ("OptimizeFunction", "SpotWatchFunction", "ReconcileFunction", "ApiFunction"):
        assert "ec2:RunInstances" not in json.dumps(functions[logical]["Properties"]["Policies"]), logical
    reconcile_policies = json.dumps(functions["ReconcileFunction"]["Properties"]["Policies"])
    assert "aws:ResourceTag/skyless-managed" in reconcile_policies


def test_catalog_refresh_runs_hourly_reads_prices_and_writes_only_the_bucket(template: dict[str, Any]):
    functions = _of_type(template, "AWS::Serverless::Function")
    refresh = functions["CatalogRefreshFunction"]["Properties"]
    assert refresh["Events"]["Hourly"]["Properties"]["Schedule"] == "rate(1 hour)"
    policies = json.dumps(refresh["Policies"])
    assert "pricing:GetProducts" in policies and "ec2:DescribeSpotPriceHistory" in policies
    assert "ec2:RunInstances" not in policies and "ec2:TerminateInstances" not in policies
    assert "dynamodb" not in policies.lower() and "SQS" not in policies
    # optimize reads the catalog versions the refresh writes
    assert "/catalog/*" in json.dumps(functions["OptimizeFunction"]["Properties"]["Policies"])
