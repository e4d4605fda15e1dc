"""What the job record holds: small, no secrets in clear, the agent token only as a hash."""

from __future__ import annotations

import base64
import hashlib
import json
import sys
import zlib

import boto3
import pytest
from conftest import QueueDriver

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from shared.config import Settings
from shared.jobs.agent_reports import agent_config
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.tokens import agent_token
from shared.jobs.views import get_job
from shared.wiring import wiring_for

SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])
TASK = """
name: secretive
envs:
  MODEL: bert
secrets:
  HF_TOKEN: null
resources:
  cloud: aws
  cpus: 2+
run: |
{run}
"""


@pytest.fixture(autouse=True)
def sleeping_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)


def raw_items(settings: Settings) -> str:
    """Every item of every table, as DynamoDB holds them; compressed values (the plan) opened up, so that
    compression cannot hide a secret from this check."""
    dynamodb = boto3.client("dynamodb", endpoint_url=settings.endpoint_url)
    items = []
    for kind in ("jobs", "clusters", "events"):
        items += dynamodb.scan(TableName=settings.table_name(kind))["Items"]
    return json.dumps(items, default=lambda raw: zlib.decompress(raw).decode())


def launch(settings: Settings, queues: QueueDriver, run: str) -> str:
    task = TASK.format(run="\n".join(f"  {line}" for line in run.splitlines()))
    secrets = {"HF_TOKEN": "hf_very_secret"}
    job_id = submit_job(
        wiring_for(settings), SubmitJob.from_text(owner="alice", task_text=task, secrets=secrets)
    ).job_id
    optimize_handler(queues.event(queues.receive("optimize")), None)
    provision_handler(queues.event(queues.receive("provision")), None)
    return job_id


def test_secrets_and_the_agent_token_never_reach_a_table_in_clear(stack: Settings, queues: QueueDriver):
    job_id = launch(stack, queues, "echo hi")
    stored = raw_items(stack)
    token = agent_token(stack, job_id, 0)
    assert "hf_very_secret" not in stored and token not in stored
    job = wiring_for(stack).store.get(job_id)
    assert job is not None and job.token_hash == hashlib.sha256(token.encode()).hexdigest()
    node = get_job(wiring_for(stack), job_id, owner=None).cluster["nodes"][0]  # type: ignore[index]
    config = agent_config(wiring_for(stack), job_id, node["instance_id"])
    assert config is not None and config.envs == {"MODEL": "bert", "HF_TOKEN": "hf_very_secret"}


def test_a_big_task_goes_to_the_bucket_and_the_record_stays_small(stack: Settings, queues: QueueDriver):
    run = "\n".join(f"echo line {i} of a long generated script" for i in range(400))
    job_id = launch(stack, queues, run)
    job = wiring_for(stack).store.get(job_id)
    assert job is not None and job.task is None and job.task_key == f"runs/{job_id}/task.json"
    item = boto3.client("dynamodb", endpoint_url=stack.endpoint_url).get_item(
        TableName=stack.table_name("jobs"), Key={"job_id": {"S": job_id}}
    )["Item"]
    assert len(json.dumps(item, default=lambda raw: base64.b64encode(raw).decode())) < 8 * 1024
    node = get_job(wiring_for(stack), job_id, owner=None).cluster["nodes"][0]  # type: ignore[index]
    config = agent_config(wiring_for(stack), job_id, node["instance_id"])
    assert config is not None and config.run is not None and "line 399 of a long" in config.run
