"""A job's buckets on the control plane: created before the first launch and claimed for their owner,
another user's refused, existing ones checked, deleted at the end only when this job made them and they
are not persistent; each node's credentials scoped to its bucket alone (STS session policy on S3,
Cloudflare's temporary credentials on R2); rclone commands for real VMs; fresh credentials for a node
of the current cluster only."""

from __future__ import annotations

import json
import uuid
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from chalice.test import Client
from conftest import QueueDriver
from fakes.cloudflare_r2 import FakeCloudflareR2

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from shared.config import Settings
from shared.errors import NotFoundError, UserError
from shared.jobs.job_storage import fresh_node_storage
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.tokens import agent_token
from shared.storage.backends import R2Backend, S3Backend, StorageBackends, session_policy
from shared.storage.lifecycle import StorageBusy, StorageFailure, prepare_job_storage, release_job_storage
from shared.storage.rclone import rclone_commands, remote_of
from shared.storage.registry import DELETING, find_bucket, leave_bucket
from shared.store.tenancy import Grant, put_grant
from shared.task.loader import load_pipeline
from shared.wiring import wiring_for


def _task(mounts: str) -> Any:
    return load_pipeline(f"resources:\n  cpus: 1+\nfile_mounts:\n{mounts}run: ls\n").tasks[0]


def _job(owner: str = "u-a") -> Any:
    return SimpleNamespace(job_id=f"job-{uuid.uuid4().hex[:12]}", owner=owner, attempt=0)


def _buckets(stack: Settings) -> set[str]:
    s3 = boto3.client("s3", endpoint_url=stack.endpoint_url)
    return {b["Name"] for b in s3.list_buckets()["Buckets"]}


def test_a_named_bucket_is_created_once_for_its_owner_and_refused_to_everyone_else(stack: Settings):
    name = f"ckpt-{uuid.uuid4().hex[:8]}"
    task = _task(f"  /ckpt:\n    name: {name}\n    mode: MOUNT_CACHED\n")
    job = _job()

    notes = prepare_job_storage(stack, job, task, "gcp")
    again = prepare_job_storage(stack, job, task, "aws")  # a retry, or the next attempt on another cloud

    assert name in _buckets(stack) and len(notes) == 1 and again == []
    record = find_bucket(stack, name)
    assert (record.owner, record.store, record.created_by) == ("u-a", "gcs", job.job_id)  # gcp's store, kept
    text = f"resources:\n  cpus: 1+\nfile_mounts:\n  /c:\n    name: {name}\nrun: ls\n"
    with pytest.raises(UserError, match="belongs to another skyless user") as caught:
        submit_job(wiring_for(stack), SubmitJob.from_text(owner="u-b", task_text=text, filename="b.yaml"))
    assert (caught.value.field, caught.value.line) == ("file_mounts./c", 4)
    with pytest.raises(StorageFailure, match="belongs to another skyless user"):
        prepare_job_storage(stack, _job("u-b"), task, "aws")


def test_only_a_bucket_this_job_created_and_did_not_keep_is_deleted_at_its_end(stack: Settings):
    made, kept, existing = (f"{kind}-{uuid.uuid4().hex[:8]}" for kind in ("made", "kept", "existing"))
    boto3.client("s3", endpoint_url=stack.endpoint_url).create_bucket(Bucket=existing)
    put_grant(stack, Grant(existing, "user:u-a", "", write=True))  # not skyless's: usable once granted
    task = _task(
        f"  /a:\n    name: {made}\n    persistent: false\n"
        f"  /b:\n    name: {kept}\n"
        f"  /c:\n    name: {existing}\n    persistent: false\n"
    )
    job = _job()
    prepare_job_storage(stack, job, task, "aws")

    other_job = _job()  # the same owner's other job, naming the same buckets
    assert release_job_storage(stack, other_job, [task]) == []
    notes = release_job_storage(stack, job, [task])
    assert release_job_storage(stack, job, [task]) == []  # idempotent

    assert notes == [f"bucket s3://{made} deleted (persistent: false)"]
    assert made not in _buckets(stack) and {kept, existing} <= _buckets(stack)
    assert find_bucket(stack, made) is None and find_bucket(stack, existing) is None  # granted, never claimed


def test_a_bucket_that_goes_with_its_job_stays_while_another_job_of_the_owner_still_mounts_it(
    stack: Settings,
):
    """Two runs of one task file (same `name:`, `persistent: false`): the first one's end must not delete
    the bucket under the second; the last one out deletes it."""
    name = f"shared-{uuid.uuid4().hex[:8]}"
    task = _task(f"  /ckpt:\n    name: {name}\n    persistent: false\n")
    first, second = _job(), _job()
    prepare_job_storage(stack, first, task, "aws")
    prepare_job_storage(stack, second, task, "aws")

    assert release_job_storage(stack, first, [task]) == []
    assert release_job_storage(stack, first, [task]) == []  # its end, delivered twice
    assert name in _buckets(stack) and find_bucket(stack, name) is not None

    assert release_job_storage(stack, second, [task]) == [f"bucket s3://{name} deleted (persistent: false)"]
    assert name not in _buckets(stack) and find_bucket(stack, name) is None


