"""A deadline job on the local runtime as a user runs it: `skyless local up` with a shortened clock (a
launch costs 8 s of progress, or what a node takes to boot on this machine if that is more, measured first;
the control plane acts within 5 s), the job through the HTTP API, and its spot node preempted with
`skyless local preempt` every time it starts. The policy moves the job to on-demand while the deadline still
allows it, and the task runs to its end before the deadline. And a job on on-demand whose policy wants spot
back while the local cloud refuses spot keeps its on-demand cluster running (the local cloud's live nodes
checked at every change), until spot is back and the job moves to it."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from test_end_to_end_local import TERMINAL, Runtime

from shared.clouds.local import LocalCloud

WORK_SECONDS = 10
TASK = f"""
name: deadline-e2e
resources:
  cloud: aws
  cpus: 2+
  use_spot: true
run: |
  echo started
  sleep {WORK_SECONDS}
  echo finished
"""
OVERHEAD = 8  # seconds a launch costs before the task makes progress, unless a node boots slower here
SHORT_CLOCK = {
    "SKYLESS_RESTART_OVERHEAD_SECONDS": str(OVERHEAD),
    "SKYLESS_DEADLINE_REACTION_SECONDS": "5",
    "SKYLESS_DEADLINE_RETRY_SECONDS": "5",
    # probes every few seconds: no hourly limit here (tests/integration/test_spot_probes_visible.py has it)
    "SKYLESS_SPOT_REFUSALS_PER_HOUR": "0",
}


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    """The runtime with the short clock, its restart overhead at least what a node takes to boot here: work
    is counted from a launch plus the overhead, so a slower boot would count work the task never did (and,
    past the job's 10 s estimate, send it to on-demand at its first preemption)."""
    rt = Runtime(tmp_path_factory.mktemp("skyless-home"))
    rt.env.update(SHORT_CLOCK)
    rt.up()
    overhead = math.ceil(1.25 * _boot_seconds(rt))
    if overhead > OVERHEAD:
        rt.cli("local", "down")
        rt = Runtime(tmp_path_factory.mktemp("skyless-home"))
        rt.env.update({**SHORT_CLOCK, "SKYLESS_RESTART_OVERHEAD_SECONDS": str(overhead)})
        rt.up()
    yield rt
    rt.cli("local", "down")


def _boot_seconds(rt: Runtime) -> float:
    """From a node's launch to its task running, for a plain on-demand task on this machine."""
    task = "name: boot\nresources:\n  cloud: aws\n  cpus: 2+\nrun: echo booted\n"
    body = {"task": task, "filename": "boot.yaml"}
    answer = rt.api.post("/jobs", json=body)
    assert answer.status_code == 201, answer.text
    job = rt.wait(answer.json()["job_id"], lambda j: j["state"] in TERMINAL, timeout=120)
    assert job["state"] == "SUCCEEDED", job.get("reason")
    at = {e["state"]: _epoch(e["time"]) for e in job["timeline"] if e["kind"] == "state"}
    return at["RUNNING"] - at["SETTING_UP"]


def _overhead(rt: Runtime) -> int:
    return int(rt.env["SKYLESS_RESTART_OVERHEAD_SECONDS"])


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _running_or_done(job: dict[str, Any]) -> bool:
    return job["state"] == "RUNNING" or job["state"] in TERMINAL


def test_a_deadline_job_whose_spot_keeps_being_preempted_finishes_on_demand_before_its_deadline(
    runtime: Runtime,
):
    deadline = WORK_SECONDS + 4 * _overhead(runtime) + 18  # 60 s: room for two spot launches and on-demand
    body = {
        "task": TASK,
        "filename": "deadline.yaml",
        "deadline": f"{deadline}s",
        "hours": WORK_SECONDS / 3600,
    }
    answer = runtime.api.post("/jobs", json=body)
    assert answer.status_code == 201, answer.text
    job_id = answer.json()["job_id"]
    deadline_at = _epoch(runtime.job(job_id)["deadline"]["deadline"])

    preemptions = 0
    job = runtime.wait(job_id, _running_or_done, timeout=60)
    while job["state"] == "RUNNING" and job["use_spot"]:
        assert job["deadline"]["market"] == "spot"
        attempt = job["attempt"]
        preempted = runtime.cli("local", "preempt", job_id, "--grace", "1")
        assert preempted.returncode == 0, preempted.stdout + preempted.stderr
        preemptions += 1
        job = runtime.wait(
            job_id,
            lambda j, a=attempt: j["state"] in TERMINAL or (j["attempt"] > a and j["state"] == "RUNNING"),
        )

    assert job["state"] == "RUNNING", job.get("reason")
    assert preemptions >= 2, "spot should have been tried again while the deadline allowed it"
    assert job["deadline"]["market"] == "on_demand" and job["use_spot"] is False
    switched_at = time.time()
    assert deadline_at - switched_at >= WORK_SECONDS  # the switch came with the work's time still left

    final = runtime.wait(job_id, lambda j: j["state"] in TERMINAL, timeout=90)
    assert final["state"] == "SUCCEEDED", final.get("reason")
    succeeded = [e for e in final["timeline"] if e.get("state") == "SUCCEEDED" and e["kind"] == "state"]
    assert _epoch(succeeded[0]["time"]) <= deadline_at
    assert "finished" in runtime.logs(job_id, 0)
    states = [e["state"] for e in final["timeline"] if e["kind"] == "state"]
    assert states.count("RECOVERING") == preemptions


def test_a_deadline_job_on_demand_keeps_its_cluster_while_spot_is_refused_and_moves_once_spot_is_back(
    runtime: Runtime,
):
    cloud = LocalCloud(runtime.home)
    cloud.set_capacity_rules({"no_spot_capacity": ["*"]})
    task = TASK.replace(f"sleep {WORK_SECONDS}", "sleep 90")  # little slack: on-demand at once
    deadline = 300 + _overhead(runtime) - OVERHEAD  # the same slack past a launch, whatever the boot
    body = {"task": task, "filename": "deadline.yaml", "deadline": f"{deadline}s", "hours": 90 / 3600}
    answer = runtime.api.post("/jobs", json=body)
    assert answer.status_code == 201, answer.text
    job_id = answer.json()["job_id"]
    seen: list[tuple[str, int, frozenset[str]]] = []  # (state, attempt, live clusters) at each change
    stayed: set[str] = set()
    refused = True
    whys: list[str] = []

    def watch(condition: Any, timeout: float = 120) -> dict[str, Any]:
        def check(job: dict[str, Any]) -> bool:
            live = frozenset(n.cluster_id for n in cloud.list_job(job_id) if n.state == "running")
            if not seen or seen[-1] != (job["state"], job["attempt"], live):
                seen.append((job["state"], job["attempt"], live))
            assert len(live) <= 2, seen  # the running cluster, and at most one more, booting
            if refused and job["state"] == "RUNNING":
                assert live == {f"{job_id}-0"}, seen  # spot refused: the on-demand cluster, untouched
            earlier = {c for c in live if int(c.rsplit("-", 1)[1]) < job["attempt"]}
            # the move fences the earlier attempt while the job is RECOVERING, before the new one starts
            assert not earlier or job["state"] == "RECOVERING", seen
            why = (job.get("deadline") or {}).get("why") or ""
            whys.append(why) if not whys or whys[-1] != why else None
            if why.startswith("stayed on"):
                stayed.add(why)
            return bool(condition(job))

        try:
            return runtime.wait(job_id, check, timeout=timeout)
        except AssertionError as error:
            raise AssertionError(f"{seen}\n{whys}") from error

    job = watch(lambda j: j["state"] == "RUNNING")
    assert job["use_spot"] is False and job["attempt"] == 0
    job = watch(lambda j: len(stayed) >= 2 and any(line.startswith("spot in") for line in j["spot_probes"]))
    assert job["attempt"] == 0 and job["state"] == "RUNNING" and job["use_spot"] is False

    refused = False
    cloud.set_capacity_rules({})  # spot is back: the new cluster may boot beside the running one
    moved = watch(lambda j: j["state"] in TERMINAL or (j["attempt"] > 0 and j["state"] == "RUNNING"))
    assert moved["state"] == "RUNNING" and moved["use_spot"] is True, moved.get("reason")
    final = watch(lambda j: j["state"] in TERMINAL, timeout=150)
    assert final["state"] == "SUCCEEDED", (final.get("reason"), seen)
    assert not any(n.state == "running" for n in cloud.list_job(job_id))
    attempts = [a for _, a, _ in seen]
    assert attempts == sorted(attempts) and max(attempts) >= 1, seen
