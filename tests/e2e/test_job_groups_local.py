"""Job groups on the local runtime as a user runs them: the tasks of one file launched together, each on
its own cluster, talking to each other while both run (through the job-group variables); a primary task
whose end stops the auxiliary one after `termination_delay` (the trainer + replay-buffer group that used to
deadlock when tasks ran one after another); `status` and `logs` showing each task."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from local_runtime.moto_endpoint import free_port

SKYLESS = Path(sys.executable).with_name("skyless")
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}

# The server answers one request with its own task id, then exits; the client finds it through
# SKYPILOT_JOBGROUP_HOST_SERVER (the server's head node IP) while the server still runs.
TALKING_GROUP = """\
name: talk
execution: parallel
---
name: server
envs:
  PORT: "{port}"
run: |
  python3 -c '
  import http.server, os
  class Hello(http.server.BaseHTTPRequestHandler):
      def do_GET(self):
          body = ("hello from " + os.environ["SKYPILOT_TASK_ID"]).encode()
          self.send_response(200); self.end_headers(); self.wfile.write(body)
  server = http.server.HTTPServer(("0.0.0.0", int(os.environ["PORT"])), Hello)
  print("serving on", os.environ["PORT"], flush=True)
  server.handle_request()
  print("served one request", flush=True)
  '
---
name: client
envs:
  PORT: "{port}"
run: |
  echo "group $SKYPILOT_JOBGROUP_NAME, server at $SKYPILOT_JOBGROUP_HOST_SERVER"
  python3 -c '
  import os, time, urllib.request
  url = "http://%s:%s/" % (os.environ["SKYPILOT_JOBGROUP_HOST_SERVER"], os.environ["PORT"])
  for _ in range(120):
      try:
          print("got:", urllib.request.urlopen(url, timeout=5).read().decode(), flush=True)
          break
      except OSError:
          time.sleep(0.5)
  else:
      raise SystemExit("never reached the server")
  '
"""

# The replay buffer serves until it is stopped; the trainer (the primary task) uses it, then ends.
TRAINER_GROUP = """\
name: rl
execution: parallel
primary_tasks: [trainer]
termination_delay: 6s
---
name: trainer
envs:
  PORT: "{port}"
run: |
  python3 -c '
  import os, time, urllib.request
  url = "http://%s:%s/sample" % (os.environ["SKYPILOT_JOBGROUP_HOST_REPLAY_BUFFER"], os.environ["PORT"])
  for _ in range(120):
      try:
          print("trainer got", urllib.request.urlopen(url, timeout=5).read().decode(), flush=True)
          break
      except OSError:
          time.sleep(0.5)
  else:
      raise SystemExit("never reached the replay buffer")
  '
---
name: replay-buffer
envs:
  PORT: "{port}"
run: |
  python3 -c '
  import http.server, os
  class Buffer(http.server.BaseHTTPRequestHandler):
      def do_GET(self):
          self.send_response(200); self.end_headers(); self.wfile.write(b"batch-1")
  print("replay buffer up", flush=True)
  http.server.HTTPServer(("0.0.0.0", int(os.environ["PORT"])), Buffer).serve_forever()
  '
