"""The agent's metadata-service preemption watchers, as real agent processes against local servers that speak
GCP's metadata API (`instance/preempted`, long-polled with wait_for_change) and Azure's Scheduled Events
(`Preempt`, approved with StartRequests once the task has let go). AWS's watcher: tests/test_agent.py."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.azure_metadata import FakeAzureMetadata, start_fake_azure_metadata
from fakes.gcp_metadata import FakeGcpMetadata, start_fake_gcp_metadata
from test_agent import TOKEN, AgentProtocolServer

PROJECT_ROOT = Path(__file__).resolve().parents[2]
VM_NAME = "skyless-job-0123abcd4567-0-000"
# The task checkpoints on SIGTERM, taking a moment, then exits: what a SkyPilot task does with the notice.
CHECKPOINTING_TASK = (
    "trap 'sleep 0.5; echo saved > ../checkpoint; exit 0' TERM; echo started; while :; do sleep 0.1; done"
)


def task_started(home: Path) -> bool:
    """The task has set its SIGTERM trap (it says `started` after): a notice before that cannot checkpoint,
    on a SkyPilot node as here, since ~/.bashrc is read before the task's first command."""
    log = home / "skyless_task.log"
    return log.exists() and "started" in log.read_text()


@pytest.fixture
def gcp_metadata() -> Iterator[FakeGcpMetadata]:
    fake, server = start_fake_gcp_metadata()
    try:
        yield fake
    finally:
        fake.release()
        server.stop()


@pytest.fixture
def azure_metadata() -> Iterator[FakeAzureMetadata]:
    fake, server = start_fake_azure_metadata()
    try:
        yield fake
    finally:
        server.stop()


def config(run: str) -> dict[str, Any]:
    return {
        "rank": 0, "num_nodes": 1, "node_ips": ["10.0.0.1"], "gpus_per_node": 0, "task_id": "t",
        "setup": None, "run": run, "envs": {}, "setup_env": {}, "run_env": {"SKYPILOT_NODE_RANK": "0"},
        "workdir_url": None, "file_mounts": [], "log_upload": None, "heartbeat_seconds": 1,
    }  # fmt: skip


@pytest.fixture
def start_agent() -> Iterator[Any]:
    """Starts agents as real processes; any still alive at the end is killed (nothing outlives a test)."""
    started: list[subprocess.Popen[bytes]] = []

    def start(api: AgentProtocolServer, home: Path, **env: str) -> subprocess.Popen[bytes]:
        home.mkdir(parents=True, exist_ok=True)
        environment = {
            **os.environ,
            "PYTHONPATH": str(PROJECT_ROOT),
            "SKYLESS_API_URL": api.url, "SKYLESS_JOB_ID": "j-" + uuid.uuid4().hex[:6],
            "SKYLESS_CLUSTER_ID": "c", "SKYLESS_INSTANCE_ID": VM_NAME, "SKYLESS_BOOT_TOKEN": TOKEN,
            "SKYLESS_NODE_IP": "10.0.0.1",
            **env,
        }  # fmt: skip
        command = [sys.executable, "-m", "node_agent.agent"]
        pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        process = subprocess.Popen(command, cwd=home, env=environment, start_new_session=True, **pipes)
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        process.communicate(timeout=30)


