"""The reaper and the nodes in the SAM template: scheduled, and allowed only what they need."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cfnlint.decode import decode

TEMPLATE = Path(__file__).resolve().parents[2] / "infra" / "template.yaml"


@pytest.fixture(scope="module")
def resources() -> dict[str, Any]:
    parsed, problems = decode(str(TEMPLATE))
    assert not problems, problems
    return parsed["Resources"]


def _statements(function: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for p in function["Properties"]["Policies"] if "Statement" in p for s in p["Statement"]]


def test_the_reaper_runs_on_a_schedule_with_a_grace_period(resources: dict[str, Any]) -> None:
    reaper = resources["ReaperFunction"]["Properties"]
    assert reaper["Handler"] == "functions.reaper.handler.handler"
    [event] = reaper["Events"].values()
    assert event["Type"] == "Schedule" and event["Properties"]["Schedule"].startswith("rate(")
    assert int(reaper["Environment"]["Variables"]["SKYLESS_REAPER_GRACE_SECONDS"]) > 0


def test_the_reaper_may_end_only_what_skyless_launched_and_never_start_anything(
    resources: dict[str, Any],
) -> None:
    statements = _statements(resources["ReaperFunction"])
    destructive = [s for s in statements if {"ec2:TerminateInstances", "ec2:DeleteSecurityGroup"} & set(
        [s["Action"]] if isinstance(s["Action"], str) else s["Action"])]  # fmt: skip
    assert len(destructive) == 2
    for statement in destructive:
        assert statement["Condition"]["StringEquals"] == {"aws:ResourceTag/skyless-managed": "true"}
        assert statement["Resource"] != "*"
    [terminate] = [s for s in destructive if s["Action"] == "ec2:TerminateInstances"]
    # a tag anyone could add is not enough: the instance must carry the profile only provision may pass
    profile = {"Fn::GetAtt": ["NodeInstanceProfile", "Arn"]}
    assert terminate["Condition"]["ArnEquals"] == {"ec2:InstanceProfile": profile}
    assert "RunInstances" not in json.dumps(statements) and "iam:" not in json.dumps(statements)


def test_nodes_get_a_profile_whose_role_grants_nothing(resources: dict[str, Any]) -> None:
    provision = resources["ProvisionFunction"]["Properties"]
    assert provision["Environment"]["Variables"]["SKYLESS_AWS_INSTANCE_PROFILE"] == {
        "Fn::GetAtt": ["NodeInstanceProfile", "Arn"]
    }
    assert resources["NodeInstanceProfile"]["Properties"]["Roles"] == [{"Ref": "NodeRole"}]
    role = resources["NodeRole"]["Properties"]
    assert "Policies" not in role and "ManagedPolicyArns" not in role
    attached = [r for r in resources.values() if r["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")]
    assert not [r for r in attached if "NodeRole" in json.dumps(r)]
    pass_role = [s for s in _statements(resources["ProvisionFunction"]) if s["Action"] == "iam:PassRole"]
    assert [s["Resource"] for s in pass_role] == [{"Fn::GetAtt": ["NodeRole", "Arn"]}]
