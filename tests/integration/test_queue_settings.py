"""Queue settings have one source of truth (shared/stack.py); the template and local stack agree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
from cfnlint.decode import decode

from shared.config import QUEUE_KINDS, Settings
from shared.stack import FUNCTION_TIMEOUT_SECONDS, VISIBILITY_TIMEOUT_SECONDS, create_stack

TEMPLATE = Path(__file__).resolve().parents[2] / "infra" / "template.yaml"
LOGICAL = {"optimize": "Optimize", "provision": "Provision", "spot_watch": "SpotWatch", "submit": "Submit",
           "teardown": "Teardown"}  # fmt: skip
FUNCTION = {**LOGICAL, "teardown": "Provision"}  # the provision function's second event source


def _template() -> dict[str, Any]:
    parsed, problems = decode(str(TEMPLATE))
    assert not problems, problems
    return parsed


def test_template_queues_and_functions_match_the_stack_settings() -> None:
    resources = _template()["Resources"]
    default_timeout = _template()["Globals"]["Function"]["Timeout"]
    for kind in QUEUE_KINDS:
        queue = resources[f"{LOGICAL[kind]}Queue"]["Properties"]
        function = resources[f"{FUNCTION[kind]}Function"]["Properties"]
        assert function.get("Timeout", default_timeout) == FUNCTION_TIMEOUT_SECONDS[kind], kind
        assert queue["VisibilityTimeout"] == VISIBILITY_TIMEOUT_SECONDS[kind], kind
        assert VISIBILITY_TIMEOUT_SECONDS[kind] >= 6 * FUNCTION_TIMEOUT_SECONDS[kind]


def test_local_stack_queues_get_the_same_visibility_timeouts(stack: Settings) -> None:
    sqs = boto3.client("sqs", endpoint_url=stack.endpoint_url)
    for kind in QUEUE_KINDS:
        url = sqs.get_queue_url(QueueName=stack.queue_name(kind))["QueueUrl"]
        got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])["Attributes"]
        assert int(got["VisibilityTimeout"]) == VISIBILITY_TIMEOUT_SECONDS[kind], kind


def test_a_stack_made_with_older_settings_is_brought_up_to_date(stack: Settings) -> None:
    sqs = boto3.client("sqs", endpoint_url=stack.endpoint_url)
    url = sqs.get_queue_url(QueueName=stack.queue_name("provision"))["QueueUrl"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "120"})
    create_stack(stack)
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])["Attributes"]
    assert int(got["VisibilityTimeout"]) == VISIBILITY_TIMEOUT_SECONDS["provision"]
