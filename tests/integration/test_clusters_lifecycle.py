"""Named clusters through the real pieces: the operations the API calls, the provision handler fed the
queue's real messages, local-cloud nodes running the real agent in cluster mode against the real API over
HTTP. Every verb is also repeated (a duplicated message, a second request) and raced."""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import QueueDriver

from functions.provision.handler import handler as provision_handler
from local_runtime.api_server import ApiServer, load_app
from shared.clouds.local import LocalCloud
from shared.clusters import operations, views
from shared.clusters.provisioning import cluster_step
from shared.config import Settings
from shared.errors import ConflictError, UserError
from shared.jobs.reaper import reap_orphans
from shared.store.cluster_records import ClusterStore
from shared.wiring import wiring_for

DEV = """
name: dev
resources:
  cloud: aws
  cpus: 2+
setup: |
  echo setup-ran >> ~/setup-count
run: |
  echo "hello from $SKYPILOT_CLUSTER_INFO rank $SKYPILOT_NODE_RANK"
  echo first > ~/marker
"""
OWNER = "alice"


@pytest.fixture
def api(stack: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = ApiServer(load_app(), "127.0.0.1", port)
    server.start()
    monkeypatch.setenv("SKYLESS_API_URL", server.url)
    monkeypatch.setenv("SKYLESS_LOG_FLUSH_SECONDS", "0.3")
    monkeypatch.setenv("SKYLESS_CLUSTER_POLL_SECONDS", "0.3")
    monkeypatch.setenv("SKYLESS_AUTOSTOP_MINUTE_SECONDS", "1")
    yield Settings.from_env()
    cloud = LocalCloud(stack.home)
    for cluster_id in {node.cluster_id for node in cloud.list_owned()}:
        cloud.terminate(cluster_id)
    server.stop()


def deliver(queues: QueueDriver, wait_seconds: int = 0) -> list[dict[str, Any]]:
    """Every visible provision message through the real handler; answers their bodies."""
    records = queues.receive("provision", wait_seconds=wait_seconds)
    assert provision_handler(queues.event(records), None) == {"batchItemFailures": []}
    return [json.loads(r["body"]) for r in records]


def wait_for(what: Callable[[], Any], timeout: float = 30, every: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting; last value {value!r}")
        time.sleep(every)


def cluster(settings: Settings, name: str = "dev") -> Any:
    return ClusterStore(settings).by_name(OWNER, name)


def job_state(settings: Settings, number: int, name: str = "dev") -> str:
    return views.get_cluster_job(settings, owner=OWNER, name=name, number=number)["state"]


def log_of(settings: Settings, number: int, name: str = "dev") -> str:
    return views.read_cluster_logs(settings, owner=OWNER, name=name, number=number)["text"]


def sandbox(settings: Settings, name: str = "dev") -> Path:
    record = cluster(settings, name)
    return LocalCloud(settings.home).node_home(record.provider_cluster, 0)


def live_nodes(settings: Settings) -> list[Any]:
    return [n for n in LocalCloud(settings.home).list_owned() if n.state == "running"]


def launch_up(settings: Settings, queues: QueueDriver, name: str = "dev", **options: Any) -> Any:
    outcome = operations.launch_on_cluster(settings, owner=OWNER, name=name, task_text=DEV, **options)
    deliver(queues)  # the launch
    wait_for(lambda: cluster(settings, name).state == "UP")
    return outcome


def test_launch_exec_twice_reuses_the_node_and_its_home_and_runs_setup_once(
    api: Settings, queues: QueueDriver
) -> None:
    outcome = launch_up(api, queues)
    assert outcome.action == "created" and outcome.job.number == 1
    wait_for(lambda: job_state(api, 1) == "SUCCEEDED")
    assert "hello from" in wait_for(lambda: log_of(api, 1))
    first = operations.exec_on_cluster(
        api, owner=OWNER, name="dev", command="cat ~/marker; echo second >> ~/marker"
    )
    wait_for(lambda: job_state(api, first.number) == "SUCCEEDED")
    second = operations.exec_on_cluster(api, owner=OWNER, name="dev", command="cat ~/marker ~/setup-count")
    wait_for(lambda: job_state(api, second.number) == "SUCCEEDED")
    text = wait_for(lambda: log_of(api, second.number))
    assert text.splitlines() == ["first", "second", "setup-ran"]  # the files of job 1 and 2; setup once
    queue = views.cluster_queue(api, owner=OWNER, name="dev")
    assert [(j["job"], j["state"]) for j in queue] == [(3, "SUCCEEDED"), (2, "SUCCEEDED"), (1, "SUCCEEDED")]
    assert [j["with_setup"] for j in queue] == [False, False, True]
    assert len(live_nodes(api)) == 1  # one node all along

    operations.down_cluster(api, owner=OWNER, name="dev")
    deliver(queues)
    assert cluster(api) is None  # the name is free again
    assert live_nodes(api) == []


def test_stop_keeps_the_disk_the_reaper_leaves_it_and_start_brings_the_node_back(
    api: Settings, queues: QueueDriver
) -> None:
    launch_up(api, queues)
    wait_for(lambda: job_state(api, 1) == "SUCCEEDED")
    home = sandbox(api)
    record = cluster(api)

    operations.stop_cluster(api, owner=OWNER, name="dev")
    again = operations.stop_cluster(api, owner=OWNER, name="dev")  # a second stop changes nothing
    assert again.state == "STOPPING"
    bodies = deliver(queues)
    assert [b["action"] for b in bodies] == ["stop"]
    stopped = cluster(api)
    assert stopped.state == "STOPPED" and stopped.up_since is None and stopped.cost > 0
    assert live_nodes(api) == []
    assert {n.state for n in LocalCloud(api.home).describe(record.provider_cluster)} == {"stopped"}
    assert (home / "marker").read_text() == "first\n"
    # A duplicated stop message after the fact does nothing.
    assert cluster_step({"cluster": record.key, "action": "stop"}, wiring_for(api)) == "already_done"

    swept = reap_orphans(wiring_for(api), grace_seconds=0)
    assert record.provider_cluster in swept.owned and swept.killed == []
    assert {n.state for n in LocalCloud(api.home).describe(record.provider_cluster)} == {"stopped"}

    with pytest.raises(ConflictError, match="exec needs it UP"):
        operations.exec_on_cluster(api, owner=OWNER, name="dev", command="true")
    operations.start_cluster(api, owner=OWNER, name="dev")
    assert operations.start_cluster(api, owner=OWNER, name="dev").state == "INIT"  # twice: harmless
    deliver(queues)
    wait_for(lambda: cluster(api).state == "UP")
    job = operations.exec_on_cluster(api, owner=OWNER, name="dev", command="cat ~/marker")
    wait_for(lambda: job_state(api, job.number) == "SUCCEEDED")
    assert wait_for(lambda: log_of(api, job.number)) == "first\n"
    assert [n.instance_id for n in live_nodes(api)] == list(cluster(api).nodes.as_dict())

    operations.down_cluster(api, owner=OWNER, name="dev")
    deliver(queues)
    assert live_nodes(api) == []
    swept = reap_orphans(wiring_for(api), grace_seconds=0)
    assert swept.killed == []  # nothing left to reap: down took it all


def test_autostop_stops_an_idle_cluster_after_its_idle_time_and_not_while_busy(
    api: Settings, queues: QueueDriver
) -> None:
    launch_up(api, queues, idle_minutes=2)  # a "minute" is 1 s in this test
    wait_for(lambda: job_state(api, 1) == "SUCCEEDED")
    idle = wait_for(lambda: cluster(api).idle_since)
    # Busy again before the check comes: that check finds a newer idle period and does nothing.
    job = operations.exec_on_cluster(api, owner=OWNER, name="dev", command="sleep 2.5")
    assert cluster(api).idle_since is None
    first_checks = [b for b in deliver(queues, wait_seconds=3) if b["action"] == "autostop"]
    assert first_checks and first_checks[0]["idle_since"] == pytest.approx(idle)
    assert cluster(api).state == "UP"
    wait_for(lambda: job_state(api, job.number) == "SUCCEEDED")
    second_idle = wait_for(lambda: cluster(api).idle_since)
    assert second_idle > idle
    checks = []
    while cluster(api).state == "UP":
        checks += [b for b in deliver(queues, wait_seconds=2) if b["action"] == "autostop"]
    assert cluster(api).state == "STOPPING"
    assert time.time() - second_idle >= 2
    deliver(queues)  # the stop
    assert cluster(api).state == "STOPPED"
    assert live_nodes(api) == []
    timeline = [e["message"] for e in views.get_cluster(api, owner=OWNER, name="dev")["timeline"]]
    assert any("autostop: idle for 2 min, stopping" in m for m in timeline)


def test_autostop_with_down_tears_the_cluster_down(api: Settings, queues: QueueDriver) -> None:
    launch_up(api, queues, idle_minutes=1, down=True)
    wait_for(lambda: job_state(api, 1) == "SUCCEEDED")
    while cluster(api) is not None and cluster(api).state == "UP":
        deliver(queues, wait_seconds=2)
    deliver(queues)
    assert cluster(api) is None and live_nodes(api) == []


def test_an_open_shell_keeps_autostop_away_until_it_closes(api: Settings, queues: QueueDriver) -> None:
    launch_up(api, queues)
    wait_for(lambda: job_state(api, 1) == "SUCCEEDED")
    sessions = sandbox(api) / ".skyless" / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    shell = __import__("subprocess").Popen(["sleep", "30"])
    try:
        (sessions / str(shell.pid)).write_text("")
        wait_for(lambda: views.get_cluster(api, owner=OWNER, name="dev")["nodes"][0]["sessions"] == 1)
        assert cluster(api).idle_since is None
        operations.set_autostop(api, owner=OWNER, name="dev", idle_minutes=0)
        deliver(queues, wait_seconds=1)
        assert cluster(api).state == "UP"  # a shell is open: not idle
    finally:
        shell.kill()
        shell.wait()
    wait_for(lambda: cluster(api).idle_since)  # the agent reports the shell gone
    while cluster(api).state == "UP":
        deliver(queues, wait_seconds=1)
    assert cluster(api).state == "STOPPING"


def test_two_execs_racing_get_distinct_numbers_and_run_one_after_another(
    api: Settings, queues: QueueDriver
) -> None:
    launch_up(api, queues)
    wait_for(lambda: job_state(api, 1) == "SUCCEEDED")
    numbers: list[int] = []
    command = "echo start $(date +%s.%N) >> ~/order; sleep 1; echo end $(date +%s.%N) >> ~/order"

    def run() -> None:
        numbers.append(operations.exec_on_cluster(api, owner=OWNER, name="dev", command=command).number)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(numbers) == [2, 3]
    wait_for(lambda: all(job_state(api, n) == "SUCCEEDED" for n in numbers), timeout=30)
    lines = (sandbox(api) / "order").read_text().split()
    assert lines[0::2] == ["start", "end", "start", "end"]  # never side by side on a CPU node


def test_down_racing_exec_either_refuses_the_exec_or_cancels_its_job(
    api: Settings, queues: QueueDriver
) -> None:
    launch_up(api, queues)
    wait_for(lambda: job_state(api, 1) == "SUCCEEDED")
    outcome: dict[str, Any] = {}

    def exec_job() -> None:
        try:
            outcome["job"] = operations.exec_on_cluster(api, owner=OWNER, name="dev", command="sleep 60")
        except (ConflictError, UserError) as error:
            outcome["error"] = error

    thread = threading.Thread(target=exec_job)
    thread.start()
    operations.down_cluster(api, owner=OWNER, name="dev")
    thread.join()
    deliver(queues)
    assert cluster(api) is None and live_nodes(api) == []
    if "job" in outcome:  # the exec won: its job was cancelled with the cluster
        key = outcome["job"].key
        assert ClusterStore(api).job(key, outcome["job"].number).state == "CANCELLED"
    else:
        assert "TERMINATING" in str(outcome["error"]) or "no cluster" in str(outcome["error"])


def test_duplicated_and_late_launch_messages_launch_once(api: Settings, queues: QueueDriver) -> None:
    operations.launch_on_cluster(api, owner=OWNER, name="dev", task_text=DEV)
    records = queues.receive("provision")
    assert len(records) == 1
    twice = queues.event(records + records)
    assert provision_handler(twice, None) == {"batchItemFailures": []}
    record = cluster(api)
    assert record.state == "UP" and len(LocalCloud(api.home).describe(record.provider_cluster)) == 1
    late = json.loads(records[0]["body"])
    assert cluster_step(late, wiring_for(api)) == "already_done"
    assert len(live_nodes(api)) == 1


def test_a_second_launch_reuses_the_cluster_and_runs_setup_again_unless_fast(
    api: Settings, queues: QueueDriver
) -> None:
    launch_up(api, queues)
    wait_for(lambda: job_state(api, 1) == "SUCCEEDED")
    again = operations.launch_on_cluster(api, owner=OWNER, name="dev", task_text=DEV)
    fast = operations.launch_on_cluster(api, owner=OWNER, name="dev", task_text=DEV, fast=True)
    assert (again.action, fast.action) == ("reused", "reused")
    assert queues.receive("provision") == []  # no provisioning
    wait_for(lambda: job_state(api, fast.job.number) == "SUCCEEDED")
    assert (sandbox(api) / "setup-count").read_text().split() == ["setup-ran", "setup-ran"]


def test_launch_on_a_name_fails_over_when_the_first_place_has_no_capacity(
    api: Settings, queues: QueueDriver
) -> None:
    task = DEV.replace("cloud: aws", "cloud: aws\n  region: us-east-1")
    LocalCloud(api.home).set_capacity_rules({"no_capacity": ["aws/us-east-1/us-east-1a"]})
    operations.launch_on_cluster(api, owner=OWNER, name="dev", task_text=task)
    deliver(queues)
    record = wait_for(lambda: cluster(api).state == "UP" and cluster(api))
    assert record.zone != "us-east-1a"
    assert "us-east-1a" in record.blocklist


def test_verbs_refuse_what_cannot_be_done_with_clear_errors(api: Settings, queues: QueueDriver) -> None:
    with pytest.raises(UserError, match="not a valid cluster name"):
        operations.launch_on_cluster(api, owner=OWNER, name="9lives", task_text=DEV)
    with pytest.raises(UserError, match="may not start with 'job-'"):
        operations.launch_on_cluster(api, owner=OWNER, name="job-x", task_text=DEV)
    with pytest.raises(UserError, match="no cluster dev"):
        operations.exec_on_cluster(api, owner=OWNER, name="dev", command="true")
    spot = DEV.replace("cpus: 2+", "cpus: 2+\n  use_spot: true")
    operations.launch_on_cluster(api, owner=OWNER, name="spotty", task_text=spot)
    deliver(queues)
    wait_for(lambda: cluster(api, "spotty").state == "UP")
    with pytest.raises(UserError, match="stopping spot instances is not supported on AWS"):
        operations.stop_cluster(api, owner=OWNER, name="spotty")
    with pytest.raises(UserError, match="autostop cannot stop"):
        operations.set_autostop(api, owner=OWNER, name="spotty", idle_minutes=5)
    assert operations.set_autostop(api, owner=OWNER, name="spotty", idle_minutes=5, down=True).autostop_down
    gpu = "resources:\n  accelerators: A100:8\nrun: nvidia-smi\n"
    with pytest.raises(UserError, match="does not fit cluster spotty"):
        operations.exec_on_cluster(api, owner=OWNER, name="spotty", task_text=gpu)
    with pytest.raises(UserError, match="one task at a time"):
        operations.launch_on_cluster(api, owner=OWNER, name="dev", task_text="run: a\n---\nrun: b\n")
    # Another user's cluster of the same name is another cluster.
    assert ClusterStore(api).by_name("bob", "spotty") is None


def test_a_job_queued_while_the_nodes_launch_does_not_lose_the_launch(
    api: Settings, queues: QueueDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    operations.launch_on_cluster(api, owner=OWNER, name="dev", task_text=DEV)
    launch = LocalCloud.launch

    def launch_and_queue_meanwhile(self: LocalCloud, spec: Any) -> Any:
        nodes = launch(self, spec)
        operations.launch_on_cluster(api, owner=OWNER, name="dev", task_text=DEV, fast=True)  # INIT: queued
        return nodes

    monkeypatch.setattr(LocalCloud, "launch", launch_and_queue_meanwhile)
    deliver(queues)
    assert cluster(api).state == "UP"
    wait_for(lambda: job_state(api, 2) == "SUCCEEDED")
    assert (sandbox(api) / "setup-count").read_text() == "setup-ran\n"  # job 2 came with --fast


GPU_BOX = """
name: gpus
resources:
  cloud: aws
  accelerators: T4:4
run: echo up
"""
HALF = """
resources:
  accelerators: T4:2
run: |
  echo "start $(date +%s.%N)" >> ~/gpu-order
  sleep 2
  echo "end $(date +%s.%N)" >> ~/gpu-order
"""


def test_jobs_share_a_gpu_node_side_by_side_while_their_accelerators_fit(
    api: Settings, queues: QueueDriver
) -> None:
    operations.launch_on_cluster(api, owner=OWNER, name="gpus", task_text=GPU_BOX)
    deliver(queues)
    wait_for(lambda: job_state(api, 1, "gpus") == "SUCCEEDED")
    assert cluster(api, "gpus").accelerator_count == 4
    numbers = [
        operations.exec_on_cluster(api, owner=OWNER, name="gpus", task_text=HALF).number for _ in range(3)
    ]
    wait_for(
        lambda: (
            job_state(api, numbers[0], "gpus") == "RUNNING"
            and job_state(api, numbers[1], "gpus") == "RUNNING"
        )
    )
    assert job_state(api, numbers[2], "gpus") == "PENDING"  # 2 + 2 of 4 accelerators in use: the third waits
    wait_for(lambda: all(job_state(api, n, "gpus") == "SUCCEEDED" for n in numbers), timeout=40)
    events = [line.split() for line in (sandbox(api, "gpus") / "gpu-order").read_text().splitlines()]
    assert [kind for kind, _ in events][:2] == ["start", "start"]  # the first two overlapped
    env = operations.exec_on_cluster(
        api, owner=OWNER, name="gpus", command="echo $SKYPILOT_NUM_GPUS_PER_NODE"
    )
    wait_for(lambda: job_state(api, env.number, "gpus") == "SUCCEEDED")
    assert wait_for(lambda: log_of(api, env.number, "gpus")) == "4\n"


def test_a_two_node_cluster_runs_jobs_on_its_nodes_by_rank(api: Settings, queues: QueueDriver) -> None:
    task = DEV.replace("name: dev", "name: dev\nnum_nodes: 2")
    operations.launch_on_cluster(api, owner=OWNER, name="pair", task_text=task)
    deliver(queues)
    wait_for(lambda: job_state(api, 1, "pair") == "SUCCEEDED")
    both = "resources:\n  cpus: 1+\nnum_nodes: 2\nrun: echo rank $SKYPILOT_NODE_RANK of $SKYPILOT_NUM_NODES\n"
    job = operations.exec_on_cluster(api, owner=OWNER, name="pair", task_text=both)
    wait_for(lambda: job_state(api, job.number, "pair") == "SUCCEEDED")
    logs = [
        views.read_cluster_logs(api, owner=OWNER, name="pair", number=job.number, rank=r)["text"]
        for r in (0, 1)
    ]
    assert logs == ["rank 0 of 2\n", "rank 1 of 2\n"]
    one = operations.exec_on_cluster(api, owner=OWNER, name="pair", command="echo only $SKYPILOT_NODE_RANK")
    wait_for(lambda: job_state(api, one.number, "pair") == "SUCCEEDED")
    assert views.get_cluster_job(api, owner=OWNER, name="pair", number=one.number)["num_nodes"] == 1
    assert wait_for(lambda: log_of(api, one.number, "pair")) == "only 0\n"
    failing = operations.exec_on_cluster(api, owner=OWNER, name="pair", task_text=both.replace(
        "run: echo", "run: test $SKYPILOT_NODE_RANK = 0 && sleep 30; exit 3; echo"))  # fmt: skip
    wait_for(lambda: job_state(api, failing.number, "pair") == "FAILED")
    reason = views.get_cluster_job(api, owner=OWNER, name="pair", number=failing.number)["reason"]
    assert reason.startswith("node rank 1: run exited with 3")
    # Rank 0's part is stopped at its next poll: the queue goes on with the next job at once.
    after = operations.exec_on_cluster(api, owner=OWNER, name="pair", command="echo next")
    wait_for(lambda: job_state(api, after.number, "pair") == "SUCCEEDED", timeout=15)


def test_a_cluster_jobs_secrets_reach_its_run_and_no_log_or_table(
    api: Settings, queues: QueueDriver, stack: Settings
) -> None:
    from secret_leaks import holds, table_items_holding

    launch_up(api, queues)
    value = "hf_cluster_exec_value_91ab"
    digest = "import hashlib, os; print(hashlib.sha256(os.environ['HF_TOKEN'].encode()).hexdigest())"
    task = f'secrets:\n  HF_TOKEN: null\nrun: |\n  python3 -c "{digest}"\n'
    with pytest.raises(UserError, match="HF_TOKEN"):
        operations.exec_on_cluster(api, owner=OWNER, name="dev", task_text=task)
    job = operations.exec_on_cluster(
        api, owner=OWNER, name="dev", task_text=task, secrets={"HF_TOKEN": value}
    )
    wait_for(lambda: job_state(api, job.number) in ("SUCCEEDED", "FAILED"))
    assert job_state(api, job.number) == "SUCCEEDED", log_of(api, job.number)
    text = wait_for(lambda: log_of(api, job.number))
    assert hashlib.sha256(value.encode()).hexdigest() in text and not holds(text, value)
    assert table_items_holding(str(stack.endpoint_url), stack.region, stack.prefix, value) == []