def wait_for(predicate: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def preempting(api: AgentProtocolServer) -> list[dict[str, Any]]:
    return [s for s in api.statuses if s["phase"] == "preempting"]


# -- GCP ---------------------------------------------------------------------------------------


def test_gcp_preemption_is_seen_at_once_through_the_long_poll_and_the_task_checkpoints(
    gcp_metadata: FakeGcpMetadata, tmp_path: Path, start_agent: Any
) -> None:
    home = tmp_path / "node"
    with AgentProtocolServer(config(CHECKPOINTING_TASK), not_ready_times=0) as api:
        api.fail_next_status = 0
        # A poll interval far longer than the test: only the held wait_for_change request can see the change.
        timing = {"SKYLESS_METADATA_POLL_SECONDS": "300", "SKYLESS_METADATA_WAIT_SECONDS": "30"}
        agent = start_agent(
            api, home, SKYLESS_CLOUD="gcp", SKYLESS_GCP_METADATA_URL=gcp_metadata.url, **timing
        )
        wait_for(lambda: "running" in api.phases())
        wait_for(lambda: task_started(home))
        wait_for(lambda: any(r.get("wait_for_change") == "true" for r in gcp_metadata.requests))
        noticed_from = time.monotonic()
        gcp_metadata.preempt()
        wait_for(lambda: preempting(api), timeout=10)
        seen_after = time.monotonic() - noticed_from
        agent.communicate(timeout=30)

    assert seen_after < 5  # at once, not at the next 300 s poll
    assert preempting(api)[0]["message"] == "instance/preempted=TRUE"
    assert (home / "checkpoint").read_text().strip() == "saved"
    assert api.phases() == ["setting_up", "running", "preempting"]  # no result: the node was taken away
    assert gcp_metadata.refused == 0  # every request carried Metadata-Flavor: Google
    first, held = gcp_metadata.requests[0], [r for r in gcp_metadata.requests if r.get("wait_for_change")]
    assert first == {}  # the current value first (a VM preempted before the agent looked is seen too)
    assert held and all(r["last_etag"] and r["timeout_sec"] == "30" for r in held)


def test_gcp_vm_already_preempted_when_the_agent_starts_never_runs_the_task(
    gcp_metadata: FakeGcpMetadata, tmp_path: Path, start_agent: Any
) -> None:
    gcp_metadata.preempt()
    with AgentProtocolServer(config("echo should-not-run > ../ran"), not_ready_times=3) as api:
        api.fail_next_status = 0
        agent = start_agent(
            api, tmp_path / "node", SKYLESS_CLOUD="gcp", SKYLESS_GCP_METADATA_URL=gcp_metadata.url
        )
        agent.communicate(timeout=30)
    # Before its config the agent holds only the boot token, which opens nothing but the config: it says
    # nothing (the cloud's own preemption event tells the control plane), and the task never starts.
    assert api.phases() == []
    assert not (tmp_path / "node" / "ran").exists()


def test_gcp_metadata_server_unreachable_leaves_the_task_running(tmp_path: Path, start_agent: Any) -> None:
    with AgentProtocolServer(config("sleep 1; echo done"), not_ready_times=0) as api:
        api.fail_next_status = 0
        unreachable = {
            "SKYLESS_GCP_METADATA_URL": "http://127.0.0.1:9",
            "SKYLESS_METADATA_POLL_SECONDS": "0.2",
        }
        agent = start_agent(api, tmp_path / "node", SKYLESS_CLOUD="gcp", **unreachable)
        agent.communicate(timeout=30)
    assert api.phases() == ["setting_up", "running", "succeeded"]


# -- Azure -------------------------------------------------------------------------------------


def test_azure_preempt_event_for_this_vm_stops_the_task_then_approves_the_event(
    azure_metadata: FakeAzureMetadata, tmp_path: Path, start_agent: Any
) -> None:
    home = tmp_path / "node"
    checkpoint = home / "checkpoint"
    approved_after_checkpoint: list[bool] = []
    azure_metadata.on_approve = lambda _id: approved_after_checkpoint.append(checkpoint.exists())
    with AgentProtocolServer(config(CHECKPOINTING_TASK), not_ready_times=0) as api:
        api.fail_next_status = 0
        fake = {"SKYLESS_AZURE_METADATA_URL": azure_metadata.url, "SKYLESS_METADATA_POLL_SECONDS": "0.2"}
        agent = start_agent(api, home, SKYLESS_CLOUD="azure", **fake)
        wait_for(lambda: "running" in api.phases())
        wait_for(lambda: task_started(home))
        # Events about other VMs of the set, or of another kind, are not this node's preemption.
        azure_metadata.schedule("Preempt", ["another-vm"])
        azure_metadata.schedule("Freeze", [VM_NAME])
        time.sleep(1.0)
        assert not preempting(api) and agent.poll() is None
        event_id = azure_metadata.schedule("Preempt", [VM_NAME])
        agent.communicate(timeout=30)

    notice = json.loads(preempting(api)[0]["message"])
    assert (notice["EventId"], notice["EventType"]) == (event_id, "Preempt")
    assert checkpoint.read_text().strip() == "saved"
    assert azure_metadata.approvals == [event_id]  # approved once, and only ours
    assert approved_after_checkpoint == [True]  # only after the task had checkpointed and exited
    assert azure_metadata.refused == 0  # every request carried Metadata: true and the api-version
    assert api.phases() == ["setting_up", "running", "preempting"]


def test_azure_without_scheduled_events_runs_the_task_to_the_end(
    azure_metadata: FakeAzureMetadata, tmp_path: Path, start_agent: Any
) -> None:
    with AgentProtocolServer(config("sleep 1; echo done"), not_ready_times=0) as api:
        api.fail_next_status = 0
        fake = {"SKYLESS_AZURE_METADATA_URL": azure_metadata.url, "SKYLESS_METADATA_POLL_SECONDS": "0.2"}
        agent = start_agent(api, tmp_path / "node", SKYLESS_CLOUD="azure", **fake)
        agent.communicate(timeout=30)
    assert api.phases() == ["setting_up", "running", "succeeded"]
    assert azure_metadata.approvals == [] and azure_metadata.refused == 0
