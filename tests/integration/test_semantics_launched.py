"""This project's task files for SkyPilot's verdicts, launched on the local cloud through the real
handlers: the machine SkyPilot would size is the one the cluster gets, TPU slices and multi-node GPU
jobs launch where the plan said, and secrets given at submit reach the node, not the table."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import QueueDriver

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.jobs.agent_reports import agent_config
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import get_job
from shared.states import JobState
from shared.wiring import wiring_for

FILES = Path(__file__).resolve().parents[1] / "fixtures" / "semantics"
SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])


@pytest.fixture(autouse=True)
def sleeping_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)


def launched(settings: Settings, queues: QueueDriver, name: str, **submit: Any) -> dict[str, Any]:
    job = submit_job(
        wiring_for(settings),
        SubmitJob.from_text(owner="alice", task_text=(FILES / name).read_text(), filename=name, **submit),
    )
    for kind, handler in (("optimize", optimize_handler), ("provision", provision_handler)):
        assert handler(queues.event(queues.receive(kind)), None) == {"batchItemFailures": []}
    view = get_job(wiring_for(settings), job.job_id, owner=None)
    assert view.state == JobState.SETTING_UP and view.cluster is not None, view.reason
    return {"job_id": job.job_id, **view.cluster}


def test_a_task_naming_no_hardware_gets_skypilots_default_machine(
    stack: Settings, queues: QueueDriver
) -> None:
    cluster = launched(stack, queues, "cpu_default.yaml")
    assert (cluster["cloud"], cluster["instance_type"]) == ("aws", "m6i.2xlarge")
    assert [n.instance_type for n in LocalCloud(stack.home).describe(cluster["cluster_id"])] == [
        "m6i.2xlarge"
    ]


def test_a_tpu_slice_launches_as_a_tpu_vm(stack: Settings, queues: QueueDriver) -> None:
    cluster = launched(stack, queues, "tpu_v4_8.yaml")
    assert (cluster["cloud"], cluster["zone"], cluster["instance_type"]) == ("gcp", "us-central2-b", "TPU-VM")


def test_a_two_node_h100_job_launches_off_runpod(stack: Settings, queues: QueueDriver) -> None:
    cluster = launched(stack, queues, "h100_two_nodes.yaml")
    assert cluster["cloud"] != "runpod" and len(cluster["nodes"]) == 2


def test_gpus_written_as_gpus_launch_like_accelerators(stack: Settings, queues: QueueDriver) -> None:
    cluster = launched(stack, queues, "gpus_field.yaml")
    assert cluster["cloud"] in ("aws", "gcp")


def test_secrets_given_at_submit_reach_the_node_and_no_table(stack: Settings, queues: QueueDriver) -> None:
    secrets = {"HF_TOKEN": "hf_abc", "WANDB_API_KEY": "wb_xyz"}
    cluster = launched(stack, queues, "null_secret.yaml", secrets=secrets)
    [node] = cluster["nodes"]
    config = agent_config(wiring_for(stack), cluster["job_id"], node["instance_id"])
    assert config is not None and {k: config.envs[k] for k in secrets} == secrets
    job = wiring_for(stack).store.get(cluster["job_id"])
    assert job is not None and "hf_abc" not in json.dumps(job.attribute_values, default=str)
