"""The local runtime as a user meets it: `skyless local up`, then a task file copied into the bucket with a
plain S3 client runs to SUCCEEDED; a broken one gets its error report beside it. One real daemon."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.exceptions import ClientError

from local_runtime.moto_endpoint import free_port

SKYLESS = Path(sys.executable).with_name("skyless")
TASK = "name: from-bucket\nresources:\n  cpus: 1+\nrun: echo hello from the bucket\n"


class Daemon:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = {**os.environ, "SKYLESS_HOME": str(home)}
        for name in ("AWS_ENDPOINT_URL", "SKYLESS_API_URL", "SKYLESS_PREFIX", "SKYLESS_API_KEY"):
            self.env.pop(name, None)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(SKYLESS), *args], env=self.env, capture_output=True, text=True,
                              timeout=120, check=False)  # fmt: skip

    def up(self) -> None:
        result = self.cli("local", "up", "--moto-port", str(free_port()), "--api-port", str(free_port()))
        assert result.returncode == 0, result.stdout + result.stderr
        info = json.loads((self.home / "local" / "runtime.json").read_text())
        self.api = httpx.Client(base_url=info["api_url"], timeout=30,
                                headers={"Authorization": f"Bearer {info['api_key']}"})  # fmt: skip
        self.s3 = boto3.client("s3", endpoint_url=info["aws_endpoint_url"], region_name="us-east-1",
                               aws_access_key_id="any", aws_secret_access_key="any")  # fmt: skip

    def poll(self, find: Any, timeout: float = 120) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = find()
            if found:
                return found
            time.sleep(0.5)
        log = (self.home / "local" / "runtime.log").read_text()[-3000:]
        raise AssertionError(f"never happened\n{log}")


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    running = Daemon(tmp_path_factory.mktemp("skyless-home"))
    running.up()
    yield running
    running.cli("local", "down")


def test_a_task_file_copied_into_the_bucket_runs_to_success(daemon: Daemon) -> None:
    daemon.s3.put_object(Bucket="skyless-artifacts", Key="tasks/hello.yaml", Body=TASK.encode())

    def finished() -> dict[str, Any] | None:
        jobs = daemon.api.get("/jobs").json()["jobs"]
        done = [j for j in jobs if j["name"] == "from-bucket" and j["state"] in ("SUCCEEDED", "FAILED")]
        return done[0] if done else None

    job = daemon.poll(finished)
    assert job["state"] == "SUCCEEDED"
    logs = daemon.api.get(f"/jobs/{job['job_id']}/logs").json()["text"]
    assert "hello from the bucket" in logs

    def final_status() -> dict[str, Any] | None:
        answer = daemon.s3.get_object(Bucket="skyless-artifacts", Key=f"runs/{job['job_id']}/status.json")
        status = json.loads(answer["Body"].read())
        return status if status["state"] == "SUCCEEDED" else None  # type: ignore[no-any-return]

    status = daemon.poll(final_status, timeout=30)
    assert status["source"]["key"] == "tasks/hello.yaml" and status["finished_at"]


def test_a_broken_task_file_gets_its_error_report_beside_it(daemon: Daemon) -> None:
    daemon.s3.put_object(Bucket="skyless-artifacts", Key="tasks/broken.yml", Body=b"run: [unclosed\n")

    def report() -> dict[str, Any] | None:
        try:
            answer = daemon.s3.get_object(Bucket="skyless-artifacts", Key="tasks/broken.yml.error.json")
        except ClientError:
            return None
        return json.loads(answer["Body"].read())  # type: ignore[no-any-return]

    found = daemon.poll(report, timeout=60)
    assert found["error"] == "TaskFileError" and found["file"] == "tasks/broken.yml" and found["line"]


def test_a_schedule_created_through_the_api_fires_in_the_running_runtime(daemon: Daemon) -> None:
    task = TASK.replace("from-bucket", "every-minute")
    answer = daemon.api.post("/schedules", json={"name": "tick", "cron": "* * * * *", "task": task})
    assert answer.status_code == 201, answer.text

    def ran() -> list[dict[str, Any]]:
        return [j for j in daemon.api.get("/jobs").json()["jobs"] if j["name"] == "every-minute"]

    (job,) = daemon.poll(ran, timeout=80)  # the next minute boundary, plus the dispatcher's 5 s check
    view = daemon.api.get("/schedules/tick").json()
    assert view["runs"] == 1 and view["last_job_id"] == job["job_id"]
    assert daemon.api.delete("/schedules/tick").status_code == 200