def test_a_job_that_finds_its_bucket_being_deleted_waits_and_then_creates_it_anew(stack: Settings):
    name = f"going-{uuid.uuid4().hex[:8]}"
    task = _task(f"  /ckpt:\n    name: {name}\n    persistent: false\n")
    first, second = _job(), _job()
    prepare_job_storage(stack, first, task, "aws")
    assert leave_bucket(stack, name, first.job_id)  # the last user: the deletion has begun, then it died

    with pytest.raises(StorageBusy, match="being deleted"):
        prepare_job_storage(stack, second, task, "aws")
    assert find_bucket(stack, name, any_state=True).state == DELETING

    assert release_job_storage(stack, first, [task]) == [f"bucket s3://{name} deleted (persistent: false)"]
    notes = prepare_job_storage(stack, second, task, "aws")  # its launch, retried
    assert notes == [f"bucket s3://{name} created for /ckpt (deleted when the job ends)"]
    assert find_bucket(stack, name).created_by == second.job_id and name in _buckets(stack)


def test_a_bucket_named_as_a_source_must_exist(stack: Settings):
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    put_grant(stack, Grant(missing, "user:u-a", "", write=False))
    task = _task(f"  /data: s3://{missing}/train\n")
    with pytest.raises(StorageFailure, match=r"file_mounts./data: bucket s3://missing-\w+ does not exist"):
        prepare_job_storage(stack, _job(), task, "aws")


def test_session_policies_name_only_the_bucket_and_prefix_and_copies_cannot_write():
    rw = session_policy("ckpt", "job-1/run", read_only=False)
    ro = session_policy("data", "", read_only=True)
    resources = [s["Resource"] for s in rw["Statement"]]
    assert resources == ["arn:aws:s3:::ckpt", "arn:aws:s3:::ckpt",
                         ["arn:aws:s3:::ckpt/job-1/run", "arn:aws:s3:::ckpt/job-1/run/*"]]  # fmt: skip
    assert rw["Statement"][0]["Condition"] == {"StringLike": {"s3:prefix": ["job-1/run", "job-1/run/*"]}}
    assert "s3:PutObject" in rw["Statement"][2]["Action"]
    assert ro["Statement"][2] == {
        "Effect": "Allow",
        "Action": ["s3:GetObject"],
        "Resource": ["arn:aws:s3:::data/*"],
    }


def test_node_credentials_come_from_sts_with_that_session_policy(stack: Settings):
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.sts.models import sts_backends

    backend = StorageBackends(stack).for_store("gcs")  # simulated locally, as every store
    session = f"skyless-job-{uuid.uuid4().hex[:8]}-3"
    access = backend.node_access("ckpt-x", "job-1", read_only=False, session=session)

    assumed = [
        r for r in sts_backends[DEFAULT_ACCOUNT_ID]["global"].assumed_roles if r.session_name == session
    ]
    assert len(assumed) == 1 and json.loads(assumed[0].policy) == session_policy(
        "ckpt-x", "job-1", read_only=False
    )
    assert access["credentials"]["access_key_id"] == assumed[0].access_key_id
    assert (access["api"], access["endpoint"], access["addressing"]) == ("s3", stack.endpoint_url, "path")


def test_r2_nodes_get_cloudflare_temporary_credentials_scoped_to_the_bucket_and_prefix(moto_endpoint: str):
    fake = FakeCloudflareR2("acct-1", "cf-token").start()
    try:
        backend = R2Backend("r2", "auto", moto_endpoint, access_key_id="parent-key", secret_access_key="s",
                            account_id="acct-1", api_token="cf-token", api_url=fake.url)  # fmt: skip
        bucket = f"r2-{uuid.uuid4().hex[:8]}"
        boto3.client("s3", endpoint_url=moto_endpoint).create_bucket(Bucket=bucket)  # moto knows no "auto"
        assert backend.exists(bucket)  # through R2's S3 API (moto stands in for it)
        access = backend.node_access(bucket, "ckpt", read_only=True, session="s1")
    finally:
        fake.stop()
    assert fake.requests == [{"bucket": bucket, "parentAccessKeyId": "parent-key",
                              "permission": "object-read-only", "ttlSeconds": 3600,
                              "prefixes": ["ckpt", "ckpt/"]}]  # fmt: skip
    assert access["credentials"]["access_key_id"].startswith("r2tmp")
    assert (access["endpoint"], access["region"]) == (moto_endpoint, "auto")


