"""Failover across clouds through the real handlers: AWS (EC2 on moto, InsufficientInstanceCapacity injected
at the boto layer) and GCP (a fake Compute Engine answering ZONE_RESOURCE_POOL_EXHAUSTED) have no room, so
the job lands on Azure (a fake Resource Manager); when it ends, no VM is left on any of the three."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from conftest import QueueDriver
from fakes.azure import VM_KIND, FakeAzure
from fakes.gcp import FakeGcp
from test_aws_provider import fail_run_instances

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from shared.clouds.aws import AwsCloud
from shared.clouds.aws_images import forget_images
from shared.clouds.base import JOB_TAG
from shared.config import Settings
from shared.jobs.agent_reports import AgentReport, report_agent_status
from shared.jobs.reaper import reap_orphans
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import get_job
from shared.states import JobState
from shared.wiring import wiring_for

pytest_plugins = ["fakes.fixtures"]

TASK = """
name: xcloud
resources:
  ordered:
    - {infra: aws/us-east-1, instance_type: c6i.large}
    - {infra: gcp/us-central1, instance_type: n2-standard-2}
    - {infra: azure/eastus, instance_type: Standard_D2s_v5}
run: python train.py
"""
PROVIDERS = "aws=aws,gcp=gcp,azure=azure"


@pytest.fixture
def three_clouds(
    stack: Settings, fake_gcp: FakeGcp, fake_azure: FakeAzure, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Settings]:
    settings = stack.with_(providers=PROVIDERS)
    monkeypatch.setenv("SKYLESS_PROVIDERS", PROVIDERS)
    monkeypatch.setenv("SKYLESS_AWS_REGIONS", "us-east-1")
    forget_images()
    yield settings
    aws = wiring_for(settings).providers.build("aws")
    for cluster_id in {n.cluster_id for n in aws.list_owned()}:
        aws.terminate(cluster_id)


def deliver(queues: QueueDriver, kind: str) -> int:
    handler = {"optimize": optimize_handler, "provision": provision_handler}[kind]
    records = queues.receive(kind)
    assert handler(queues.event(records), None) == {"batchItemFailures": []}
    return len(records)


def test_no_room_on_aws_and_gcp_lands_the_job_on_azure_and_nothing_is_left_anywhere(
    three_clouds: Settings, queues: QueueDriver, fake_gcp: FakeGcp, fake_azure: FakeAzure
) -> None:
    settings = three_clouds
    aws = wiring_for(settings).providers.build("aws")
    assert isinstance(aws, AwsCloud)
    aws_calls = fail_run_instances(aws, "us-east-1", ["InsufficientInstanceCapacity"] * 10)
    fake_gcp.stockout_zones.update({"us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"})

    job_id = submit_job(wiring_for(settings), SubmitJob.from_text(owner="alice", task_text=TASK)).job_id
    deliver(queues, "optimize")
    plan = get_job(wiring_for(settings), job_id, owner=None).plan
    assert plan is not None
    clouds = [c["cloud"] for c in plan["tasks"][0]["candidates"]]
    assert clouds == ["aws"] * 5 + ["gcp"] * 4 + ["azure"]
    deliver(queues, "provision")

    view = get_job(wiring_for(settings), job_id, owner=None)
    assert view.state == JobState.SETTING_UP
    assert view.cluster is not None
    assert (view.cluster["cloud"], view.cluster["region"]) == ("azure", "eastus")
    assert len(aws_calls) == 5  # every AWS zone was asked, and refused
    stored = wiring_for(settings).store.get(job_id)
    assert stored is not None
    blocks = json.loads(stored.blocklist)
    reasons = [(b["cloud"], b["zone"], b["reason"].split(":")[1].strip()) for b in blocks]
    assert [r for r in reasons if r[0] == "aws"] == [
        ("aws", f"us-east-1{z}", "InsufficientInstanceCapacity") for z in "abcdf"
    ]
    gcp_blocks = [r for r in reasons if r[0] == "gcp"]
    assert len(gcp_blocks) == 4 and all("ZONE_RESOURCE_POOL_EXHAUSTED" in r[2] for r in gcp_blocks)
    assert fake_gcp.live() == []
    assert [n for n in aws.list_owned() if n.job_id == job_id] == []
    [azure_vm] = fake_azure.live()[VM_KIND]
    assert [n["instance_id"] for n in view.cluster["nodes"]] == [azure_vm]

    for node in view.cluster["nodes"]:
        for phase in ("running", "succeeded"):
            report_agent_status(
                wiring_for(settings), AgentReport(job_id, node["instance_id"], phase, exit_code=0)
            )
    assert get_job(wiring_for(settings), job_id, owner=None).state == JobState.SUCCEEDED
    assert deliver(queues, "provision") == 1  # the teardown

    assert fake_azure.live() == {}  # no VM, NIC, public IP or disk
    assert fake_gcp.live() == []
    assert [n for n in aws.list_owned() if n.job_id == job_id] == []
    assert [g for g in _aws_groups(aws) if g.get(JOB_TAG) == job_id] == []
    assert not {c for c in reap_orphans(wiring_for(settings), grace_seconds=0).killed if c.startswith(job_id)}


def _aws_groups(aws: AwsCloud) -> list[dict[str, str]]:
    groups = aws.client("us-east-1").describe_security_groups()["SecurityGroups"]
    return [{t["Key"]: t["Value"] for t in g.get("Tags", [])} for g in groups]
