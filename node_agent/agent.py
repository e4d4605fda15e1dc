"""The skyless node agent: fetch the task, run setup and run, ship logs, report status, watch for preemption.

Standard library only, Python >= 3.8: this one file is shipped to VMs inside user-data.
Started with SKYLESS_API_URL, SKYLESS_JOB_ID, SKYLESS_CLUSTER_ID, SKYLESS_INSTANCE_ID,
SKYLESS_AGENT_TOKEN (and optionally SKYLESS_NODE_IP, SKYLESS_CLOUD) in its environment; its working
directory is the node's home (the sandbox folder for the local cloud, ~ on a VM).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import signal
import subprocess
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

RETRYABLE_STATUS = {429, 500, 502, 503, 504}
NOT_READY_STATUS = 425
STOP_STATUS = 410  # this node's attempt is over: kill the task and exit
LOG_FLUSH_SECONDS = float(os.environ.get("SKYLESS_LOG_FLUSH_SECONDS", "2"))
LOG_FLUSH_BYTES = 64 * 1024
PREEMPT_GRACE_SECONDS = float(os.environ.get("SKYLESS_PREEMPT_GRACE_SECONDS", "100"))
STOP_GRACE_SECONDS = float(os.environ.get("SKYLESS_STOP_GRACE_SECONDS", "10"))
METADATA_POLL_SECONDS = float(os.environ.get("SKYLESS_METADATA_POLL_SECONDS", "5"))


def log(message: str) -> None:
    sys.stderr.write(f"[skyless-agent] {message}\n")
    sys.stderr.flush()


class AgentHttpError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status
        self.body = body


def http_request(
    url: str,
    method: str = "GET",
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> tuple[int, bytes]:
    """One HTTP exchange; returns (status, body) for every status, raises OSError on network failure."""
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def with_retries(
    call: Callable[[], tuple[int, bytes]], attempts: int = 6, first_delay: float = 0.5
) -> tuple[int, bytes]:
    """Retry network errors and 429/5xx with exponential backoff and jitter; return the last answer."""
    delay = first_delay
    for attempt in range(attempts):
        try:
            status, body = call()
            if status not in RETRYABLE_STATUS:
                return status, body
            failure = f"HTTP {status}"
        except OSError as error:
            status, body, failure = 0, b"", str(error)
        if attempt == attempts - 1:
            if status:
                return status, body
            raise OSError(f"gave up after {attempts} attempts: {failure}")
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, 10.0)
    raise AssertionError("unreachable")


class AgentStopped(Exception):
    """The API said this node has no part in the job any more (HTTP 410 or `"stop": true`)."""


class ApiClient:
    """The agent side of the node agent protocol (docs/architecture.md)."""

    def __init__(self, api_url: str, job_id: str, instance_id: str, token: str) -> None:
        self.api_url = api_url.rstrip("/")
        self.job_id = job_id
        self.instance_id = instance_id
        self.headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
        self.on_cancel: Callable[[], None] | None = None  # the API says the job is over
        self.on_stop: Callable[[str], None] | None = None  # the API says this node must stop and exit

    def fetch_config(
        self,
        poll_seconds: float = 1.0,
        give_up_after: float = 3600.0,
        stop: Callable[[], bool] = lambda: False,
    ) -> dict[str, Any] | None:
        """GET the node's config, waiting while the API answers 425 (not every node is known yet).

        None when `stop()` turns true while waiting (the node is going away)."""
        url = "{}/agent/{}/config?{}".format(
            self.api_url,
            urllib.parse.quote(self.job_id),
            urllib.parse.urlencode({"instance_id": self.instance_id}),
        )
        deadline = time.monotonic() + give_up_after
        while True:
            status, body = with_retries(lambda: http_request(url, headers=self.headers))
            if status == 200:
                return json.loads(body.decode("utf-8"))
            if status == STOP_STATUS:
                raise AgentStopped(body.decode("utf-8", "replace")[:300])
            if status != NOT_READY_STATUS or time.monotonic() > deadline:
                raise AgentHttpError(status, body.decode("utf-8", "replace"))
            if stop():
                return None
            time.sleep(poll_seconds)
            poll_seconds = min(poll_seconds * 1.5, 5.0)

    def report(self, phase: str, exit_code: int | None = None, message: str | None = None) -> bool:
        """POST a phase; True when the API accepted it. Never raises: a lost report is not fatal."""
        payload: dict[str, Any] = {"instance_id": self.instance_id, "phase": phase}
        if exit_code is not None:
            payload["exit_code"] = exit_code
        if message:
            payload["message"] = message[:2000]
        url = f"{self.api_url}/agent/{urllib.parse.quote(self.job_id)}/status"
        data = json.dumps(payload).encode("utf-8")
        try:
            status, body = with_retries(
                lambda: http_request(url, method="POST", body=data, headers=self.headers)
            )
        except OSError as error:
            log(f"could not report {phase}: {error}")
            return False
        if status == STOP_STATUS:
            if self.on_stop is not None:
                self.on_stop(f"the API refused this node's attempt: {body[:200]!r}")
            return False
        if status >= 300:
            log(f"status {phase} answered HTTP {status}: {body[:200]!r}")
            return False
        try:
            answer = json.loads(body.decode("utf-8") or "{}")
        except ValueError:
            answer = {}
        if isinstance(answer, dict) and answer.get("stop") and self.on_stop is not None:
            self.on_stop(f"the API says this node has no part in job {self.job_id} now")
        elif isinstance(answer, dict) and answer.get("cancel") and self.on_cancel is not None:
            self.on_cancel()
        return True


def encode_multipart(fields: dict[str, str], file_name: str, content: bytes) -> tuple[bytes, str]:
    """multipart/form-data for an S3 presigned POST: the policy fields, then the file (S3 wants it last)."""
    boundary = "skyless-" + uuid.uuid4().hex
    out = io.BytesIO()
    for name, value in fields.items():
        out.write((f"--{boundary}\r\n").encode())
        out.write((f'Content-Disposition: form-data; name="{name}"\r\n\r\n').encode())
        out.write(str(value).encode("utf-8"))
        out.write(b"\r\n")
    out.write((f"--{boundary}\r\n").encode())
    out.write(
        (f'Content-Disposition: form-data; name="file"; filename="{file_name}"\r\n').encode()
        + b"Content-Type: text/plain\r\n\r\n"
    )
    out.write(content)
    out.write((f"\r\n--{boundary}--\r\n").encode())
    return out.getvalue(), "multipart/form-data; boundary=" + boundary


class LogShipper:
    """Buffers task output and uploads it as numbered chunks under key_prefix, by size or by time."""

    def __init__(self, upload: dict[str, Any] | None, local_copy: Path | None = None) -> None:
        self.upload = upload
        self.local_copy = local_copy
        self.buffer = bytearray()
        self.next_chunk = 0
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.timer = threading.Thread(target=self._flush_periodically, name="log-flush", daemon=True)
        self.timer.start()

    def write(self, data: bytes) -> None:
        if self.local_copy is not None:
            with open(str(self.local_copy), "ab") as out:
                out.write(data)
        with self.lock:
            self.buffer.extend(data)
            full = len(self.buffer) >= LOG_FLUSH_BYTES
        if full:
            self.flush()

    def flush(self) -> None:
        with self.lock:
            if not self.buffer:
                return
            content, self.buffer = bytes(self.buffer), bytearray()
            chunk = self.next_chunk
            self.next_chunk += 1
            self._upload(chunk, content)

    def _upload(self, chunk: int, content: bytes) -> None:
        if not self.upload:
            return
        fields = dict(self.upload.get("fields") or {})
        name = f"{chunk:08d}.log"
        fields["key"] = self.upload["key_prefix"] + name
        body, content_type = encode_multipart(fields, name, content)
        try:
            status, answer = with_retries(
                lambda: http_request(
                    self.upload["url"], method="POST", body=body, headers={"Content-Type": content_type}
                )
            )
        except OSError as error:
            log(f"log chunk {chunk} lost: {error}")
            return
        if status >= 300:
            log(f"log chunk {chunk} refused: HTTP {status} {answer[:200]!r}")

    def _flush_periodically(self) -> None:
        while not self.stopped.wait(LOG_FLUSH_SECONDS):
            self.flush()

    def close(self) -> None:
        self.stopped.set()
        self.flush()


def safe_extract(archive: tarfile.TarFile, destination: Path) -> None:
    """Extract a tarball, refusing members that would land outside the destination."""
    root = destination.resolve()
    for member in archive.getmembers():
        target = (destination / member.name).resolve()
        if target != root and root not in target.parents:
            raise ValueError(f"workdir archive member escapes the workdir: {member.name}")
        if member.issym() or member.islnk():
            continue
        archive.extract(member, str(destination))


def download(url: str) -> bytes:
    status, body = with_retries(lambda: http_request(url, timeout=300))
    if status != 200:
        raise AgentHttpError(status, body.decode("utf-8", "replace"))
    return body


def fetch_workdir(url: str | None, workdir: Path) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    if not url:
        return
    data = download(url)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
        safe_extract(archive, workdir)


def clone_workdir(source: dict[str, Any], workdir: Path) -> None:
    """A git workdir: clone `url` into the workdir and check out `ref` (a branch, tag or commit)."""

    def git(*args: str) -> None:
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}  # a private repo fails, never asks for a password
        try:
            done = subprocess.run(["git", *args], capture_output=True, text=True, timeout=1800, env=env)
        except subprocess.TimeoutExpired:
            raise ValueError(f"git {args[0]} took over 30 minutes") from None
        if done.returncode != 0:
            raise ValueError(f"git {args[0]} failed: {done.stderr.strip()[-500:]}")

    if workdir.exists() and any(workdir.iterdir()):
        return  # cloned by an earlier start of this node
    git("clone", "--quiet", str(source["url"]), str(workdir))
    if source.get("ref"):
        git("-C", str(workdir), "checkout", "--quiet", str(source["ref"]))


def mount_path(path: str, home: Path, sandboxed: bool = False) -> Path:
    """Where a file mount lands: `~` is the node's home. A sandboxed node (the local cloud, a process on
    the user's machine) puts absolute paths under its home too: `/data` lands at `<home>/data`."""
    if path == "~" or path.startswith("~/"):
        return home / path[2:]
    if os.path.isabs(path):
        return home / path.lstrip("/") if sandboxed else Path(path)
    return home / path