"""


class Runtime:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.moto_port, self.api_port = free_port(), free_port()
        self.env = {**os.environ, "SKYLESS_HOME": str(home)}
        for name in ("AWS_ENDPOINT_URL", "SKYLESS_API_URL", "SKYLESS_PREFIX", "SKYLESS_API_KEY"):
            self.env.pop(name, None)

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(SKYLESS), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=False)  # fmt: skip

    def up(self) -> None:
        result = self.cli("local", "up", "--moto-port", str(self.moto_port), "--api-port", str(self.api_port))
        assert result.returncode == 0, result.stdout + result.stderr
        info = json.loads((self.home / "local" / "runtime.json").read_text())
        self.api = httpx.Client(base_url=info["api_url"], timeout=30,
                                headers={"Authorization": f"Bearer {info['api_key']}"})  # fmt: skip

    def log(self) -> str:
        path = self.home / "local" / "runtime.log"
        return path.read_text()[-4000:] if path.exists() else ""

    def submit(self, text: str, filename: str) -> str:
        answer = self.api.post("/jobs", json={"task": text, "filename": filename})
        assert answer.status_code == 201, answer.text
        return answer.json()["job_id"]

    def job(self, job_id: str) -> dict[str, Any]:
        answer = self.api.get(f"/jobs/{job_id}")
        assert answer.status_code == 200, answer.text
        return answer.json()

    def wait_ended(self, job_id: str, timeout: float = 180) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.job(job_id)
            if job["state"] in TERMINAL:
                return job
            time.sleep(0.5)
        raise AssertionError(f"{job_id} never ended: {json.dumps(self.job(job_id))[:3000]}\n{self.log()}")

    def logs(self, job_id: str) -> str:
        answer = self.api.get(f"/jobs/{job_id}/logs", params={"rank": 0})
        assert answer.status_code == 200, answer.text
        return answer.json()["text"]


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    rt = Runtime(tmp_path_factory.mktemp("skyless-home"))
    rt.up()
    yield rt
    rt.cli("local", "down")


def _event_time(job: dict[str, Any], state: str) -> float:
    event = next(e for e in job["timeline"] if e["kind"] == "state" and e["state"] == state)
    return datetime.fromisoformat(event["time"]).timestamp()


def test_two_tasks_of_a_group_talk_to_each_other_while_both_run(runtime: Runtime):
    group_id = runtime.submit(TALKING_GROUP.format(port=free_port()), "talk.yaml")
    group = runtime.wait_ended(group_id)
    assert group["state"] == "SUCCEEDED", json.dumps(group)[:3000]
    tasks = {t["task"]: t for t in group["group"]}
    assert set(tasks) == {"server", "client"} and all(t["state"] == "SUCCEEDED" for t in tasks.values())
    server, client = runtime.job(tasks["server"]["job_id"]), runtime.job(tasks["client"]["job_id"])
    assert server["cluster"]["cluster_id"] != client["cluster"]["cluster_id"]  # each on its own cluster
    assert client["group_id"] == group_id
    client_log = runtime.logs(client["job_id"])
    assert "group talk, server at 127.0.0." in client_log
    # the server's own task id, answered over the network while both tasks ran
    assert "got: hello from sky-managed-" in client_log and f"_talk_server_{group_id}-0" in client_log
    assert "served one request" in runtime.logs(server["job_id"])
    # both ran at once: each started running before the other ended
    assert _event_time(server, "RUNNING") < _event_time(client, "SUCCEEDED")
    assert _event_time(client, "RUNNING") < _event_time(server, "SUCCEEDED")

    status = runtime.cli("status", group_id)
    assert status.returncode == 0, status.stderr
    assert "server" in status.stdout and "client" in status.stdout
    assert tasks["client"]["job_id"] in status.stdout and "auxiliary" not in status.stdout
    logs = runtime.cli("logs", group_id)
    assert logs.returncode == 0, logs.stderr
    assert "[client] got: hello from" in logs.stdout and "[server] served one request" in logs.stdout

    listed = runtime.cli("queue", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {job["job_id"]: job for job in json.loads(listed.stdout)}
    assert group_id in rows and not {t["job_id"] for t in tasks.values()} & set(rows)  # one row per group
    assert rows[group_id]["cost"] == pytest.approx(server["cost"] + client["cost"])


def test_primary_task_end_stops_the_auxiliary_task_after_the_termination_delay(runtime: Runtime):
    group_id = runtime.submit(TRAINER_GROUP.format(port=free_port()), "rl.yaml")
    group = runtime.wait_ended(group_id)
    assert group["state"] == "SUCCEEDED", json.dumps(group)[:3000]
    tasks = {t["task"]: t for t in group["group"]}
    assert (tasks["trainer"]["primary"], tasks["replay-buffer"]["primary"]) == (True, False)
    trainer = runtime.job(tasks["trainer"]["job_id"])
    buffer = runtime.job(tasks["replay-buffer"]["job_id"])
    assert trainer["state"] == "SUCCEEDED" and buffer["state"] == "CANCELLED"
    assert buffer["reason"].startswith("stopped by the job group: its primary tasks ended")
    assert "termination_delay 6 s" in buffer["reason"]
    assert "trainer got batch-1" in runtime.logs(trainer["job_id"])
    waited = _event_time(buffer, "CANCELLED") - _event_time(trainer, "SUCCEEDED")
    assert 6 <= waited < 60, waited  # stopped after the delay, by a delayed message, not at once
