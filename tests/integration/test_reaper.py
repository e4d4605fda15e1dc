"""The orphan reaper against the real local cloud and EC2 on moto: it kills what no live job owns, after
a grace period, records each kill once, and a crash between "VM created" and "VM recorded" leaks nothing."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from conftest import QueueDriver
from test_aws_provider import make_spec

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from functions.reaper.handler import handler as reaper_handler
from shared.clouds.aws import AwsCloud
from shared.clouds.aws_images import forget_images
from shared.clouds.base import LaunchSpec
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.jobs.reaper import reap_orphans, reaper_records
from shared.jobs.submission import SubmitJob, submit_job
from shared.states import JobState
from shared.store.jobs import DynamoJobStore as JobStore
from shared.wiring import wiring_for

SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])
TASK = """
name: train
resources:
  cloud: aws
  cpus: 2+
run: python train.py
"""
EVENTS = Path(__file__).resolve().parents[1] / "events"


@pytest.fixture(autouse=True)
def sleeping_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)


def deliver(queues: QueueDriver, kind: str) -> list[str]:
    handler = {"optimize": optimize_handler, "provision": provision_handler}[kind]
    answer = handler(queues.event(queues.receive(kind)), None)
    return [f["itemIdentifier"] for f in answer["batchItemFailures"]]


def start_job(settings: Settings, queues: QueueDriver) -> str:
    job = submit_job(wiring_for(settings), SubmitJob.from_text(owner="alice", task_text=TASK))
    deliver(queues, "optimize")
    assert deliver(queues, "provision") == []
    return job.job_id


def local_spec(job_id: str, attempt: int = 0) -> LaunchSpec:
    return make_spec(job_id=job_id, attempt=attempt, cloud="aws", zone="us-east-1a")


def running(settings: Settings) -> dict[str, str]:
    """cluster id -> job id of every live local node."""
    return {n.cluster_id: n.job_id for n in LocalCloud(settings.home).list_owned() if n.state == "running"}


def test_the_reaper_kills_a_planted_orphan_and_spares_a_live_jobs_vm(
    stack: Settings, queues: QueueDriver
) -> None:
    live_job = start_job(stack, queues)
    orphan = local_spec("job-0000deadbeef")  # a VM whose job never existed
    LocalCloud(stack.home, api_url=stack.api_url).launch(orphan)
    assert set(running(stack).values()) == {live_job, orphan.job_id}

    report = reap_orphans(wiring_for(stack), grace_seconds=0)
    assert report.killed == [orphan.cluster_id]
    assert report.owned == [f"{live_job}-0"]
    assert set(running(stack).values()) == {live_job}
    [record] = reaper_records(stack)
    assert record["cluster"] == orphan.cluster_id and record["job"] == orphan.job_id
    assert "its job no longer exists" in record["message"]


def test_an_orphan_lives_out_its_grace_period_then_dies(stack: Settings) -> None:
    orphan = local_spec("job-00000000grce")
    LocalCloud(stack.home, api_url=stack.api_url).launch(orphan)
    wiring = wiring_for(stack)
    assert reap_orphans(wiring, now=1000.0, grace_seconds=300).in_grace == [orphan.cluster_id]
    assert reap_orphans(wiring, now=1299.0, grace_seconds=300).in_grace == [orphan.cluster_id]
    assert orphan.cluster_id in running(stack)
    assert reap_orphans(wiring, now=1300.0, grace_seconds=300).killed == [orphan.cluster_id]
    assert orphan.cluster_id not in running(stack)


def test_sweeping_twice_kills_once_and_records_once(stack: Settings) -> None:
    orphan = local_spec("job-0000000twice")
    LocalCloud(stack.home, api_url=stack.api_url).launch(orphan)
    wiring = wiring_for(stack)
    assert reap_orphans(wiring, grace_seconds=0).killed == [orphan.cluster_id]
    second = reap_orphans(wiring, grace_seconds=0)
    assert second.killed == [] and second.in_grace == []
    assert len(reaper_records(stack)) == 1


def test_a_cluster_of_an_older_attempt_is_killed_and_the_kill_is_in_the_jobs_timeline(
    stack: Settings, queues: QueueDriver
) -> None:
    job_id = start_job(stack, queues)  # attempt 0 is up
    store = JobStore(stack)
    job = store.get(job_id)
    assert job is not None
    assert store.save_progress(job, {"attempt": 9})  # the job moved on without tearing 0 and 7 down
    cloud = LocalCloud(stack.home, api_url=stack.api_url)
    stale, current = local_spec(job_id, attempt=7), local_spec(job_id, attempt=9)
    cloud.launch(stale)
    cloud.launch(current)
    report = reap_orphans(wiring_for(stack), grace_seconds=0)
    assert report.killed == [f"{job_id}-0", stale.cluster_id]
    assert report.owned == [current.cluster_id]
    notes = sorted((e for e in store.timeline(job_id) if e.kind == "reaper"), key=lambda e: e.message)
    assert [n.detail.as_dict()["cluster"] for n in notes if n.detail] == [f"{job_id}-0", stale.cluster_id]
    assert "attempt 7 is older than the job's attempt 9" in notes[1].message


def test_a_crash_between_vm_created_and_vm_recorded_never_leaks_the_vm(
    stack: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = submit_job(wiring_for(stack), SubmitJob.from_text(owner="alice", task_text=TASK))
    deliver(queues, "optimize")
    launch_messages = queues.receive("provision")
    real_move = JobStore.move

    def crash_on_record(self: JobStore, job: Any, to: Any, *args: Any, **kwargs: Any) -> bool:
        if to == JobState.SETTING_UP:
            raise RuntimeError("the provision function died right after the launch")
        return real_move(self, job, to, *args, **kwargs)

    monkeypatch.setattr(JobStore, "move", crash_on_record)
    failures = provision_handler(queues.event(launch_messages), None)["batchItemFailures"]
    assert len(failures) == 1  # SQS will redeliver it
    monkeypatch.setattr(JobStore, "move", real_move)
    [cluster_id] = running(stack)
    stored = JobStore(stack).get(job.job_id)
    assert stored is not None and stored.cluster_id is None  # the VM runs; our records never heard of it

    # The job is still on that attempt: the reaper leaves its VM alone, and the redelivery records it.
    assert reap_orphans(wiring_for(stack), grace_seconds=0).owned == [cluster_id]
    assert provision_handler(queues.event(launch_messages), None) == {"batchItemFailures": []}
    stored = JobStore(stack).get(job.job_id)
    assert stored is not None and stored.state == JobState.SETTING_UP and stored.cluster_id == cluster_id
    assert list(running(stack)) == [cluster_id]  # the same VM, not a second one

    # Had the job ended instead, with the VM still unrecorded, the reaper is what ends the VM.
    orphaned = submit_job(wiring_for(stack), SubmitJob.from_text(owner="alice", task_text=TASK))
    deliver(queues, "optimize")
    monkeypatch.setattr(JobStore, "move", crash_on_record)
    provision_handler(queues.event(queues.receive("provision")), None)
    monkeypatch.setattr(JobStore, "move", real_move)
    lost = JobStore(stack).get(orphaned.job_id)
    assert lost is not None
    assert JobStore(stack).move(lost, JobState.FAILED, "given up", changes={"reason": "given up"})
    report = reap_orphans(wiring_for(stack), grace_seconds=0)
    assert report.killed == [f"{orphaned.job_id}-0"]
    assert set(running(stack).values()) == {job.job_id}


def test_a_cloud_that_refuses_to_list_does_not_shelter_orphans_elsewhere(
    stack: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "GOOGLE_OAUTH_ACCESS_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(stack.home))  # no gcloud credentials either
    settings = stack.with_(providers="gcp=gcp,*=local")
    orphan = local_spec("job-000000noauth")
    LocalCloud(stack.home, api_url=stack.api_url).launch(orphan)
    report = reap_orphans(wiring_for(settings), grace_seconds=0)
    assert report.failed == ["gcp"]
    assert report.killed == [orphan.cluster_id]


def test_the_scheduled_handler_runs_a_sweep(stack: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLESS_REAPER_GRACE_SECONDS", "0")
    orphan = local_spec("job-00000handler")
    LocalCloud(stack.home, api_url=stack.api_url).launch(orphan)
    event = json.loads((EVENTS / "scheduled_event.json").read_text())
    answer = reaper_handler(event, None)
    assert answer["killed"] == [orphan.cluster_id]
    assert running(stack) == {}


@pytest.fixture
def aws_stack(stack: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    settings = stack.with_(providers="aws=aws,*=local")
    monkeypatch.setenv("SKYLESS_PROVIDERS", settings.providers)
    monkeypatch.setenv("SKYLESS_AWS_REGIONS", "us-east-1")
    forget_images()
    yield settings
    cloud = wiring_for(settings).providers.build("aws")
    for cluster_id in {n.cluster_id for n in cloud.list_owned()}:
        cloud.terminate(cluster_id)


def test_on_ec2_the_reaper_kills_a_planted_orphan_with_its_group_and_spares_a_live_job(
    aws_stack: Settings, queues: QueueDriver, moto_endpoint: str
) -> None:
    live_job = start_job(aws_stack, queues)
    aws = wiring_for(aws_stack).providers.build("aws")
    assert isinstance(aws, AwsCloud)
    orphan = make_spec(job_id="job-0000000ec2or", ports=("8080",))
    aws.launch(orphan)
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_endpoint)
    mine = {n.job_id for n in aws.list_owned()} & {live_job, orphan.job_id}
    assert mine == {live_job, orphan.job_id}

    report = reap_orphans(wiring_for(aws_stack), grace_seconds=0)
    assert orphan.cluster_id in report.killed and f"{live_job}-0" in report.owned
    owned = {n.job_id for n in aws.list_owned()}
    assert live_job in owned and orphan.job_id not in owned
    groups = ec2.describe_security_groups(
        Filters=[{"Name": "tag:skyless-cluster", "Values": [orphan.cluster_id]}]
    )["SecurityGroups"]
    assert groups == []
    assert any(r["cluster"] == orphan.cluster_id for r in reaper_records(aws_stack))


def test_on_ec2_a_security_group_left_without_instances_is_swept(
    aws_stack: Settings, moto_endpoint: str
) -> None:
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_endpoint)
    cluster_id = "job-00000000left-0"
    tags = [
        {"Key": "skyless-managed", "Value": "true"},
        {"Key": "skyless-job", "Value": "job-00000000left"},
        {"Key": "skyless-cluster", "Value": cluster_id},
    ]
    ec2.create_security_group(
        GroupName=f"skyless-{cluster_id}", Description="left behind",
        TagSpecifications=[{"ResourceType": "security-group", "Tags": tags}],
    )  # fmt: skip
    report = reap_orphans(wiring_for(aws_stack), grace_seconds=0)
    assert cluster_id in report.killed
    left = ec2.describe_security_groups(Filters=[{"Name": "tag:skyless-cluster", "Values": [cluster_id]}])
    assert left["SecurityGroups"] == []