def test_rclone_mounts_name_the_bucket_the_mode_and_the_tasks_cache_options():
    entry = {"path": "/checkpoint", "mode": "MOUNT_CACHED", "store": "s3", "bucket": "ckpt", "prefix": "run1",
             "write_back": True, "api": "s3", "region": "eu-west-1"}  # fmt: skip
    cached = rclone_commands(entry, 0, {"vfs_cache_max_size": "10G", "transfers": 8})
    plain = rclone_commands({**entry, "mode": "MOUNT"}, 1)
    r2 = remote_of(
        {**entry, "store": "r2", "endpoint": "https://a.r2.cloudflarestorage.com", "region": "auto"}
    )

    assert remote_of(entry) == ":s3,provider=AWS,env_auth=true,region=eu-west-1:ckpt/run1"
    assert (
        r2
        == ":s3,provider=Cloudflare,env_auth=true,region=auto,endpoint='https://a.r2.cloudflarestorage.com':ckpt/run1"
    )
    assert (
        "rclone mount :s3,provider=AWS,env_auth=true,region=eu-west-1:ckpt/run1 /checkpoint"
        in cached["mount"]
    )
    assert "--vfs-cache-mode full --vfs-write-back 5s" in cached["mount"]
    assert "--transfers 8" in cached["mount"] and "--vfs-cache-max-size 10G" in cached["mount"]
    assert "--vfs-cache-mode writes" in plain["mount"] and "--rc-addr 127.0.0.1:5573" in plain["mount"]
    assert "vfs/stats" in cached["flush"] and "fusermount" in cached["unmount"]
    assert cached["env"]["AWS_PROFILE"] == "skyless-0"


def test_fresh_credentials_go_to_a_node_of_the_current_cluster_and_to_no_one_else(stack, queues: QueueDriver):
    name = f"c-{uuid.uuid4().hex[:8]}"
    text = f"resources:\n  cloud: aws\n  cpus: 1+\nfile_mounts:\n  /ckpt:\n    name: {name}\nrun: ls\n"
    job_id = submit_job(wiring_for(stack), SubmitJob.from_text(owner="u-a", task_text=text)).job_id
    assert optimize_handler(queues.event(queues.receive("optimize")), None) == {"batchItemFailures": []}
    assert provision_handler(queues.event(queues.receive("provision")), None) == {"batchItemFailures": []}
    job = wiring_for(stack).store.get(job_id)
    instance = next(iter(wiring_for(stack).store.cluster(job.cluster_id).nodes))

    from functions.submit.app import app

    headers = {"Authorization": f"Bearer {agent_token(stack, job_id, 0)}", "Content-Type": "application/json"}
    with Client(app) as client:
        answer = client.http.post(
            f"/agent/{job_id}/storage", body=json.dumps({"instance_id": instance}), headers=headers
        )
        stranger = client.http.post(
            f"/agent/{job_id}/storage", body=json.dumps({"instance_id": "i-stranger"}), headers=headers
        )

    assert answer.status_code == 200, answer.body
    (entry,) = json.loads(answer.body)["storage"]
    assert entry["path"] == "/ckpt" and entry["credentials"]["session_token"]
    assert stranger.status_code == 404
    with pytest.raises(NotFoundError):
        fresh_node_storage(stack, job_id, "i-stranger")


def test_the_local_backend_is_the_runtimes_own_s3_for_every_store(stack: Settings):
    backends = StorageBackends(stack)
    for store in ("s3", "gcs", "r2"):
        backend = backends.for_store(store)
        assert isinstance(backend, S3Backend) and backend.endpoint_url == stack.endpoint_url
    assert backends.store_for_cloud("gcp") == "gcs" and backends.store_for_cloud("lambda") == "s3"
    deployed = StorageBackends(stack.with_(providers="aws=aws,gcp=gcp"), environ={})
    assert deployed.for_store("gcs") is None and deployed.store_for_cloud("gcp") == "s3"


def test_a_task_bucket_of_the_local_runtime_outlives_a_restart_through_the_snapshot(
    stack: Settings, tmp_path
):
    from local_runtime.state_snapshot import restore_snapshot, save_snapshot

    name, granted = f"ckpt-{uuid.uuid4().hex[:8]}", f"data-{uuid.uuid4().hex[:8]}"
    prepare_job_storage(stack, _job(), _task(f"  /ckpt:\n    name: {name}\n"), "aws")
    s3 = boto3.client("s3", endpoint_url=stack.endpoint_url)
    s3.create_bucket(Bucket=granted)  # made with an S3 client, then granted: not skyless's, still kept
    put_grant(stack, Grant(granted, "user:u-a", "", write=False))
    for bucket in (name, granted):
        s3.put_object(Bucket=bucket, Key="run/step", Body=b"9\n")
    save_snapshot(stack, tmp_path / "state.json")
    for bucket in (name, granted):
        s3.delete_object(Bucket=bucket, Key="run/step")
        s3.delete_bucket(Bucket=bucket)  # what a fresh embedded endpoint looks like

    restore_snapshot(stack, tmp_path / "state.json")

    for bucket in (name, granted):
        assert s3.get_object(Bucket=bucket, Key="run/step")["Body"].read() == b"9\n"
