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
LOG_FLUSH_SECONDS = float(os.environ.get("SKYLESS_LOG_FLUSH_SECONDS", "2"))
LOG_FLUSH_BYTES = 64 * 1024
PREEMPT_GRACE_SECONDS = float(os.environ.get("SKYLESS_PREEMPT_GRACE_SECONDS", "100"))
METADATA_POLL_SECONDS = float(os.environ.get("SKYLESS_METADATA_POLL_SECONDS", "5"))
METADATA_WAIT = float(os.environ.get("SKYLESS_METADATA_WAIT_SECONDS", "60"))  # GCP long poll


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


class ApiClient:
    """The agent side of the node agent protocol (docs/architecture.md)."""

    def __init__(self, api_url: str, job_id: str, instance_id: str, token: str) -> None:
        self.api_url = api_url.rstrip("/")
        self.job_id = job_id
        self.instance_id = instance_id
        self.headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
        self.on_cancel: Callable[[], None] | None = None  # the API says the job is over

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
        if status >= 300:
            log(f"status {phase} answered HTTP {status}: {body[:200]!r}")
            return False
        try:
            answer = json.loads(body.decode("utf-8") or "{}")
        except ValueError:
            answer = {}
        if isinstance(answer, dict) and answer.get("cancel") and self.on_cancel is not None:
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
        upload = self.upload
        if not upload:
            return
        fields = dict(upload.get("fields") or {})
        name = f"{chunk:08d}.log"
        fields["key"] = upload["key_prefix"] + name
        body, content_type = encode_multipart(fields, name, content)
        try:
            status, answer = with_retries(
                lambda: http_request(
                    upload["url"], method="POST", body=body, headers={"Content-Type": content_type}
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


def skypilot_env(config: dict[str, Any], stage: str) -> dict[str, str]:
    """The task's own envs and secrets, with SkyPilot's variables for `stage` ("setup" or "run") over
    them, as SkyPilot lets its own win. The API computes those variables (shared/jobs/node_env.py)."""
    env = {str(key): "" if value is None else str(value) for key, value in (config.get("envs") or {}).items()}
    env.update({str(key): str(value) for key, value in (config.get(f"{stage}_env") or {}).items()})
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


def metadata_get(
    url: str, headers: dict[str, str], timeout: float = 2.0
) -> tuple[int, bytes, dict[str, str]]:
    """One metadata-service GET: (status, body, headers with lower-case names); status 0 when the service
    cannot be reached."""
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read(), {k.lower(): v for k, v in response.headers.items()}
    except urllib.error.HTTPError as error:
        return error.code, error.read(), {k.lower(): v for k, v in error.headers.items()}
    except OSError:
        return 0, b"", {}


class MetadataWatcher:
    """A cloud's metadata-service preemption notice. `check()` answers the notice or None and may block
    (a long poll); `pause()` is how long to wait before the next check; `acknowledge()` tells the cloud
    the node has let go (called once the task has stopped)."""

    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")

    def check(self) -> str | None:
        raise NotImplementedError

    def pause(self) -> float:
        return METADATA_POLL_SECONDS

    def acknowledge(self) -> None:
        return None


class AwsSpotWatcher(MetadataWatcher):
    """AWS IMDSv2 `spot/instance-action`: 404 normally, a JSON notice two minutes before the reclaim."""

    def check(self) -> str | None:
        token_request = urllib.request.Request(
            self.base + "/latest/api/token",
            method="PUT",
            headers={"X-aws-ec2-metadata-token-ttl-seconds": "300"},
        )
        headers = {}
        try:
            with urllib.request.urlopen(token_request, timeout=1.0) as response:
                headers["X-aws-ec2-metadata-token"] = response.read().decode()
        except OSError:
            pass
        status, body, _ = metadata_get(self.base + "/latest/meta-data/spot/instance-action", headers)
        return body.decode("utf-8", "replace") if status == 200 else None


class GcpPreemptedWatcher(MetadataWatcher):
    """GCP `instance/preempted` (FALSE, then TRUE about 30 s before the VM stops), read once, then watched
    with `?wait_for_change=true&last_etag=`: the metadata server answers as soon as the value changes, so a
    notice is seen at once rather than at the next poll."""

    HEADERS = {"Metadata-Flavor": "Google"}

    def __init__(self, base: str) -> None:
        super().__init__(base)
        self.etag: str | None = None
        self.again_now = False

    def check(self) -> str | None:
        url = self.base + "/computeMetadata/v1/instance/preempted"
        waiting = self.etag is not None
        if waiting:
            query = {
                "wait_for_change": "true",
                "last_etag": self.etag,
                "timeout_sec": str(int(METADATA_WAIT)),
            }
            url += "?" + urllib.parse.urlencode(query)
        started = time.monotonic()
        status, body, headers = metadata_get(
            url, self.HEADERS, timeout=METADATA_WAIT + 10 if waiting else 2.0
        )
        held = time.monotonic() - started >= 1.0
        if status != 200:
            self.again_now = False
            return None
        self.etag = headers.get("etag") or self.etag
        # Wait again at once after the first read or a held long poll; not after an answer that came at
        # once to a long poll (a server that ignores wait_for_change): that would spin.
        self.again_now = self.etag is not None and (not waiting or held)
        return "instance/preempted=TRUE" if body.strip().upper() == b"TRUE" else None

    def pause(self) -> float:
        return 0.0 if self.again_now else METADATA_POLL_SECONDS


class AzureScheduledEventsWatcher(MetadataWatcher):
    """Azure IMDS Scheduled Events: a `Preempt` event naming this VM (a Spot eviction, at least 30 s ahead).
    Once the task has stopped, the event is approved (POST `StartRequests`), which lets Azure go ahead now."""

    URL = "/metadata/scheduledevents?api-version=2020-07-01"
    HEADERS = {"Metadata": "true"}

    def __init__(self, base: str, vm_name: str) -> None:
        super().__init__(base)
        self.vm_name = vm_name
        self.event_id: str | None = None

    def check(self) -> str | None:
        status, body, _ = metadata_get(self.base + self.URL, self.HEADERS)
        if status != 200:
            return None
        try:
            events = json.loads(body.decode("utf-8")).get("Events") or []
        except (ValueError, AttributeError):
            return None
        for event in events:
            resources = event.get("Resources") or []
            ours = not resources or self.vm_name in resources
            if event.get("EventType") == "Preempt" and ours:
                self.event_id = str(event.get("EventId") or "") or None
                return json.dumps(event)
        return None

    def acknowledge(self) -> None:
        if self.event_id is None:
            return
        body = json.dumps({"StartRequests": [{"EventId": self.event_id}]}).encode()
        headers = {**self.HEADERS, "Content-Type": "application/json"}
        try:
            status, _ = http_request(
                self.base + self.URL, method="POST", body=body, headers=headers, timeout=5
            )
        except OSError as error:
            log(f"could not approve scheduled event {self.event_id}: {error}")
            return
        log(f"approved scheduled event {self.event_id}: HTTP {status}")


METADATA_URLS = {
    "aws": ("SKYLESS_AWS_METADATA_URL", "http://169.254.169.254"),
    "gcp": ("SKYLESS_GCP_METADATA_URL", "http://metadata.google.internal"),
    "azure": ("SKYLESS_AZURE_METADATA_URL", "http://169.254.169.254"),
}


def metadata_watcher(cloud: str, env: dict[str, str]) -> MetadataWatcher | None:
    """The preemption watcher for this cloud's metadata service (its base URL from the environment, so
    tests can point it at a local server), or None (the local cloud, or clouds without one)."""
    if cloud not in METADATA_URLS:
        return None
    env_name, default = METADATA_URLS[cloud]
    base = env.get(env_name) or default
    if cloud == "aws":
        return AwsSpotWatcher(base)
    if cloud == "gcp":
        return GcpPreemptedWatcher(base)
    return AzureScheduledEventsWatcher(base, env.get("SKYLESS_INSTANCE_ID", ""))


class Agent:
    def __init__(self, env: dict[str, str], home: Path) -> None:
        self.job_id = env["SKYLESS_JOB_ID"]
        self.instance_id = env.get("SKYLESS_INSTANCE_ID", "")
        self.node_ip = env.get("SKYLESS_NODE_IP", "127.0.0.1")
        self.cloud = env.get("SKYLESS_CLOUD", "local")
        self.watcher = metadata_watcher(self.cloud, env)
        self.home = home
        self.api = ApiClient(
            env["SKYLESS_API_URL"], self.job_id, self.instance_id, env["SKYLESS_AGENT_TOKEN"]
        )
        self.preempted = threading.Event()
        self.finished = threading.Event()
        self.runner: TaskRunner | None = None
        self.preempting_report: threading.Thread | None = None
        self.cancelled = threading.Event()
        self.api.on_cancel = self.on_cancel

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

    def heartbeat(self, every: float) -> None:
        while not self.finished.wait(every) and not self.cancelled.is_set():
            self.api.report("heartbeat")

    def watch_metadata(self, watcher: MetadataWatcher) -> None:
        while not self.finished.is_set() and not self.preempted.is_set():
            notice = watcher.check()
            if notice:
                self.on_preemption_notice(notice)
                return
            self.finished.wait(watcher.pause())

    def run(self) -> int:
        if self.watcher is not None:  # from the start: a notice may come while the cluster is still forming
            watch = threading.Thread(
                target=self.watch_metadata, args=(self.watcher,), name="metadata", daemon=True
            )
            watch.start()
        config = self.api.fetch_config(stop=lambda: self.preempted.is_set() or self.cancelled.is_set())
        if config is None:
            log("stopped before the task started")
            return 143
        heartbeat_seconds = float(config.get("heartbeat_seconds") or 30)
        threading.Thread(
            target=self.heartbeat, args=(heartbeat_seconds,), name="heartbeat", daemon=True
        ).start()

        shipper = LogShipper(config.get("log_upload"), local_copy=self.home / "skyless_task.log")
        self.runner = TaskRunner(shipper)
        if self.preempted.is_set() or self.cancelled.is_set():
            return self.finish("failed", 143, None, shipper)
        workdir = self.home / "sky_workdir"
        env = dict(os.environ)
        for name in ("SKYLESS_AGENT_TOKEN",):
            env.pop(name, None)
        setup_env = {**env, **skypilot_env(config, "setup")}
        run_env = {**env, **skypilot_env(config, "run")}
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
                code = self.runner.run(config["setup"], workdir, setup_env)
                if code != 0:
                    return self.finish("failed", code, f"setup exited with {code}", shipper)
            if not self.preempted.is_set() and not self.cancelled.is_set():
                self.api.report("running")
            code = self.runner.run(config["run"], workdir, run_env) if config.get("run") else 0
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


class ClusterApi:
    """The agent side of the cluster agent protocol: poll for work, report each job's phases."""

    def __init__(self, api_url: str, key: str, instance_id: str, token: str) -> None:
        self.base = "{}/cluster-agent/{}".format(api_url.rstrip("/"), urllib.parse.quote(key))
        self.instance_id = instance_id
        self.headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}

    def _post(self, path: str, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        data = json.dumps({"instance_id": self.instance_id, **payload}).encode("utf-8")
        status, body = with_retries(
            lambda: http_request(self.base + path, method="POST", body=data, headers=self.headers),
            attempts=3,
        )
        try:
            answer = json.loads(body.decode("utf-8") or "{}")
        except ValueError:
            answer = {}
        return status, answer if isinstance(answer, dict) else {}

    def poll(self, have: list[int], running: list[int], sessions: int) -> dict[str, Any] | None:
        """The API's answer; None when it could not be reached (ask again later). AgentHttpError when
        it refuses this node (the cluster is gone, or this is not one of its nodes): the agent exits."""
        try:
            status, answer = self._post("/poll", {"have": have, "running": running, "sessions": sessions})
        except OSError as error:
            log(f"poll failed: {error}")
            return None
        if status in (401, 403, 404):
            raise AgentHttpError(status, json.dumps(answer))
        return answer if status == 200 else None

    def report(self, job: int, phase: str, exit_code: int | None = None, message: str | None = None) -> bool:
        """POST a job's phase on this node; True when the API says the job goes on (False: stop it)."""
        payload: dict[str, Any] = {"phase": phase}
        if exit_code is not None:
            payload["exit_code"] = exit_code
        if message:
            payload["message"] = message[:2000]
        try:
            status, answer = self._post(f"/jobs/{int(job)}/status", payload)
        except OSError as error:
            log(f"could not report job {job} {phase}: {error}")
            return True
        if status >= 300:
            log(f"job {job} {phase} answered HTTP {status}")
            return status != 404
        return not answer.get("cancel")


def count_ssh_connections(paths: tuple[str, ...] = ("/proc/net/tcp", "/proc/net/tcp6")) -> int:
    """Established TCP connections to local port 22 (sshd's sessions), from the kernel's tables."""
    count = 0
    for path in paths:
        try:
            lines = Path(path).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == "01" and fields[1].rsplit(":", 1)[-1] == "0016":
                count += 1
    return count


def count_session_files(folder: Path) -> int:
    """Shells registered under `folder` (one file per shell, named by its pid) that are still alive."""
    count = 0
    for entry in folder.glob("*") if folder.is_dir() else []:
        try:
            os.kill(int(entry.name), 0)
        except ValueError:
            continue
        except PermissionError:
            count += 1
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                entry.unlink()
        else:
            count += 1
    return count


def install_ssh_keys(home: Path, keys: list[str]) -> None:
    """Add the public keys the control plane names to ~/.ssh/authorized_keys (once each)."""
    folder = home / ".ssh"
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / "authorized_keys"
    present = set(path.read_text().splitlines()) if path.exists() else set()
    missing = [key.strip() for key in keys if key.strip() and key.strip() not in present]
    if missing:
        with open(str(path), "a") as out:
            out.write("".join(key + "\n" for key in missing))
    if path.exists():
        os.chmod(str(path), 0o600)


class ClusterAgent:
    """A node of a named cluster: it stays up between jobs, polls the API for work, runs each job it is
    given (side by side when the control plane starts several), reports each job's phases, and tells
    the API how many shells are open on the node (so autostop leaves a node in use alone)."""

    def __init__(self, env: dict[str, str], home: Path) -> None:
        self.home = home
        self.cloud = env.get("SKYLESS_CLOUD", "local")
        self.api = ClusterApi(
            env["SKYLESS_API_URL"],
            env.get("SKYLESS_CLUSTER_KEY") or env["SKYLESS_JOB_ID"],
            env.get("SKYLESS_INSTANCE_ID", ""),
            env["SKYLESS_AGENT_TOKEN"],
        )
        self.state_dir = home / ".skyless"
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.started_file = self.state_dir / "started-jobs.json"
        self.started: set[int] = set(self._load_started())
        self.runners: dict[int, TaskRunner] = {}
        self.stopped: set[int] = set()  # jobs the API said to stop: no report after
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.exiting = threading.Event()
        self.ssh_keys: list[str] = []
        base = dict(os.environ)
        base.pop("SKYLESS_AGENT_TOKEN", None)
        self.base_env = base

    def _load_started(self) -> list[int]:
        try:
            return [int(n) for n in json.loads(self.started_file.read_text())]
        except (OSError, ValueError, TypeError):
            return []

    def _save_started(self) -> None:
        temporary = self.started_file.with_suffix(".tmp")
        temporary.write_text(json.dumps(sorted(self.started)[-500:]))
        temporary.replace(self.started_file)

    def sessions(self) -> int:
        count = count_session_files(self.state_dir / "sessions")
        if self.cloud != "local":
            count += count_ssh_connections()
        return count

    def run(self) -> int:
        poll_seconds = 2.0
        while not self.exiting.is_set():
            with self.lock:
                running = sorted(self.runners)
                have = sorted(self.started)[-200:]
            try:
                answer = self.api.poll(have, running, self.sessions())
            except AgentHttpError as error:
                log(f"the API refused this node: {error}")
                self.stop_all()
                return 3
            if answer is not None:
                poll_seconds = float(answer.get("poll_seconds") or poll_seconds)
                if answer.get("exit"):
                    log(f"the cluster is {answer.get('state')}: stopping")
                    self.stop_all()
                    return 0
                self.apply(answer)
            self.wake.wait(poll_seconds)
            self.wake.clear()
        self.stop_all()
        return 0

    def apply(self, answer: dict[str, Any]) -> None:
        keys = [str(k) for k in answer.get("ssh_keys") or []]
        if keys and keys != self.ssh_keys and self.cloud != "local":
            install_ssh_keys(self.home, keys)
            self.ssh_keys = keys
        for number in answer.get("cancel") or []:
            self.stop_job(int(number))
        for config in answer.get("start") or []:
            number = int(config["job"])
            with self.lock:
                if number in self.started:
                    continue
                self.started.add(number)
                self._save_started()
            threading.Thread(target=self.run_job, args=(config,), name=f"job-{number}", daemon=True).start()

    def stop_job(self, number: int) -> None:
        with self.lock:
            runner = self.runners.get(number)
            self.stopped.add(number)
        if runner is not None:
            log(f"stopping job {number}")
            runner.terminate()

    def stop_all(self) -> None:
        """End every job's processes (a stopping node must leave nothing behind)."""
        self.exiting.set()
        with self.lock:
            runners = list(self.runners.items())
            self.stopped.update(number for number, _ in runners)
        for _, runner in runners:
            runner.terminate()
        for _, runner in runners:
            runner.wait(3)
            runner.kill()

    def run_job(self, config: dict[str, Any]) -> None:
        number = int(config["job"])
        jobs_dir = self.state_dir / "jobs"
        jobs_dir.mkdir(exist_ok=True)
        shipper = LogShipper(config.get("log_upload"), local_copy=jobs_dir / f"{number}.log")
        runner = TaskRunner(shipper)
        runner.shares_agent_group = False  # each job in a session of its own: a cancel stops that job only
        with self.lock:
            self.runners[number] = runner
        try:
            self._run_job(number, config, runner, shipper)
        except Exception as error:  # a bug must not take the node's other jobs down with it
            log(f"job {number} crashed the agent's runner: {error!r}")
            self._finish(number, "failed", 1, f"agent error: {error!r}", shipper)
        finally:
            with self.lock:
                self.runners.pop(number, None)
            self.wake.set()

    def _run_job(self, number: int, config: dict[str, Any], runner: TaskRunner, shipper: LogShipper) -> None:
        workdir = self.home / "sky_workdir"
        setup = config.get("setup")
        if not self.api.report(number, "setting_up" if setup else "running"):
            self.stop_job(number)
            return self._finish(number, "failed", 143, None, shipper)
        try:
            if config.get("workdir_git"):
                clone_workdir(config["workdir_git"], workdir)
            else:
                fetch_workdir(config.get("workdir_url"), workdir)
            for note in fetch_file_mounts(config.get("file_mounts") or [], self.home, self.cloud == "local"):
                shipper.write(note.encode())
        except (OSError, ValueError, tarfile.TarError, AgentHttpError) as error:
            shipper.write((f"skyless: could not fetch the workdir or file mounts: {error}\n").encode())
            phase = "setup_failed" if setup else "failed"
            return self._finish(number, phase, 1, f"fetching workdir/file mounts failed: {error}", shipper)
        if setup:
            code = runner.run(setup, workdir, {**self.base_env, **skypilot_env(config, "setup")})
            if code != 0:
                return self._finish(number, "setup_failed", code, f"setup exited with {code}", shipper)
            if number not in self.stopped and not self.api.report(number, "running"):
                self.stop_job(number)
        run = config.get("run")
        code = runner.run(run, workdir, {**self.base_env, **skypilot_env(config, "run")}) if run else 0
        return self._finish(number, "succeeded" if code == 0 else "failed", code, None, shipper)

    def _finish(self, number: int, phase: str, code: int, message: str | None, shipper: LogShipper) -> None:
        shipper.close()
        with self.lock:
            stopped = number in self.stopped
        if stopped:
            log(f"job {number} stopped (exit {code})")
            return
        self.api.report(number, phase, code, message)


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
    if os.environ.get("SKYLESS_AGENT_MODE") == "cluster":
        return run_cluster_agent(home)
    agent = Agent(dict(os.environ), home)

    def on_sigterm(signum: int, frame: Any) -> None:
        agent.on_preemption_notice("SIGTERM")

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        code = agent.run()
    except AgentHttpError as error:
        log(f"the API refused this node: {error}")
        return 3
    if agent.preempting_report is not None:
        agent.preempting_report.join(30)
    if agent.preempted.is_set():
        if agent.runner is not None:
            agent.runner.wait(PREEMPT_GRACE_SECONDS)
            agent.runner.kill()
        if agent.watcher is not None:
            agent.watcher.acknowledge()  # the task has let go: the cloud may take the node now
    return 0 if code == 0 else 1


def run_cluster_agent(home: Path) -> int:
    """A named cluster's node: SIGTERM (the node is stopping) ends every job's processes, then the agent."""
    agent = ClusterAgent(dict(os.environ), home)

    def on_sigterm(signum: int, frame: Any) -> None:
        agent.exiting.set()
        agent.wake.set()

    signal.signal(signal.SIGTERM, on_sigterm)
    return agent.run()


if __name__ == "__main__":
    sys.exit(main())
