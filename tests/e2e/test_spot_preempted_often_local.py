"""Preemptions never fail a job, as a user sees it on the local runtime: a spot job preempted 11 times (more
than the old limit of 10) with `skyless local preempt` is recovered each time and finishes; the local cloud
never has two live clusters of the job, checked at every state change the test sees."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from local_runtime.moto_endpoint import free_port
from shared.clouds.local import LocalCloud

SKYLESS = Path(sys.executable).with_name("skyless")
PREEMPTIONS = 11
TASK = """
name: many-preemptions
resources:
  cpus: 1+
  use_spot: true
run: |
  echo "attempt $SKYLESS_ATTEMPT running"
  while [ ! -f "$FINISH" ]; do sleep 0.2; done
  echo finished
"""


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    home = tmp_path_factory.mktemp("skyless-home")
    env = {**os.environ, "SKYLESS_HOME": str(home), "SKYLESS_LOG_FLUSH_SECONDS": "0.5", "COLUMNS": "200"}
    for name in ("AWS_ENDPOINT_URL", "SKYLESS_API_URL", "SKYLESS_PREFIX", "SKYLESS_API_KEY"):
        env.pop(name, None)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(SKYLESS), *args], env=env, capture_output=True, text=True, timeout=120)

    up = cli("local", "up", "--moto-port", str(free_port()), "--api-port", str(free_port()))
    assert up.returncode == 0, up.stdout + up.stderr
    info = json.loads((home / "local" / "runtime.json").read_text())
    api = httpx.Client(base_url=info["api_url"], headers={"Authorization": f"Bearer {info['api_key']}"})
    try:
        yield {"home": home, "cli": cli, "api": api}
    finally:
        cli("local", "down")


def test_a_spot_job_preempted_11_times_on_the_local_runtime_finishes(runtime, tmp_path: Path):
    api, cli, cloud = runtime["api"], runtime["cli"], LocalCloud(runtime["home"])
    finish = tmp_path / "finish"
    seen: list[tuple[str, int, int]] = []  # (state, attempt, live clusters) at each change

    def wait(job_id: str, condition: Any, timeout: float = 90) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = api.get(f"/jobs/{job_id}").json()
            live = {n.cluster_id for n in cloud.list_job(job_id) if n.state == "running"}
            if not seen or seen[-1][:2] != (job["state"], job["attempt"]):
                seen.append((job["state"], job["attempt"], len(live)))
            assert len(live) <= 1, f"two live clusters at once: {live} ({job['state']})"
            if condition(job):
                return job
            time.sleep(0.1)
        raise AssertionError(f"{job_id} never got there: {seen}")

    task = tmp_path / "task.yaml"
    task.write_text(TASK)
    launch = cli("launch", str(task), "--detach", "--env", f"FINISH={finish}")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    job_id = re.search(r"Job (job-\w+) submitted", launch.stdout).group(1)  # type: ignore[union-attr]
    for attempt in range(PREEMPTIONS):
        wait(job_id, lambda j, a=attempt: j["state"] == "RUNNING" and j["attempt"] == a)
        preempt = cli("local", "preempt", job_id, "--grace", "0.2")
        assert preempt.returncode == 0, preempt.stdout + preempt.stderr
    wait(job_id, lambda j: j["state"] == "RUNNING" and j["attempt"] == PREEMPTIONS)
    finish.write_text("done")
    final = wait(job_id, lambda j: j["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"))
    assert final["state"] == "SUCCEEDED", (final.get("reason"), seen)
    assert final["recoveries"] == PREEMPTIONS and final["attempt"] == PREEMPTIONS
    assert all(live <= 1 for _, _, live in seen), seen
