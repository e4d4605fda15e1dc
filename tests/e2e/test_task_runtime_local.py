"""SkyPilot task files behave on a local skyless node as on a SkyPilot node, driven as a user types it:
`skyless launch FILE -d`, `skyless queue --json`, `skyless logs JOB` (follows) and `--no-follow`.

One real daemon (moto + API + dispatcher) for the module, in a temporary SKYLESS_HOME on free ports; log
chunks flushed every 0.1 s so that a short chatty task makes far more than one page (50 chunks) of log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from local_runtime.moto_endpoint import free_port

SKYLESS = Path(sys.executable).with_name("skyless")
TERMINAL = {"SUCCEEDED", "FAILED", "FAILED_SETUP", "FAILED_NO_RESOURCE", "CANCELLED"}


class Runtime:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = {**os.environ, "SKYLESS_HOME": str(home / "skyless"), "HOME": str(home),
                    "SKYLESS_LOCAL_SNAPSHOT_SECONDS": "2", "SKYLESS_LOG_FLUSH_SECONDS": "0.1"}  # fmt: skip
        for name in ("AWS_ENDPOINT_URL", "SKYLESS_API_URL", "SKYLESS_PREFIX", "SKYLESS_API_KEY"):
            self.env.pop(name, None)

    def cli(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(SKYLESS), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=False, cwd=self.home)  # fmt: skip

    def api(self) -> httpx.Client:
        info = json.loads((self.home / "skyless" / "local" / "runtime.json").read_text())
        return httpx.Client(base_url=info["api_url"], timeout=30,
                            headers={"Authorization": f"Bearer {info['api_key']}"})  # fmt: skip

    def launch(self, name: str, task: str) -> str:
        path = self.home / name
        path.write_text(task)
        done = self.cli("launch", str(path), "-d")
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout.split("Job ", 1)[1].split()[0]

    def job(self, job_id: str) -> dict[str, Any]:
        done = self.cli("queue", "--json")
        assert done.returncode == 0, done.stderr
        return next(j for j in json.loads(done.stdout) if j["job_id"] == job_id)

    def wait(self, job_id: str, timeout: float = 150) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.job(job_id)
            if job["state"] in TERMINAL:
                return job
            time.sleep(1)
        raise AssertionError(f"job {job_id} never ended: {job}")


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    rt = Runtime(tmp_path_factory.mktemp("runtime-home"))
    up = rt.cli("local", "up", "--moto-port", str(free_port()), "--api-port", str(free_port()))
    assert up.returncode == 0, up.stdout + up.stderr
    yield rt
    rt.cli("local", "down")


BASHRC_TASK = """\
setup: |
  echo 'export TEST_VAR=set-in-setup' >> ~/.bashrc
run: |
  echo "TEST_VAR=${TEST_VAR:?is not set}"
"""


def test_a_variable_setup_appends_to_bashrc_is_set_in_run(runtime: Runtime) -> None:
    job_id = runtime.launch("bashrc.yaml", BASHRC_TASK)
    assert runtime.wait(job_id)["state"] == "SUCCEEDED"
    logs = runtime.cli("logs", job_id, "--no-follow")
    assert logs.returncode == 0 and "TEST_VAR=set-in-setup" in logs.stdout, logs.stdout + logs.stderr


def test_a_failing_setup_ends_failed_setup_and_run_never_starts(runtime: Runtime) -> None:
    job_id = runtime.launch("bad_setup.yaml", "setup: |\n  echo preparing\n  exit 3\nrun: echo never-runs\n")
    job = runtime.wait(job_id)
    assert job["state"] == "FAILED_SETUP", job
    logs = runtime.cli("logs", job_id, "--no-follow").stdout
    assert "preparing" in logs and "never-runs" not in logs
    status = runtime.cli("status")
    assert "FAILED_SETUP" in status.stdout, status.stdout


CHATTY_TASK = """\
run: |
  for i in $(seq 1 400); do echo "line $i of 400"; sleep 0.02; done
"""


def test_a_chatty_tasks_log_is_complete_followed_and_with_no_follow(runtime: Runtime) -> None:
    job_id = runtime.launch("chatty.yaml", CHATTY_TASK)
    followed = runtime.cli("logs", job_id)  # follows by default, as SkyPilot: returns when the job ends
    expected = [f"line {i} of 400" for i in range(1, 401)]
    assert followed.returncode == 0, followed.stderr
    assert [line for line in followed.stdout.splitlines() if line.startswith("line ")] == expected
    assert runtime.wait(job_id)["state"] == "SUCCEEDED"
    first_page = runtime.api().get(f"/jobs/{job_id}/logs", params={"rank": 0}).json()
    assert not first_page["finished"] and first_page["text"].count("\n") < 400  # more than one page of it
    printed = runtime.cli("logs", job_id, "--no-follow")
    assert [line for line in printed.stdout.splitlines() if line.startswith("line ")] == expected
    tail = runtime.cli("logs", job_id, "--no-follow", "--tail", "3")
    assert tail.stdout.splitlines()[-3:] == expected[-3:] and "line 397 of" not in tail.stdout


PROGRESS_TASK = r"""
run: |
  python3 -c '
  import sys, time
  for p in (0, 50, 100):
      sys.stdout.write("\rtraining: %3d%%|%-10s|" % (p, "#" * (p // 10)))
      sys.stdout.flush()
      time.sleep(0.3)
  sys.stdout.write("\n")
  print("done")
  '
"""


def test_a_progress_bar_comes_out_as_skypilot_prints_it(runtime: Runtime) -> None:
    job_id = runtime.launch("progress.yaml", PROGRESS_TASK)
    assert runtime.wait(job_id)["state"] == "SUCCEEDED"
    done = subprocess.run(
        [str(SKYLESS), "logs", job_id, "--no-follow"],
        env=runtime.env,
        capture_output=True,
        timeout=120,
        check=False,
    )  # bytes: text mode would turn each \r into a newline
    out = done.stdout.decode()
    bar = "\rtraining:   0%|          |\rtraining:  50%|#####     |\rtraining: 100%|##########|\ndone\n"
    assert bar in out, repr(out)
