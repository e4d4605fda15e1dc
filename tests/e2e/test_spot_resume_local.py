"""The proof of issue 10 (storage and identity), as a user runs it on the local runtime: examples/spot.yaml
checkpoints every step to a bucket mounted at /checkpoint, is preempted once during `run` and once during
`setup`, and finishes with a step count that shows it resumed each time; every attempt's log names the
same SKYPILOT_TASK_ID, `skyless logs` separates the attempts, the bucket (persistent: false) is gone at the
end, and the local cloud never has two live clusters of the job, sampled all along and at every state
change the test sees.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from local_runtime.moto_endpoint import free_port
from shared.clouds.local import LocalCloud

ROOT = Path(__file__).resolve().parents[2]
SKYLESS = Path(sys.executable).with_name("skyless")
BUCKET = "skyless-spot-counter-ckpt"


class LiveClusterWatch:
    """Samples the local cloud's live nodes every 20 ms; remembers the most clusters alive at once."""

    def __init__(self, home: Path) -> None:
        self.cloud = LocalCloud(home)
        self.most: set[str] = set()
        self.seen: set[str] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def live(self) -> set[str]:
        return {n.cluster_id for n in self.cloud.list_owned() if n.state == "running"}

    def _watch(self) -> None:
        while not self.stop.wait(0.02):
            live = self.live()
            self.seen |= live
            if len(live) > len(self.most):
                self.most = live


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    home = tmp_path_factory.mktemp("skyless-home")
    env = {**os.environ, "SKYLESS_HOME": str(home), "SKYLESS_LOG_FLUSH_SECONDS": "0.5",
           "SKYLESS_STORAGE_SYNC_SECONDS": "1", "COLUMNS": "200"}  # fmt: skip
    for name in ("AWS_ENDPOINT_URL", "SKYLESS_API_URL", "SKYLESS_PREFIX", "SKYLESS_API_KEY"):
        env.pop(name, None)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(SKYLESS), *args], env=env, capture_output=True, text=True, timeout=120)

    up = cli("local", "up", "--moto-port", str(free_port()), "--api-port", str(free_port()))
    assert up.returncode == 0, up.stdout + up.stderr
    info = json.loads((home / "local" / "runtime.json").read_text())
    api = httpx.Client(base_url=info["api_url"], headers={"Authorization": f"Bearer {info['api_key']}"})
    try:
        yield {"home": home, "cli": cli, "api": api, "info": info}
    finally:
        cli("local", "down")


def _job(api: httpx.Client, job_id: str) -> dict[str, Any]:
    answer = api.get(f"/jobs/{job_id}")
    assert answer.status_code == 200, answer.text
    return answer.json()


def _log(api: httpx.Client, job_id: str) -> str:
    return api.get(f"/jobs/{job_id}/logs", params={"rank": 0}).json()["text"]


def test_spot_example_resumes_from_its_bucket_after_preemptions_in_run_and_in_setup(runtime):
    api, cli, home = runtime["api"], runtime["cli"], runtime["home"]
    watch = LiveClusterWatch(home)
    watch.thread.start()
    states_seen: list[tuple[str, int, int]] = []  # (state, attempt, live clusters) at each change

    def wait(job_id: str, condition: Any, timeout: float = 120) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job, live = _job(api, job_id), watch.live()
            if not states_seen or states_seen[-1][:2] != (job["state"], job["attempt"]):
                states_seen.append((job["state"], job["attempt"], len(live)))
            assert len(live) <= 1, f"two live clusters at once: {live} ({job['state']})"
            if condition(job):
                return job
            time.sleep(0.2)
        raise AssertionError(f"{job_id} never got there: {states_seen}\n{_log(api, job_id)}")

    launch = cli("launch", str(ROOT / "examples" / "spot.yaml"), "--detach",
                 "--env", "STEP_SECONDS=1", "--env", "SETUP_SECONDS=8")  # fmt: skip
    assert launch.returncode == 0, launch.stdout + launch.stderr
    job_id = re.search(r"Job (job-\w+) submitted", launch.stdout).group(1)

    # 1. preempted while running, after a few checkpointed steps
    wait(job_id, lambda j: j["state"] == "RUNNING" and "step 3/12" in _log(api, job_id))
    preempt = cli("local", "preempt", job_id, "--grace", "5")
    assert preempt.returncode == 0, preempt.stdout + preempt.stderr
    last_step_before = max(int(s) for s in re.findall(r"step (\d+)/12", _log(api, job_id)))

    # 2. preempted during the next attempt's setup
    in_setup = lambda j: j["attempt"] >= 1 and j["state"] == "SETTING_UP" and "setup #2" in _log(api, job_id)  # noqa: E731
    wait(job_id, in_setup)
    preempt = cli("local", "preempt", job_id, "--grace", "5")
    assert preempt.returncode == 0, preempt.stdout + preempt.stderr

    final = wait(job_id, lambda j: j["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"), timeout=180)
    watch.stop.set()
    watch.thread.join()
    text = _log(api, job_id)
    assert final["state"] == "SUCCEEDED", text
    assert final["recoveries"] == 2 and final["attempt"] == 2, final

    # It resumed: the last attempt started where the first left off, and setup ran once per attempt.
    starts = [int(s) for s in re.findall(r"starting at step (\d+)", text)]
    assert starts[0] == 0 and starts[-1] >= last_step_before >= 3, text
    assert "finished: 12 steps after 3 setup(s)" in text, text
    steps = [int(s) for s in re.findall(r"step (\d+)/12", text)]
    assert sorted(set(steps)) == list(range(1, 13)) and len(steps) < 12 + 3, text  # nothing redone twice

    # One task id in every attempt's log; the attempts are told apart, and separated in `skyless logs`.
    task_ids = set(re.findall(r"task (sky-managed-\S+), attempt", text))
    assert len(task_ids) == 1 and task_ids.pop().endswith(f"_{job_id}-0"), text  # SkyPilot's managed-job form
    assert set(re.findall(r"attempt (\d): starting", text)) == {"0", "2"}
    assert re.findall(r"setup #\d \(attempt (\d)\)", text) == ["0", "1", "2"]
    logs = cli("logs", job_id)
    assert logs.returncode == 0, logs.stderr
    assert re.search(r"^----- attempt 1: \S+ \S+ \(spot\) -----$", logs.stdout, re.M), logs.stdout
    assert (
        logs.stdout.index("----- attempt 1")
        < logs.stdout.index("setup #2")
        < logs.stdout.index("----- attempt 2")
    )

    # Never two live clusters; three attempts' clusters came and went.
    assert len(watch.most) <= 1 and len(watch.seen) == 3, (watch.most, watch.seen)
    assert all(live <= 1 for _, _, live in states_seen), states_seen

    # The bucket was made for this job and, not persistent, deleted at its end.
    notes = [e["message"] for e in final["timeline"] if e["kind"] == "storage"]
    assert any("created" in n for n in notes) and any("deleted" in n for n in notes), notes
    s3 = boto3.client("s3", endpoint_url=runtime["info"]["aws_endpoint_url"], region_name="us-east-1",
                      aws_access_key_id="x", aws_secret_access_key="x")  # fmt: skip
    assert BUCKET not in [b["Name"] for b in s3.list_buckets()["Buckets"]]
