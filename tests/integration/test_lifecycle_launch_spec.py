"""What the plan chose and the task asked for reaches the cloud's launch: the candidate's accelerators, and
the task's image, disk, ports and labels (the local cloud keeps what it was asked to attach in node.json)."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import QueueDriver

from functions.optimize.handler import handler as optimize_handler
from functions.provision.handler import handler as provision_handler
from shared.clouds.local import LocalCloud
from shared.config import Settings
from shared.jobs.submission import SubmitJob, submit_job
from shared.jobs.views import get_job
from shared.wiring import wiring_for

SLEEPER = json.dumps([sys.executable, "-c", "import time; time.sleep(600)"])
GPU_TASK = """
name: finetune
resources:
  cloud: gcp
  accelerators: T4:2
  image_id: projects/deeplearning-platform-release/global/images/family/common-cu121
  disk_size: 200
  ports: [8080, "9000-9010"]
  labels: {team: vision}
run: python train.py
"""


@pytest.fixture(autouse=True)
def sleeping_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYLESS_LOCAL_AGENT_COMMAND", SLEEPER)


def test_the_launch_carries_the_candidates_gpus_and_the_tasks_vm_fields(stack: Settings, queues: QueueDriver):
    job = submit_job(
        wiring_for(stack), SubmitJob.from_text(owner="alice", task_text=GPU_TASK, filename="task.yaml")
    )
    for kind, handler in (("optimize", optimize_handler), ("provision", provision_handler)):
        assert handler(queues.event(queues.receive(kind)), None) == {"batchItemFailures": []}
    view = get_job(wiring_for(stack), job.job_id, owner=None)
    assert view.cluster is not None and view.instance_type is not None
    assert view.instance_type.startswith("n1-")  # a host that takes its GPUs attached
    (node,) = [n for n in LocalCloud(stack.home).list_owned() if n.job_id == job.job_id]
    record = json.loads((stack.home / "local" / "nodes" / node.cluster_id / "0" / "node.json").read_text())
    assert record["hardware"] == {
        "accelerator": "T4",
        "accelerator_count": 2,
        "image_id": "projects/deeplearning-platform-release/global/images/family/common-cu121",
        "disk_size_gb": 200,
        "ports": ["8080", "9000-9010"],
        "labels": {"team": "vision"},
    }
