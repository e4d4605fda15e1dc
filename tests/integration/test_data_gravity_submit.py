"""Data gravity through the submit path as users reach it: `POST /jobs` and `POST /plan` on the Chalice app,
`skyless launch --dryrun` and `skyless plan` as typed. The bucket's place comes from S3 GetBucketLocation
on moto, its size from `--data-size`/`data_gb` or its listing, cached in the buckets table; a job stays
beside a large bucket unless the saving beats the egress, and the plan says so. Another user's bucket is
neither placed nor sized for them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from chalice.test import Client
from typer.testing import CliRunner, Result

from cli.main import app as cli
from functions.submit.app import app
from shared.config import Settings
from shared.jobs.planning import plan_of
from shared.storage.bucket_places import cached_place
from shared.store.tenancy import Grant, put_grant
from shared.store.users import create_user
from shared.wiring import wiring_for

WIDE = {"COLUMNS": "250"}


def _task(bucket: str, accelerators: str = "A100:8") -> str:
    mounts = f"file_mounts:\n  /data: s3://{bucket}/train\n"
    return f"resources:\n  accelerators: {accelerators}\n{mounts}run: train\n"


def _bucket(stack: Settings, region: str = "us-east-1", objects: int = 0) -> str:
    name = f"data-{uuid.uuid4().hex[:10]}"
    s3 = boto3.client("s3", endpoint_url=stack.endpoint_url, region_name=region)
    if region == "us-east-1":
        s3.create_bucket(Bucket=name)
    else:
        s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": region})
    for i in range(objects):
        s3.put_object(Bucket=name, Key=f"train/part-{i}", Body=b"x" * 1000)
    s3.put_object(Bucket=name, Key="elsewhere/big", Body=b"y" * 50_000)  # outside the mounted prefix
    return name


class Api:
    def __init__(self, client: Client, key: str) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self.client.http.post(path, headers=self.headers, body=json.dumps(body).encode())

    def get(self, path: str) -> Any:
        return self.client.http.get(path, headers=self.headers)


@pytest.fixture
def chalice(stack: Settings) -> Iterator[Client]:
    with Client(app) as client:
        yield client


def _user(stack: Settings, chalice: Client, name: str) -> Api:
    return Api(chalice, create_user(name, stack, user_id=f"u-{name}"))


def _timeline_notes(api: Api, job_id: str) -> list[str]:
    detail = api.get(f"/jobs/{job_id}").json_body
    return [n for event in detail["timeline"] for n in (event.get("detail") or {}).get("notes", [])]


def test_a_job_reading_two_tb_stays_beside_its_bucket_and_one_reading_little_moves(stack: Settings, chalice):
    bucket = _bucket(stack)
    put_grant(stack, Grant(bucket, "user:u-alice", "", write=False))
    alice = _user(stack, chalice, "alice")

    heavy = alice.post("/jobs", {"task": _task(bucket), "data_gb": {"*": 2000}})
    light = alice.post("/jobs", {"task": _task(bucket), "data_gb": {f"s3://{bucket}/train": 100}})

    assert heavy.status_code == light.status_code == 201, (heavy.json_body, light.json_body)
    store = wiring_for(stack).store
    heavy_plan = plan_of(store.get(heavy.json_body["job_id"]))
    light_plan = plan_of(store.get(light.json_body["job_id"]))
    stays, moves = heavy_plan.tasks[0].chosen, light_plan.tasks[0].chosen
    assert (stays.cloud, stays.region, heavy_plan.egress_cost) == ("aws", "us-east-1", 0.0)
    assert moves.cloud != "aws" and light_plan.egress_cost == pytest.approx(100 * 0.09)
    where = f"s3://{bucket}/train (aws us-east-1)"
    heavy_notes = _timeline_notes(alice, heavy.json_body["job_id"])
    assert f"no egress: 2 TB from {where} read in place (aws us-east-1)" in heavy_notes
    assert any(
        n.startswith("stays in aws us-east-1 near its data:") and "$180.00 egress" in n for n in heavy_notes
    )
    light_notes = _timeline_notes(alice, light.json_body["job_id"])
    assert f"+$9.00 egress: 100 GB from {where} to {moves.cloud} {moves.region}" in light_notes
    assert any(
        n.startswith(f"moves to {moves.cloud} {moves.region}, away from its data") for n in light_notes
    )
    place = cached_place(stack, "s3", f"{bucket}/train")  # asked of S3 once, kept a day
    assert place is not None and (place.cloud, place.region) == ("aws", "us-east-1")


def test_the_bucket_region_and_listed_size_come_from_the_store(stack: Settings, chalice):
    bucket = _bucket(stack, region="eu-west-1", objects=3)
    put_grant(stack, Grant(bucket, "user:u-alice", "", write=False))
    alice = _user(stack, chalice, "alice")

    answer = alice.post("/jobs", {"task": _task(bucket, "T4:1")})

    assert answer.status_code == 201, answer.json_body
    job = wiring_for(stack).store.get(answer.json_body["job_id"])
    [source] = json.loads(job.data_sources)
    assert (source["cloud"], source["region"]) == ("aws", "eu-west-1")
    assert source["gigabytes"] == pytest.approx(3000 / 1e9)  # train/ only: the 50 kB elsewhere is not read
    chosen = plan_of(job).tasks[0].chosen
    assert (chosen.cloud, chosen.region) == ("aws", "us-east-1")  # 3 kB: not worth $0.06/h more in eu-west-1
    big = alice.post("/plan", {"task": _task(bucket, "T4:1"), "data_gb": {"*": 500}}).json_body
    assert (big["tasks"][0]["candidates"][0]["region"]) == "eu-west-1"  # 500 GB: $10 of egress saved


def test_another_users_bucket_is_neither_placed_nor_sized_for_them(stack: Settings, chalice):
    bucket = _bucket(stack, objects=2)
    put_grant(stack, Grant(bucket, "user:u-alice", "", write=False))
    bob = _user(stack, chalice, "bob")

    refused = bob.post("/jobs", {"task": _task(bucket), "data_gb": {"*": 2000}})
    dry = bob.post("/plan", {"task": _task(bucket)})

    assert refused.status_code in (400, 403) and refused.json_body["field"] == "file_mounts./data"
    assert dry.status_code == 200
    assert dry.json_body["egress_cost"] == 0.0 and not any(bucket in n for n in dry.json_body["notes"])
    assert cached_place(stack, "s3", f"{bucket}/train") is None  # S3 was not even asked


def test_declared_sizes_that_name_no_bucket_of_the_job_are_refused_naming_the_field(stack: Settings, chalice):
    bucket = _bucket(stack)
    put_grant(stack, Grant(bucket, "user:u-alice", "", write=False))
    alice = _user(stack, chalice, "alice")

    wrong = alice.post("/jobs", {"task": _task(bucket), "data_gb": {"s3://not-this-one": 5}})
    plain = alice.post("/jobs", {"task": "resources:\n  cpus: 1+\nrun: ls\n", "data_gb": {"*": 5}})

    assert wrong.status_code == plain.status_code == 400
    assert wrong.json_body["field"] == plain.json_body["field"] == "data_gb"
    assert "not a bucket this job reads" in wrong.json_body["message"]
    assert "needs a job reading one bucket; this one reads 0" in plain.json_body["message"]


def _run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env={**WIDE, **(env or {})})


def test_launch_dryrun_and_plan_explain_the_egress_as_typed(stack: Settings, tmp_path: Path, cli_api):
    bucket = _bucket(stack)
    put_grant(stack, Grant(bucket, "user:u-carol", "", write=False))
    api = [*cli_api[:2], "--api-key", create_user("carol", stack, user_id="u-carol")]
    path = tmp_path / "train.yaml"
    path.write_text(_task(bucket))

    dry = _run("launch", str(path), "--dryrun", "--data-size", "2TB", *api)
    planned = _run("plan", str(path), "--data-size", "2TB", env={"AWS_ENDPOINT_URL_S3": stack.endpoint_url})
    light = _run("plan", str(path), "--data-size", f"s3://{bucket}/train=100GB", "--json",
                 env={"AWS_ENDPOINT_URL_S3": stack.endpoint_url})  # fmt: skip
    bad = _run("plan", str(path), "--data-size", "lots")

    assert dry.exit_code == 0, dry.output
    assert "stays in aws us-east-1 near its data" in dry.output
    assert planned.exit_code == 0, planned.output
    assert "stays in aws us-east-1 near its data" in planned.output and "$180.00 egress" in planned.output
    body = json.loads(light.output)
    assert body["tasks"][0]["chosen"]["cloud"] != "aws" and body["egress_cost"] == pytest.approx(9.0)
    assert any(n.startswith("+$9.00 egress: 100 GB from s3://") for n in body["notes"])
    assert bad.exit_code == 2 and "--data-size" in bad.output and "Traceback" not in bad.output
