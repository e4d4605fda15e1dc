"""`skyless storage ls | delete` typed as `sky storage ls | delete`, through typer's CliRunner against the API
over real HTTP on moto, with two users: each lists only their own buckets; only a bucket skyless made is
deleted (objects and all), never one that existed before, never one a live job made, never another
user's (a 404, as if it did not exist)."""

from __future__ import annotations

import json
import uuid
from types import SimpleNamespace
from typing import Any

import boto3
from typer.testing import CliRunner, Result

from cli.main import app as cli
from shared.config import Settings
from shared.storage.lifecycle import prepare_job_storage
from shared.storage.registry import claim_bucket, find_bucket
from shared.store.users import create_user, find_user
from shared.task import load_pipeline

WIDE = {"COLUMNS": "200"}


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=WIDE)


def a_job_made(
    stack: Settings, owner: str, bucket: str, *, job_id: str | None = None, existing: bool = False
) -> str:
    """A bucket named in `owner`'s task file, prepared as the provision step prepares it; `existing`: one
    that was there before, recorded as the owner's without a creating job (skyless never made it)."""
    if existing:
        boto3.client("s3", endpoint_url=stack.endpoint_url).create_bucket(Bucket=bucket)
        claim_bucket(stack, bucket=bucket, store="s3", owner=owner, created_by=None, persistent=True)
        return ""
    task: Any = load_pipeline(
        f"resources:\n  cpus: 1+\nfile_mounts:\n  /d:\n    name: {bucket}\nrun: ls\n"
    ).tasks[0]
    job = SimpleNamespace(job_id=job_id or f"job-{uuid.uuid4().hex[:12]}", owner=owner, attempt=0)
    prepare_job_storage(stack, job, task, "aws")
    return job.job_id


def user_id_of(stack: Settings, key: str) -> str:
    found = find_user(key, stack)
    assert found is not None
    return found.user_id


def buckets(stack: Settings) -> set[str]:
    return {b["Name"] for b in boto3.client("s3", endpoint_url=stack.endpoint_url).list_buckets()["Buckets"]}


def test_storage_ls_and_delete_across_two_users(stack: Settings, cli_api: list[str]) -> None:
    url, bobs_key = cli_api[:2], create_user("bob", stack)
    bob = [*url, "--api-key", bobs_key]
    me, bob_id = (user_id_of(stack, key) for key in (cli_api[3], bobs_key))
    made, existed, live, bobs = (f"{k}-{uuid.uuid4().hex[:8]}" for k in ("made", "existed", "live", "bobs"))
    a_job_made(stack, me, made)
    boto3.client("s3", endpoint_url=stack.endpoint_url).put_object(Bucket=made, Key="ckpt/1", Body=b"x")
    a_job_made(stack, me, existed, existing=True)
    running = run("launch", "-d", "sleep 100", *cli_api)
    live_job = running.output.split("Job ", 1)[1].split()[0]
    a_job_made(stack, me, live, job_id=live_job)
    a_job_made(stack, bob_id, bobs)

    listed = run("storage", "ls", "--json", *cli_api)
    assert listed.exit_code == 0, listed.output
    mine = {b["name"]: b for b in json.loads(listed.output)}
    assert set(mine) == {made, existed, live} and mine[existed]["created_by"] is None
    assert mine[made]["url"] == f"s3://{made}"
    assert bobs in run("storage", "ls", *bob).output and made not in run("storage", "ls", *bob).output

    refused = run("storage", "delete", "-y", existed, live, bobs, *cli_api)
    assert refused.exit_code == 2
    assert "skyless did not create bucket" in refused.output and f"{live_job} uses bucket" in refused.output
    assert f"no bucket {bobs} of yours" in refused.output
    assert {existed, live, bobs} <= buckets(stack)

    deleted = run("storage", "delete", "-y", made, *cli_api)
    assert deleted.exit_code == 0 and f"Deleted s3://{made}." in deleted.output, deleted.output
    assert made not in buckets(stack) and find_bucket(stack, made) is None
    again = run("storage", "delete", "-y", made, *cli_api)
    assert again.exit_code == 2 and f"no bucket {made} of yours" in again.output