def unpack_mount(data: bytes, target: Path) -> None:
    """A tarball of one regular file is that file at `target`; any other tarball is a folder at `target`."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
        members = archive.getmembers()
        if len(members) == 1 and members[0].isfile():
            source = archive.extractfile(members[0])
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read() if source else b"")
            return
        target.mkdir(parents=True, exist_ok=True)
        safe_extract(archive, target)


def fetch_file_mounts(mounts: list[dict[str, Any]], home: Path, sandboxed: bool = False) -> list[str]:
    """Fetch each mount to its path; answer a note for each absolute path a sandbox moved."""
    notes = []
    for mount in mounts or []:
        target = mount_path(mount["path"], home, sandboxed)
        if sandboxed and os.path.isabs(mount["path"]):
            notes.append(f"skyless: file mount {mount['path']} is at {target} on the local cloud\n")
        data = download(mount["url"])
        if mount.get("archive"):
            unpack_mount(data, target)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    return notes


def skypilot_env(config: dict[str, Any], node_ip: str) -> dict[str, str]:
    """The environment SkyPilot gives a task, plus the task's own envs."""
    node_ips = [str(ip) for ip in config.get("node_ips") or [node_ip]]
    rank = str(config.get("rank", 0))
    env = {
        "SKYPILOT_NODE_RANK": rank,
        "SKYPILOT_NODE_IPS": "\n".join(node_ips),
        "SKYPILOT_NUM_NODES": str(config.get("num_nodes", len(node_ips))),
        "SKYPILOT_NUM_GPUS_PER_NODE": str(config.get("gpus_per_node", 0)),
        "SKYPILOT_TASK_ID": str(config.get("task_id", "")),
        "SKYPILOT_SETUP_NODE_RANK": rank,
        "SKYPILOT_SETUP_NODE_IPS": "\n".join(node_ips),
        "SKYPILOT_CLUSTER_INFO": json.dumps(
            {
                "cluster_name": os.environ.get("SKYLESS_CLUSTER_ID", ""),
                "cloud": config.get("cloud", os.environ.get("SKYLESS_CLOUD", "")),
                "region": config.get("region", ""),
                "zone": config.get("zone", ""),
                "num_nodes": len(node_ips),
            }
        ),
    }
    for key, value in (config.get("envs") or {}).items():
        env[str(key)] = "" if value is None else str(value)
    return env


