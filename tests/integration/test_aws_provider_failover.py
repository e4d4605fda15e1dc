"""The provisioner's failover driven by real EC2 error codes: the job goes through the real handlers,
the AWS provider talks to moto over HTTP, and RunInstances refusals are injected at the boto layer."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from conftest import QueueDriver
from test_aws_provider import fail_run_instances, instances_of

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from shared.clouds.aws import AwsCloud
from shared.clouds.aws_images import forget_images
from shared.config import Settings
from shared.jobs.cancellation import cancel_job
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import get_job
from shared.optimizer.plan import instance_family_of
from shared.states import JobState
from shared.wiring import wiring_for

TASK = """
name: train
resources:
  cloud: aws
  region: us-east-1
  cpus: 2+
  use_spot: true
run: python train.py
"""


@pytest.fixture
def aws_stack(stack: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """The test stack with AWS served by the EC2 provider (on moto) and every other cloud by `local`."""
    settings = stack.with_(providers="aws=aws,*=local")
    monkeypatch.setenv("SKYLESS_PROVIDERS", settings.providers)
    monkeypatch.setenv("SKYLESS_AWS_REGIONS", "us-east-1")
    forget_images()
    assert Settings.from_env() == settings
    yield settings
    cloud = aws_provider(settings)
    for cluster_id in {n.cluster_id for n in cloud.list_owned()}:
        cloud.terminate(cluster_id)


def aws_provider(settings: Settings) -> AwsCloud:
    provider = wiring_for(settings).providers.build("aws")
    assert isinstance(provider, AwsCloud)
    return provider


def deliver(queues: QueueDriver, kind: str) -> None:
    handler = {"optimize": optimize_handler, "provision": provision_handler}[kind]
    assert handler(queues.event(queues.receive(kind)), None) == {"batchItemFailures": []}


def test_capacity_then_quota_errors_move_the_job_to_the_next_candidates(
    aws_stack: Settings, queues: QueueDriver, moto_endpoint: str
) -> None:
    refusals = ["InsufficientInstanceCapacity", "VcpuLimitExceeded"]
    calls = fail_run_instances(aws_provider(aws_stack), "us-east-1", refusals)
    job = submit_job(wiring_for(aws_stack), SubmitJob.from_text(owner="alice", task_text=TASK))
    deliver(queues, "optimize")
    deliver(queues, "provision")

    view = get_job(wiring_for(aws_stack), job.job_id, owner=None)
    assert view.state == JobState.SETTING_UP
    stored = wiring_for(aws_stack).store.get(job.job_id)
    assert stored is not None
    blocks = json.loads(stored.blocklist)
    assert blocks[0]["reason"].startswith("no capacity: InsufficientInstanceCapacity")
    assert blocks[0]["zone"] and blocks[0].get("instance_family") is None
    assert blocks[1]["reason"].startswith("quota: VcpuLimitExceeded")
    assert blocks[1]["region"] == "us-east-1" and blocks[1]["instance_family"]
    assert len(calls) == 3
    assert calls[0]["SubnetId"] != calls[1]["SubnetId"]  # the full zone was left for the next one
    assert instance_family_of(calls[2]["InstanceType"]) != blocks[1]["instance_family"]

    assert view.cluster is not None
    [instance] = instances_of(moto_endpoint, view.cluster["cluster_id"])
    assert instance["InstanceType"] == view.cluster["instance_type"]
    assert instance["InstanceLifecycle"] == "spot"

    cancel_job(wiring_for(aws_stack), job.job_id, owner="alice")
    deliver(queues, "provision")  # the teardown
    assert instances_of(moto_endpoint, view.cluster["cluster_id"]) == []


def test_throttling_retries_the_same_candidate_later_and_auth_failure_disables_aws(
    aws_stack: Settings, queues: QueueDriver, moto_endpoint: str
) -> None:
    fail_run_instances(aws_provider(aws_stack), "us-east-1", ["RequestLimitExceeded", "AuthFailure"])
    job = submit_job(wiring_for(aws_stack), SubmitJob.from_text(owner="alice", task_text=TASK))
    deliver(queues, "optimize")
    deliver(queues, "provision")
    assert get_job(wiring_for(aws_stack), job.job_id, owner=None).state == JobState.PROVISIONING
    assert queues.delayed_count("provision") == 1  # the retry, as a delayed message

    stored = wiring_for(aws_stack).store.get(job.job_id)
    assert stored is not None
    body = json.dumps({"job_id": job.job_id, "attempt": int(stored.attempt), "action": "launch"})
    provision_handler(queues.event([{"messageId": "retry", "body": body}]), None)
    stored = wiring_for(aws_stack).store.get(job.job_id)
    assert stored is not None and stored.state == JobState.WAITING  # aws was the only cloud allowed
    blocks = json.loads(stored.blocklist)
    cloud_blocks = [b for b in blocks if b["cloud"] == "aws" and b.get("region") is None]
    assert any("AuthFailure" in b["reason"] for b in cloud_blocks)
    assert [n for n in aws_provider(aws_stack).list_owned() if n.job_id == job.job_id] == []
