"""What a task really sees: real agents on the local cloud fetch their config from the real API and run
`setup` and `run`; the values they print are checked against the plan and SkyPilot's rules."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import QueueDriver, _free_port
from test_lifecycle_agents import deliver, log_text, wait_for

from local_runtime.api_server import ApiServer, load_app
from shared.config import Settings
from shared.jobs.submission import SubmitJob, submit_job
from shared.states import JobState, is_terminal
from shared.wiring import wiring_for

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PRINT_ENV = """
name: envcheck
num_nodes: 2
resources:
  infra: gcp
  accelerators: L4:4
  cpus: 16+
envs:
  SKYPILOT_TASK_ID: mine
  MY_VAR: mine
setup: |
  for v in {names}; do printf 'setup %s=%s\\n' "$v" "$(printf %s "${{!v-<unset>}}" | tr '\\n' ',')"; done
run: |
  for v in {names}; do printf 'run %s=%s\\n' "$v" "$(printf %s "${{!v-<unset>}}" | tr '\\n' ',')"; done
"""
NAMES = [
    "SKYPILOT_NODE_RANK", "SKYPILOT_NODE_IPS", "SKYPILOT_NUM_NODES", "SKYPILOT_NUM_GPUS_PER_NODE",
    "SKYPILOT_TASK_ID", "SKYPILOT_TASK_IDS", "SKYPILOT_CLUSTER_INFO", "SKYPILOT_SETUP_NODE_RANK",
    "SKYPILOT_SETUP_NODE_IPS", "SKYPILOT_SETUP_NUM_GPUS_PER_NODE", "SKYPILOT_JOB_RANK",
    "SKYPILOT_JOBGROUP_NAME", "MY_VAR",
]  # fmt: skip


@pytest.fixture
def api(stack: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """The API over HTTP for the nodes' agents, with fast log flushes."""
    server = ApiServer(load_app(), "127.0.0.1", _free_port())
    server.start()
    monkeypatch.setenv("SKYLESS_API_URL", server.url)
    monkeypatch.setenv("SKYLESS_LOG_FLUSH_SECONDS", "0.5")
    try:
        yield Settings.from_env()
    finally:
        server.stop()


def printed(text: str, stage: str) -> dict[str, str]:
    lines = [line.split(" ", 1)[1] for line in text.splitlines() if line.startswith(stage + " ")]
    return dict(line.split("=", 1) for line in lines)


def run_to_the_end(api: Settings, queues: QueueDriver, task: str) -> tuple[str, list[str]]:
    job_id = submit_job(wiring_for(api), SubmitJob.from_text(owner="alice", task_text=task)).job_id
    deliver(queues, "optimize")
    deliver(queues, "provision")
    done = wait_for(api, job_id, lambda v: is_terminal(v.state), timeout=90)
    assert done.state == JobState.SUCCEEDED, (done.reason, log_text(api, job_id, 0))
    shipped = lambda v: "run " in log_text(api, job_id, 1) or "torchrun" in log_text(api, job_id, 1)  # noqa: E731
    wait_for(api, job_id, shipped)
    return job_id, [log_text(api, job_id, rank) for rank in (0, 1)]


def test_every_node_sees_skypilots_variables_in_each_stage(api: Settings, queues: QueueDriver) -> None:
    job_id, logs = run_to_the_end(api, queues, PRINT_ENV.format(names=" ".join(NAMES)))
    view = wait_for(api, job_id, lambda v: v.cluster is not None)
    cluster = view.cluster
    assert cluster is not None and cluster["cloud"] == "gcp" and cluster["zone"]
    ips = [node["ip"] for node in cluster["nodes"]]  # in rank order
    for rank, text in enumerate(logs):
        setup, run = printed(text, "setup"), printed(text, "run")
        assert run["SKYPILOT_NODE_RANK"] == str(rank) == setup["SKYPILOT_SETUP_NODE_RANK"]
        assert run["SKYPILOT_NODE_IPS"] == ",".join(ips) == setup["SKYPILOT_SETUP_NODE_IPS"]
        assert run["SKYPILOT_NUM_NODES"] == "2" == setup["SKYPILOT_NUM_NODES"]
        assert run["SKYPILOT_NUM_GPUS_PER_NODE"] == "4" == setup["SKYPILOT_SETUP_NUM_GPUS_PER_NODE"]
        info = json.loads(run["SKYPILOT_CLUSTER_INFO"])
        assert info == {"cluster_name": cluster["cluster_id"], "cloud": "GCP", "region": cluster["region"],
                        "zone": cluster["zone"]}  # fmt: skip
        assert setup["SKYPILOT_CLUSTER_INFO"] == run["SKYPILOT_CLUSTER_INFO"]
        task_id = run["SKYPILOT_TASK_ID"]
        assert task_id.startswith("sky-managed-") and f"_envcheck_{job_id}-0" in task_id
        assert setup["SKYPILOT_TASK_ID"] == task_id == run["SKYPILOT_TASK_IDS"] != "mine"  # SkyPilot's wins
        assert run["SKYPILOT_JOB_RANK"] == "0" == setup["SKYPILOT_JOB_RANK"]
        assert run["MY_VAR"] == "mine" == setup["MY_VAR"]
        # each stage has only its own variables, as in SkyPilot
        assert run["SKYPILOT_SETUP_NODE_RANK"] == "<unset>" and setup["SKYPILOT_NODE_RANK"] == "<unset>"
        assert run["SKYPILOT_JOBGROUP_NAME"] == "<unset>"  # not a job group


@pytest.fixture
def fake_torch_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`torchrun` (argument rules of torch/distributed/run.py) and a no-op `pip` first on the nodes' PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    torchrun = bin_dir / "torchrun"
    torchrun.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{PROJECT_ROOT}/tests/fakes/torchrun.py" "$@"\n')
    pip = bin_dir / "pip"
    pip.write_text('#!/bin/sh\necho "pip (offline stand-in) $*"\n')
    for tool in (torchrun, pip):
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


def test_the_fake_torchrun_rejects_what_real_torchrun_rejects(fake_torch_tools: Path) -> None:
    import subprocess

    def torchrun(nproc: str) -> subprocess.CompletedProcess[str]:
        argv = [str(fake_torch_tools / "torchrun"), "--nnodes=2", f"--nproc_per_node={nproc}", "train.py"]
        return subprocess.run(argv, capture_output=True, text=True, check=False)

    assert torchrun("8").returncode == 0
    refused = torchrun("8.0")  # what skyless used to export
    assert refused.returncode == 1 and "Unsupported nproc_per_node value: 8.0" in refused.stderr


def test_the_multinode_torchrun_example_runs_unchanged_with_an_integer_nproc_per_node(
    api: Settings, queues: QueueDriver, fake_torch_tools: Path
) -> None:
    task = (PROJECT_ROOT / "examples" / "multinode_distributed.yaml").read_text()
    _job_id, logs = run_to_the_end(api, queues, task)
    for rank, text in enumerate(logs):
        assert "pip (offline stand-in) install -q torch torchvision" in text
        launched = f"torchrun launching nproc_per_node=4 nnodes=2:2 node_rank={rank} master=127.0.0.2:29500"
        assert launched in text
