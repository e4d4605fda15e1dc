"""The local cloud for real: nodes are processes, found by tag from any process, killed as a group."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.clouds.base import LaunchSpec
from shared.clouds.errors import CloudAuthError, NoCapacityError, QuotaError
from shared.clouds.local import LocalCloud

# A node that records its environment, starts a child (as a task would), and waits.
NODE_PROGRAM = (
    "import json, os, subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
    "with open('env.tmp', 'w') as f:\n"
    "    json.dump({**dict(os.environ), 'CHILD_PID': str(child.pid)}, f)\n"
    "os.replace('env.tmp', 'env.json')  # the test reads it whole or not at all\n"
    "time.sleep(600)\n"
)


def spec(cluster_id: str = "job-1-0", num_nodes: int = 2, zone: str = "us-east-1a") -> LaunchSpec:
    return LaunchSpec(
        job_id="job-1",
        cluster_id=cluster_id,
        attempt_id=cluster_id,
        attempt=0,
        cloud="aws",
        region="us-east-1",
        zone=zone,
        instance_type="c6i.large",
        use_spot=True,
        num_nodes=num_nodes,
        agent_env={"SKYLESS_BOOT_TOKEN": "secret-token"},
    )


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[LocalCloud]:
    command = [sys.executable, "-c", NODE_PROGRAM]
    local = LocalCloud(tmp_path, api_url="http://127.0.0.1:9", agent_command=command)
    yield local
    for cluster_id in {n.cluster_id for n in local.list_owned()}:
        local.terminate(cluster_id)


def node_env(cloud: LocalCloud, cluster_id: str, rank: int) -> dict[str, str]:
    path = cloud.nodes_dir / cluster_id / str(rank) / "env.json"
    deadline = time.monotonic() + 10
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return json.loads(path.read_text())


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_launch_starts_one_process_per_node_with_the_agent_environment(cloud: LocalCloud) -> None:
    nodes = cloud.launch(spec())
    assert [n.tags["skyless-rank"] for n in nodes] == ["0", "1"]
    envs = [node_env(cloud, "job-1-0", rank) for rank in (0, 1)]
    assert [e["SKYLESS_NODE_IP"] for e in envs] == [n.ip for n in nodes]
    assert len({n.ip for n in nodes}) == 2
    assert all(e["SKYLESS_BOOT_TOKEN"] == "secret-token" and e["SKYLESS_JOB_ID"] == "job-1" for e in envs)
    assert [e["SKYLESS_INSTANCE_ID"] for e in envs] == [n.instance_id for n in nodes]
    assert [e["HOME"] for e in envs] == [str(cloud.nodes_dir / "job-1-0" / str(rank)) for rank in (0, 1)]
    record = json.loads((cloud.nodes_dir / "job-1-0" / "0" / "node.json").read_text())
    assert os.getsid(record["pid"]) == record["pid"]  # its own session: it outlives whoever launched it


def test_launching_the_same_attempt_twice_starts_nothing_new(cloud: LocalCloud) -> None:
    first = cloud.launch(spec())
    again = cloud.launch(spec())
    assert [n.instance_id for n in again] == [n.instance_id for n in first]
    assert len(cloud.list_owned()) == 2


def test_another_process_finds_and_terminates_nodes_by_tag_children_included(cloud: LocalCloud) -> None:
    cloud.launch(spec())
    child = int(node_env(cloud, "job-1-0", 0)["CHILD_PID"])
    elsewhere = LocalCloud(cloud.root.parent)  # as the reconcile sweep, in another process, would see it
    assert {n.state for n in elsewhere.describe("job-1-0")} == {"running"}
    elsewhere.terminate("job-1-0")
    assert {n.state for n in cloud.list_owned()} == {"terminated"}
    deadline = time.monotonic() + 5
    while pid_alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(child)
    elsewhere.terminate("job-1-0")  # idempotent


def test_a_node_whose_process_died_is_reported_terminated(cloud: LocalCloud) -> None:
    cloud.launch(spec(num_nodes=1))
    record = json.loads((cloud.nodes_dir / "job-1-0" / "0" / "node.json").read_text())
    os.killpg(record["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 5
    while cloud.describe("job-1-0")[0].state == "running" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert cloud.describe("job-1-0")[0].state == "terminated"


def test_capacity_rules_raise_the_cloud_error_for_the_place(
    cloud: LocalCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    cloud.set_capacity_rules({"no_capacity": ["aws/us-east-1/us-east-1a"], "quota": ["aws/us-west-2"]})
    with pytest.raises(NoCapacityError, match="us-east-1a"):
        cloud.launch(spec())
    cloud.launch(spec(cluster_id="job-1-1", zone="us-east-1b"))  # the next zone has room
    west = LaunchSpec(**{**spec(cluster_id="job-1-2").__dict__, "region": "us-west-2", "zone": "us-west-2a"})
    with pytest.raises(QuotaError):
        cloud.launch(west)
    monkeypatch.setenv("SKYLESS_LOCAL_CAPACITY", json.dumps({"auth": ["aws/*"]}))
    with pytest.raises(CloudAuthError):
        cloud.launch(spec(cluster_id="job-1-3", zone="us-east-1c"))
    assert {n.cluster_id for n in cloud.list_owned()} == {"job-1-1"}


def test_preempt_kills_one_node_and_returns_the_spot_warning_to_deliver(cloud: LocalCloud) -> None:
    nodes = cloud.launch(spec())
    event = cloud.preempt("job-1", rank=1)
    assert event is not None
    assert event["source"] == "skyless.local"
    assert event["detail-type"] == "EC2 Spot Instance Interruption Warning"
    assert event["detail"]["instance-id"] == nodes[1].instance_id
    assert [n.state for n in cloud.describe("job-1-0")] == ["running", "terminated"]
    assert cloud.preempt("job-1", rank=1) is None  # nothing left to preempt at that rank


# A node that checkpoints on SIGTERM and then keeps running, as a task with a slow checkpoint would.
CHECKPOINTING_NODE = (
    "import os, signal, time\n"
    "def checkpoint(*_):\n"
    "    open('checkpoint', 'w').write(str(time.monotonic()))\n"
    "signal.signal(signal.SIGTERM, checkpoint)\n"
    "open('ready', 'w').close()\n"
    "while True: time.sleep(0.05)\n"
)


def test_preempt_gives_notice_then_kills_when_the_notice_period_ends(tmp_path: Path) -> None:
    local = LocalCloud(
        tmp_path, api_url="http://127.0.0.1:9", agent_command=[sys.executable, "-c", CHECKPOINTING_NODE]
    )
    try:
        local.launch(spec(num_nodes=1))
        sandbox = local.nodes_dir / "job-1-0" / "0"
        deadline = time.monotonic() + 10
        while not (sandbox / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        started = time.monotonic()
        event = local.preempt("job-1", notice_seconds=0.8)
        took = time.monotonic() - started
        assert event is not None
        assert (sandbox / "checkpoint").exists()  # the node heard the notice before it was killed
        assert 0.8 <= took < 5
        assert [n.state for n in local.describe("job-1-0")] == ["terminated"]
    finally:
        local.terminate("job-1-0")


def test_preempt_ends_the_notice_early_when_the_node_shuts_down(cloud: LocalCloud) -> None:
    cloud.launch(spec(num_nodes=1))  # this node exits on SIGTERM
    node_env(cloud, "job-1-0", 0)
    started = time.monotonic()
    assert cloud.preempt("job-1", notice_seconds=30) is not None
    assert time.monotonic() - started < 5
    assert [n.state for n in cloud.describe("job-1-0")] == ["terminated"]
    assert _gone(int(node_env(cloud, "job-1-0", 0)["CHILD_PID"])), "the task outlived its node"


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
            return True  # killed, waiting for its parent's reaper
        time.sleep(0.05)
    return False


def test_concurrent_launches_of_one_attempt_start_its_nodes_once(cloud: LocalCloud) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(lambda _: cloud.launch(spec()), range(4)))
    assert all([n.instance_id for n in a] == [n.instance_id for n in answers[0]] for a in answers)
    assert len(cloud.list_owned()) == 2
