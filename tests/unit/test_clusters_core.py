"""The pure core of named clusters: the states' tables, the queue policy, names, which clouds can stop, a
task's autostop, the ~/.ssh/config entries, and how an agent counts open shells."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli.ssh_config import host_block, with_host, without_host
from node_agent.cluster_agent import count_session_files, count_ssh_connections
from shared.clusters.autostop import autostop_of_task
from shared.clusters.names import check_cluster_name, is_cluster_key, new_cluster_key, provider_cluster_id
from shared.clusters.queue_policy import Capacity, QueuedJob, fits_at_all, jobs_to_start
from shared.clusters.states import (
    CLUSTER_MOVES,
    JOB_MOVES,
    ClusterJobState,
    ClusterState,
    IllegalClusterMove,
    can_move_cluster,
    cluster_transition,
    job_transition,
)
from shared.clusters.stopping import cloud_stop_refusal, stop_refusal
from shared.errors import UserError
from shared.task import load_pipeline

C, J = ClusterState, ClusterJobState


def test_cluster_moves_reach_terminated_only_through_terminating_and_nothing_leaves_it() -> None:
    assert {(a, b) for a, b, _ in CLUSTER_MOVES if b == C.TERMINATED} == {(C.TERMINATING, C.TERMINATED)}
    assert not [m for m in CLUSTER_MOVES if m[0] == C.TERMINATED]
    for state in (C.INIT, C.UP, C.STOPPING, C.STOPPED):
        assert can_move_cluster(state, C.TERMINATING)
    assert not can_move_cluster(C.STOPPED, C.UP)  # a start goes through INIT
    with pytest.raises(IllegalClusterMove):
        cluster_transition(C.UP, C.STOPPED)


def test_job_moves_end_in_terminal_states_and_exec_skips_setup() -> None:
    assert job_transition(J.PENDING, J.RUNNING) == J.RUNNING
    assert job_transition(J.SETTING_UP, J.FAILED_SETUP) == J.FAILED_SETUP
    with pytest.raises(IllegalClusterMove):
        job_transition(J.RUNNING, J.FAILED_SETUP)
    terminal = {J.SUCCEEDED, J.FAILED, J.FAILED_SETUP, J.CANCELLED}
    assert not [m for m in JOB_MOVES if m[0] in terminal]


def test_plain_jobs_run_one_after_another() -> None:
    cpu = Capacity(num_nodes=1, gpus_per_node=0)
    queue = [QueuedJob(1, False, 1, 0), QueuedJob(2, False, 1, 0)]
    assert jobs_to_start(queue, cpu) == [1]
    assert jobs_to_start([QueuedJob(1, True, 1, 0), QueuedJob(2, False, 1, 0)], cpu) == []


def test_accelerator_jobs_share_a_node_while_their_counts_fit() -> None:
    gpus = Capacity(num_nodes=1, gpus_per_node=8)
    queue = [QueuedJob(1, True, 1, 4), QueuedJob(2, False, 1, 2), QueuedJob(3, False, 1, 4)]
    assert jobs_to_start(queue, gpus) == [2]  # 4 + 2 fit; 3 waits (FIFO: nothing passes it)
    assert jobs_to_start([QueuedJob(1, False, 1, 0), QueuedJob(2, False, 1, 2)], gpus) == [1]  # whole node


def test_a_job_that_can_never_fit_says_why() -> None:
    assert "needs 2 nodes" in (fits_at_all(QueuedJob(1, False, 2, 0), Capacity(1, 0)) or "")
    assert "cluster's nodes have no" in (fits_at_all(QueuedJob(1, False, 1, 1), Capacity(1, 0)) or "")


@given(
    st.lists(st.tuples(st.booleans(), st.integers(1, 2), st.sampled_from([0, 1, 2, 4, 8])), max_size=8),
    st.integers(1, 3),
    st.sampled_from([0, 4, 8]),
)
def test_what_starts_never_overfills_a_node(jobs: list[tuple[bool, int, int]], nodes: int, gpus: int) -> None:
    capacity = Capacity(nodes, gpus)
    queue = [QueuedJob(n, started, size, need) for n, (started, size, need) in enumerate(jobs, 1)]
    if not _within(capacity, [j for j in queue if j.started]):
        return  # the running set itself is impossible
    starting = set(jobs_to_start(queue, capacity))
    assert _within(capacity, [j for j in queue if j.started or j.number in starting])
    waiting = [j.number for j in queue if not j.started]
    assert sorted(starting) == waiting[: len(starting)]  # FIFO: a prefix of the waiting jobs


def _within(capacity: Capacity, running: list[QueuedJob]) -> bool:
    for rank in range(capacity.num_nodes):
        here = [j for j in running if rank < j.num_nodes]
        whole = [j for j in here if j.gpus <= 0 or capacity.gpus_per_node <= 0]
        if whole and len(here) > 1:
            return False
        if not whole and sum(j.gpus for j in here) > capacity.gpus_per_node:
            return False
        if any(j.num_nodes > capacity.num_nodes for j in here):
            return False
    return True


def test_cluster_names_follow_skypilots_rule_and_never_look_like_job_ids() -> None:
    assert check_cluster_name("dev-1.a_b") == "dev-1.a_b"
    for bad in ("", "1dev", "dev-", "dev name", "x" * 64, "job-abc", "dev#1"):
        with pytest.raises(UserError):
            check_cluster_name(bad)
    key = new_cluster_key()
    assert is_cluster_key(key) and not is_cluster_key("job-123") and provider_cluster_id(key, 2) == f"{key}-2"


def test_which_clouds_can_stop() -> None:
    assert cloud_stop_refusal("lambda", False) == "Lambda Cloud does not support stopping instances"
    assert "spot instances is not supported on AWS" in (cloud_stop_refusal("aws", True) or "")
    assert cloud_stop_refusal("gcp", True) is None and cloud_stop_refusal("aws", False) is None

    class NoStop:
        name = "runpod"

    assert (
        stop_refusal("runpod", False, NoStop()) == "skyless's runpod provider cannot stop and start VMs yet"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("true", (5, False)),
        ("false", (-1, False)),
        ("10", (10, False)),
        ("'2h'", (120, False)),
        ("{idle_minutes: 3, down: true}", (3, True)),
        ("{down: true}", (5, True)),
    ],
)
def test_resources_autostop_is_read_as_skypilot_reads_it(value: str, expected: tuple[int, bool]) -> None:
    task = load_pipeline(f"resources:\n  autostop: {value}\nrun: x\n").tasks[0]
    assert autostop_of_task(task) == expected
    assert autostop_of_task(load_pipeline("run: x\n").tasks[0]) is None


def test_ssh_config_entries_are_added_replaced_and_removed_leaving_the_rest() -> None:
    mine = "Host other\n  HostName 10.0.0.1\n"
    first = with_host(mine, "dev", host_block("dev", "1.2.3.4", "ubuntu", Path("/k")))
    assert first.startswith("# >>> skyless cluster dev >>>") and first.endswith(mine)
    second = with_host(first, "dev", host_block("dev", "5.6.7.8", "ubuntu", Path("/k")))
    assert "5.6.7.8" in second and "1.2.3.4" not in second and second.count("Host dev") == 1
    assert without_host(second, "dev") == "\n" + mine
    assert without_host(mine, "dev") == mine


def test_an_agent_counts_ssh_connections_and_live_shell_files(tmp_path: Path) -> None:
    table = tmp_path / "tcp"
    table.write_text(
        "  sl  local_address rem_address   st\n"
        "   0: 0100007F:0016 0100007F:D431 01 0 0\n"  # established to :22
        "   1: 00000000:0016 00000000:0000 0A 0 0\n"  # listening
        "   2: 0100007F:1F90 0100007F:D432 01 0 0\n"  # established to :8080
    )
    assert count_ssh_connections((str(table), str(tmp_path / "missing"))) == 1
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    (sessions / str(os.getpid())).write_text("")
    (sessions / "999999999").write_text("")  # a shell long gone: forgotten
    assert count_session_files(sessions) == 1
    assert not (sessions / "999999999").exists()


def test_a_cluster_nodes_user_data_fetches_both_agent_files_and_comes_back_at_every_boot() -> None:
    import subprocess

    from node_agent.user_data import render_user_data

    env = {"SKYLESS_AGENT_MODE": "cluster", "SKYLESS_CLUSTER_KEY": "cl-0123456789ab"}
    script = render_user_data(api_url="https://api.example.com/", job_id="cl-0123456789ab",
                              cluster_id="cl-0123456789ab-0", boot_token="boot.0.1.x", cloud="aws",
                              run_as="ubuntu", extra_env=env)  # fmt: skip
    assert subprocess.run(["bash", "-n"], input=script.encode(), check=False).returncode == 0
    for name in ("agent.py", "cluster_agent.py"):
        assert f"https://api.example.com/node-agent/{name} -o /opt/skyless/{name}" in script
    assert "per-boot" in script and "export SKYLESS_AGENT_MODE=cluster" in script
    assert "base64 -d" not in script and len(script) < 2048  # no agent inside: far below EC2's 16 KB


def test_the_cluster_agent_is_python_3_8_and_stdlib_only_beside_agent_py() -> None:
    import ast
    import sys

    source = (Path(__file__).resolve().parents[2] / "node_agent" / "cluster_agent.py").read_text()
    tree = ast.parse(source, feature_version=(3, 8))
    imported = {
        (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported - set(sys.stdlib_module_names) - {"__future__"} == {"node_agent", "agent"}