class TaskRunner:
    """Runs one bash script in its own process group, streaming its output to the log shipper."""

    def __init__(self, shipper: LogShipper) -> None:
        self.shipper = shipper
        self.process: subprocess.Popen | None = None
        self.lock = threading.Lock()
        self.terminated = False
        # When the agent leads its own process group (the local cloud starts it so, user-data uses
        # setsid), the task stays in that group: whoever kills the node's group kills the task too.
        # Otherwise the task gets a session of its own so signals reach all of it and nothing else.
        self.shares_agent_group = os.getpgrp() == os.getpid()

    def run(self, script: str, cwd: Path, env: dict[str, str]) -> int:
        with self.lock:
            if self.terminated:
                return 143
            self.process = subprocess.Popen(
                ["bash", "-c", script],
                cwd=str(cwd),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=not self.shares_agent_group,
            )
        stdout = self.process.stdout
        assert stdout is not None
        for line in iter(stdout.readline, b""):
            sys.stdout.buffer.write(line)
            sys.stdout.flush()
            self.shipper.write(line)
        return self.process.wait()

    def terminate(self) -> None:
        """SIGTERM the task's whole process group so it can checkpoint; no new script starts after."""
        with self.lock:
            self.terminated = True
            process = self.process
        if process is not None and process.poll() is None:
            self._signal_task(process, signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL whatever is left of the task (in a shared group, that ends the agent as well)."""
        process = self.process
        if process is not None and process.poll() is None:
            self._signal_task(process, signal.SIGKILL)

    def _signal_task(self, process: subprocess.Popen, signum: int) -> None:
        # In a shared group the agent receives its own SIGTERM too; its handler ignores repeats.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(os.getpgrp() if self.shares_agent_group else process.pid, signum)

    def wait(self, timeout: float) -> None:
        process = self.process
        if process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout)


def metadata_get(url: str, headers: dict[str, str], timeout: float = 1.0) -> tuple[int, bytes]:
    try:
        return http_request(url, headers=headers, timeout=timeout)
    except OSError:
        return 0, b""


def aws_preemption_notice(base: str) -> str | None:
    """AWS IMDSv2 spot/instance-action: 404 normally, a JSON notice two minutes before reclaim."""
    token_request = urllib.request.Request(
        base + "/latest/api/token", method="PUT", headers={"X-aws-ec2-metadata-token-ttl-seconds": "300"}
    )
    headers = {}
    try:
        with urllib.request.urlopen(token_request, timeout=1.0) as response:
            headers["X-aws-ec2-metadata-token"] = response.read().decode()
    except (OSError, urllib.error.HTTPError):
        pass
    status, body = metadata_get(base + "/latest/meta-data/spot/instance-action", headers)
    return body.decode("utf-8", "replace") if status == 200 else None


def gcp_preemption_notice(base: str) -> str | None:
    status, body = metadata_get(
        base + "/computeMetadata/v1/instance/preempted", {"Metadata-Flavor": "Google"}
    )
    return "instance/preempted=TRUE" if status == 200 and body.strip().upper() == b"TRUE" else None


def azure_preemption_notice(base: str) -> str | None:
    status, body = metadata_get(
        base + "/metadata/scheduledevents?api-version=2020-07-01", {"Metadata": "true"}
    )
    if status != 200:
        return None
    try:
        events = json.loads(body.decode("utf-8")).get("Events", [])
    except ValueError:
        return None
    for event in events:
        if event.get("EventType") == "Preempt":
            return json.dumps(event)
    return None


METADATA_WATCHERS: dict[str, Any] = {
    "aws": (aws_preemption_notice, "SKYLESS_AWS_METADATA_URL", "http://169.254.169.254"),
    "gcp": (gcp_preemption_notice, "SKYLESS_GCP_METADATA_URL", "http://metadata.google.internal"),
    "azure": (azure_preemption_notice, "SKYLESS_AZURE_METADATA_URL", "http://169.254.169.254"),
}


def metadata_watcher(cloud: str) -> Callable[[], str | None] | None:
    """The notice check for this cloud's metadata service, or None (local cloud, or no such service)."""
    entry = METADATA_WATCHERS.get(cloud)
    if entry is None:
        return None
    check, env_name, default = entry
    base = os.environ.get(env_name, default).rstrip("/")
    return lambda: check(base)


class Agent:
    def __init__(self, env: dict[str, str], home: Path) -> None:
        self.job_id = env["SKYLESS_JOB_ID"]
        self.instance_id = env.get("SKYLESS_INSTANCE_ID", "")
        self.node_ip = env.get("SKYLESS_NODE_IP", "127.0.0.1")
        self.cloud = env.get("SKYLESS_CLOUD", "local")
        self.home = home
        self.api = ApiClient(
            env["SKYLESS_API_URL"], self.job_id, self.instance_id, env["SKYLESS_AGENT_TOKEN"]
        )
        self.preempted = threading.Event()
        self.finished = threading.Event()
        self.runner: TaskRunner | None = None
        self.preempting_report: threading.Thread | None = None
        self.cancelled = threading.Event()
        self.stopping = threading.Event()
        self.api.on_cancel = self.on_cancel
        self.api.on_stop = self.on_stop

    def on_preemption_notice(self, reason: str) -> None:
        """Report `preempting` once and pass SIGTERM to the task so it can checkpoint."""
        if self.preempted.is_set() or self.cancelled.is_set():
            return  # includes the SIGTERM the agent sent its own process group
        self.preempted.set()
        log(f"preemption notice: {reason}")
        if self.runner is not None:
            self.runner.terminate()
        self.preempting_report = threading.Thread(
            target=self.api.report, args=("preempting", None, reason), name="report-preempting", daemon=True
        )
        self.preempting_report.start()

    def on_cancel(self) -> None:
        """The job ended elsewhere (cancelled, failed on another node): stop the task, report nothing more."""
        if self.cancelled.is_set():
            return
        self.cancelled.set()
        log("the API says this job is over; stopping the task")
        if self.runner is not None:
            self.runner.terminate()

    def on_stop(self, reason: str) -> None:
        """This node's attempt is over (the job recovered elsewhere, or this node is a stray): SIGTERM the
        task's process group, SIGKILL what is left after STOP_GRACE_SECONDS, and exit."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        self.cancelled.set()
        log(f"stopping: {reason}")
        if self.runner is not None:
            self.runner.terminate()
        threading.Thread(target=self._exit_after_grace, name="stop", daemon=True).start()

    def _exit_after_grace(self) -> None:
        if self.runner is not None:
            self.runner.wait(STOP_GRACE_SECONDS)
            self.runner.kill()
            flush = threading.Thread(target=self.runner.shipper.close, name="last-logs", daemon=True)
            flush.start()
            flush.join(5)
        self.finished.set()
        os._exit(0)  # whatever the main thread is doing (a download, a setup), this node is done

    def heartbeat(self, every: float) -> None:
        while not self.finished.wait(every) and not self.cancelled.is_set():
            self.api.report("heartbeat")

    def watch_metadata(self, check: Callable[[], str | None]) -> None:
        while not self.finished.is_set() and not self.preempted.is_set():
            notice = check()
            if notice:
                self.on_preemption_notice(notice)
                return
            self.finished.wait(METADATA_POLL_SECONDS)

    def run(self) -> int:
        config = self.api.fetch_config(stop=lambda: self.preempted.is_set() or self.cancelled.is_set())
        if config is None:
            log("stopped before the task started")
            return 143
        heartbeat_seconds = float(config.get("heartbeat_seconds") or 30)
        threading.Thread(
            target=self.heartbeat, args=(heartbeat_seconds,), name="heartbeat", daemon=True
        ).start()
        check = metadata_watcher(self.cloud)
        if check is not None:
            threading.Thread(target=self.watch_metadata, args=(check,), name="metadata", daemon=True).start()

        shipper = LogShipper(config.get("log_upload"), local_copy=self.home / "skyless_task.log")
        self.runner = TaskRunner(shipper)
        if self.preempted.is_set() or self.cancelled.is_set():
            return self.finish("failed", 143, None, shipper)
        workdir = self.home / "sky_workdir"
        env = dict(os.environ)
        for name in ("SKYLESS_AGENT_TOKEN",):
            env.pop(name, None)
        env.update(skypilot_env(config, self.node_ip))
        try:
            self.api.report("setting_up")
            try:
                if config.get("workdir_git"):
                    clone_workdir(config["workdir_git"], workdir)
                else:
                    fetch_workdir(config.get("workdir_url"), workdir)
                sandboxed = self.cloud == "local"
                for note in fetch_file_mounts(config.get("file_mounts") or [], self.home, sandboxed):
                    shipper.write(note.encode())
            except (OSError, ValueError, tarfile.TarError, AgentHttpError) as error:
                shipper.write((f"skyless: could not fetch the workdir or file mounts: {error}\n").encode())
                return self.finish("failed", 1, f"fetching workdir/file mounts failed: {error}", shipper)
            if config.get("setup"):
                code = self.runner.run(config["setup"], workdir, env)
                if code != 0:
                    return self.finish("failed", code, f"setup exited with {code}", shipper)
            if not self.preempted.is_set() and not self.cancelled.is_set():
                self.api.report("running")
            code = self.runner.run(config["run"], workdir, env) if config.get("run") else 0
            return self.finish("succeeded" if code == 0 else "failed", code, None, shipper)
        finally:
            self.finished.set()

    def finish(self, phase: str, code: int, message: str | None, shipper: LogShipper) -> int:
        shipper.close()
        if self.preempted.is_set():
            # The task ended because its node is going away: that is a preemption, not the task's result.
            log(f"task stopped after the preemption notice (exit {code})")
            if self.preempting_report is not None:
                self.preempting_report.join(30)
            return code
        if self.cancelled.is_set():
            log(f"task stopped because the job is over (exit {code})")
            return code
        self.api.report(phase, code, message)
        return code


def main() -> int:
    home = Path(os.environ.get("SKYLESS_NODE_HOME") or os.getcwd())
    missing = [
        name
        for name in ("SKYLESS_API_URL", "SKYLESS_JOB_ID", "SKYLESS_AGENT_TOKEN")
        if not os.environ.get(name)
    ]
    if missing:
        log("missing environment: {}".format(", ".join(missing)))
        return 2
    agent = Agent(dict(os.environ), home)

    def on_sigterm(signum: int, frame: Any) -> None:
        agent.on_preemption_notice("SIGTERM")

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        code = agent.run()
    except AgentStopped as error:
        log(f"stopping before the task started: {error}")
        return 0
    except AgentHttpError as error:
        log(f"the API refused this node: {error}")
        return 3
    if agent.preempting_report is not None:
        agent.preempting_report.join(30)
    if agent.preempted.is_set() and agent.runner is not None:
        agent.runner.wait(PREEMPT_GRACE_SECONDS)
        agent.runner.kill()
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
