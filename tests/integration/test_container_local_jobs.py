"""Jobs whose task names `image_id: docker:<image>`, run by the local cloud's real agents in real podman
containers (skipped, saying why, where this machine cannot run one): from submit to SUCCEEDED, and a cancel
that leaves no container behind."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import QueueDriver
from test_agent_containers import podman as podman  # the fixture: a working podman and an image
from test_lifecycle_agents import api as api  # the fixture: the real API over HTTP
from test_lifecycle_agents import deliver, live_nodes, log_text, tear_down, wait_for

from shared.config import Settings
from shared.jobs.cancellation import cancel_job
from shared.jobs.submission import SubmitJob, submit_job
from shared.states import JobState, is_terminal
from shared.wiring import wiring_for

TASK = """
name: boxed
num_nodes: 2
resources:
  cloud: aws
  cpus: 2+
  image_id: docker:{image}
setup: echo "set up in $(cat /etc/skyless-probe)" > /root/setup-note
run: |
  cat /root/setup-note
  echo "rank $SKYPILOT_NODE_RANK of $SKYPILOT_NUM_NODES in $PWD"
  {more}
"""


def containers_of(job_id: str, extra: dict[str, str]) -> list[str]:
    command = ["podman", "ps", "-aq", "--filter", f"label=skyless-job={job_id}"]
    listed = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **extra}, timeout=60)
    return listed.stdout.split()


@pytest.fixture
def boxed(
    api: Settings, podman: tuple[dict[str, str], str], monkeypatch: pytest.MonkeyPatch
) -> tuple[Settings, dict[str, str], str]:
    extra, image = podman
    for name, value in extra.items():
        monkeypatch.setenv(name, value)  # the local nodes' agents inherit it
    return api, extra, image


def test_a_two_node_container_job_runs_setup_and_run_in_the_image_and_leaves_no_container(
    boxed: tuple[Settings, dict[str, str], str], queues: QueueDriver
) -> None:
    settings, extra, image = boxed
    job_id = submit_job(
        wiring_for(settings),
        SubmitJob.from_text(owner="alice", task_text=TASK.format(image=image, more="true")),
    ).job_id
    deliver(queues, "provision")
    done = wait_for(settings, job_id, lambda v: is_terminal(v.state), timeout=120)
    assert done.state == JobState.SUCCEEDED, done.reason
    wait_for(settings, job_id, lambda v: "rank 1 of 2" in log_text(settings, job_id, 1), timeout=10)
    for rank in (0, 1):
        logs = log_text(settings, job_id, rank)
        assert "set up in inside-the-image" in logs  # setup ran in the image; run found what it left
        assert f"rank {rank} of 2 in /root/sky_workdir" in logs
    tear_down(settings, queues)
    assert live_nodes(settings) == []
    assert containers_of(job_id, extra) == []


RUN_OPTIONS = """
name: options
resources:
  cloud: aws
  image_id: docker:{image}
config:
  docker:
    run_options: [--shm-size=1g, -e FOO=bar]
run: |
  while read -r line; do case "$line" in *" /dev/shm "*) echo "shm: $line";; esac; done < /proc/mounts
  echo "FOO is $FOO"
"""


def test_a_tasks_docker_run_options_reach_its_container(
    boxed: tuple[Settings, dict[str, str], str], queues: QueueDriver
) -> None:
    settings, extra, image = boxed
    job_id = submit_job(
        wiring_for(settings),
        SubmitJob.from_text(owner="alice", task_text=RUN_OPTIONS.format(image=image)),
    ).job_id
    deliver(queues, "provision")
    done = wait_for(settings, job_id, lambda v: is_terminal(v.state), timeout=120)
    assert done.state == JobState.SUCCEEDED, done.reason
    wait_for(settings, job_id, lambda v: "FOO is" in log_text(settings, job_id, 0), timeout=10)
    logs = log_text(settings, job_id, 0)
    (shm,) = [line for line in logs.splitlines() if line.startswith("shm: ")]
    assert "size=1048576k" in shm.split()[4].split(","), shm  # 1 GiB (podman gives 64000k without it)
    assert "FOO is bar" in logs
    tear_down(settings, queues)
    assert containers_of(job_id, extra) == []


def test_cancelling_a_running_container_job_stops_the_task_and_removes_its_containers(
    boxed: tuple[Settings, dict[str, str], str], queues: QueueDriver
) -> None:
    settings, extra, image = boxed
    job_id = submit_job(
        wiring_for(settings),
        SubmitJob.from_text(owner="alice", task_text=TASK.format(image=image, more="sleep 120")),
    ).job_id
    deliver(queues, "provision")
    wait_for(settings, job_id, lambda v: v.state == JobState.RUNNING, timeout=120)
    wait_for(settings, job_id, lambda v: "rank 0 of 2" in log_text(settings, job_id, 0), timeout=30)
    boxes = containers_of(job_id, extra)
    assert len(boxes) == 2  # one per node
    pids = [int(pid) for pid in podman_out(extra, "inspect", "--format", "{{.State.Pid}}", *boxes).split()]
    cancel_job(wiring_for(settings), job_id, owner=None)
    deliver(queues, "provision")  # the teardown terminates the nodes and what they left running
    assert live_nodes(settings) == []
    assert containers_of(job_id, extra) == []
    time.sleep(1)
    assert [pid for pid in pids if alive(pid)] == []  # gone for real, not only from podman's records


def podman_out(extra: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        ["podman", *args], capture_output=True, text=True, env={**os.environ, **extra}, timeout=60
    )
    return done.stdout


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z")
