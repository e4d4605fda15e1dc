"""The skyless node agent: fetch the task, run setup and run, ship logs, report status, watch for preemption.

Standard library only, Python >= 3.8: this one file is shipped to VMs inside user-data.
Started with SKYLESS_API_URL, SKYLESS_JOB_ID, SKYLESS_CLUSTER_ID, SKYLESS_INSTANCE_ID,
SKYLESS_BOOT_TOKEN (and optionally SKYLESS_NODE_IP, SKYLESS_CLOUD) in its environment; its working
directory is the node's home (the sandbox folder for the local cloud, ~ on a VM).

The boot token (from user-data) buys one config fetch for this node, bound to a key the agent makes at
start and keeps in memory; the answer carries the agent token it reports with. Nothing secret is written.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import io
import json
import os
import random
import secrets
import shutil
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
from datetime import datetime
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

RETRYABLE_STATUS = {429, 500, 502, 503, 504}
NOT_READY_STATUS = 425
STOP_STATUS = 410  # this node's attempt is over: kill the task and exit
LOG_FLUSH_SECONDS = float(os.environ.get("SKYLESS_LOG_FLUSH_SECONDS", "2"))
LOG_FLUSH_BYTES = 64 * 1024
PREEMPT_GRACE_SECONDS = float(os.environ.get("SKYLESS_PREEMPT_GRACE_SECONDS", "100"))
STOP_GRACE_SECONDS = float(os.environ.get("SKYLESS_STOP_GRACE_SECONDS", "10"))
METADATA_POLL_SECONDS = float(os.environ.get("SKYLESS_METADATA_POLL_SECONDS", "5"))
METADATA_WAIT = float(os.environ.get("SKYLESS_METADATA_WAIT_SECONDS", "60"))  # GCP long poll
STORAGE_SYNC_SECONDS = float(os.environ.get("SKYLESS_STORAGE_SYNC_SECONDS", "5"))
CREDENTIAL_REFRESH_SECONDS = 600  # fetch fresh bucket credentials when these expire sooner than this


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

    def __init__(self, api_url: str, job_id: str, instance_id: str, boot_token: str) -> None:
        self.api_url = api_url.rstrip("/")
        self.job_id = job_id
        self.instance_id = instance_id
        self.node_key = secrets.token_hex(32)  # binds the one config fetch to this process
        self.headers = {"Authorization": "Bearer " + boot_token, "Content-Type": "application/json"}
        self.on_cancel: Callable[[], None] | None = None  # the API says the job is over
        self.has_agent_token = False  # reports need the agent token the config answer carries
        self.on_stop: Callable[[str], None] | None = None  # the API says this node must stop and exit
        self.on_preempt: Callable[[str], None] | None = None  # a budget stops the job: a preemption notice

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
        headers = {**self.headers, "X-Skyless-Node-Key": self.node_key}
        while True:
            status, body = with_retries(lambda: http_request(url, headers=headers))
            if status == 200:
                config = json.loads(body.decode("utf-8"))
                if config.get("agent_token"):  # from now on the boot token opens nothing
                    self.headers = {**self.headers, "Authorization": "Bearer " + config["agent_token"]}
                    self.has_agent_token = True
                return config
            if status == STOP_STATUS:
                raise AgentStopped(body.decode("utf-8", "replace")[:300])
            if status != NOT_READY_STATUS or time.monotonic() > deadline:
                raise AgentHttpError(status, body.decode("utf-8", "replace"))
            if stop():
                return None
            time.sleep(poll_seconds)
            poll_seconds = min(poll_seconds * 1.5, 5.0)

    def storage_credentials(self) -> list[dict[str, Any]]:
        """Fresh credentials for the node's buckets (POST /agent/{job}/storage)."""
        url = f"{self.api_url}/agent/{urllib.parse.quote(self.job_id)}/storage"
        data = json.dumps({"instance_id": self.instance_id}).encode("utf-8")
        status, body = with_retries(lambda: http_request(url, method="POST", body=data, headers=self.headers))
        if status != 200:
            raise AgentHttpError(status, body.decode("utf-8", "replace"))
        return list(json.loads(body.decode("utf-8")).get("storage") or [])

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
        elif isinstance(answer, dict) and answer.get("preempt") and self.on_preempt is not None:
            self.on_preempt(f"the control plane: {str(answer['preempt'])[:300]}")
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


# -- buckets: S3 API calls signed with the node's scoped credentials (SigV4), copy and write-back --------


def sigv4_headers(
    method: str, url: str, region: str, creds: dict[str, Any], amz_date: str = ""
) -> dict[str, str]:
    """Headers that sign an S3 request (AWS Signature Version 4, unsigned payload)."""
    parts = urllib.parse.urlsplit(url)
    amz_date = amz_date or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    headers = {"host": parts.netloc, "x-amz-content-sha256": "UNSIGNED-PAYLOAD", "x-amz-date": amz_date}
    if creds.get("session_token"):
        headers["x-amz-security-token"] = creds["session_token"]
    pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    query = "&".join(sorted(f"{_q(k)}={_q(v)}" for k, v in pairs))
    names = sorted(headers)
    signed = "".join(f"{n}:{headers[n]}\n" for n in names)
    canonical = "\n".join([method, parts.path or "/", query, signed, ";".join(names), "UNSIGNED-PAYLOAD"])
    scope = f"{amz_date[:8]}/{region}/s3/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    key = ("AWS4" + creds["secret_access_key"]).encode()
    for part in (amz_date[:8], region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["Authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={creds['access_key_id']}/{scope}, "
        f"SignedHeaders={';'.join(names)}, Signature={signature}"
    )
    return headers


def _q(text: str) -> str:
    return urllib.parse.quote(text, safe="-_.~")


class BucketClient:
    """List, get, put and delete objects of one bucket (`entry` from the config's `storage`)."""

    def __init__(self, entry: dict[str, Any]) -> None:
        self.entry = entry

    def url(self, key: str = "", query: dict[str, str] | None = None) -> str:
        entry = self.entry
        parts = urllib.parse.urlsplit(entry["endpoint"].rstrip("/"))
        path = urllib.parse.quote(key, safe="/-_.~")
        if entry.get("addressing") == "virtual":
            url = f"{parts.scheme}://{entry['bucket']}.{parts.netloc}/{path}"
        else:
            url = f"{parts.scheme}://{parts.netloc}{parts.path}/{entry['bucket']}/{path}"
        return url + ("?" + "&".join(f"{_q(k)}={_q(v)}" for k, v in sorted(query.items())) if query else "")

    def call(self, method: str, url: str, body_path: Path | None = None, dest: Path | None = None) -> bytes:
        def once() -> tuple[int, bytes]:
            headers = sigv4_headers(method, url, self.entry["region"], self.entry["credentials"])
            body = None
            if body_path is not None:
                headers["Content-Length"] = str(body_path.stat().st_size)
                headers["Content-Type"] = "application/octet-stream"  # urllib's default is a form
                body = open(str(body_path), "rb")  # noqa: SIM115 - closed below, after the request
            request = urllib.request.Request(url, data=body, method=method, headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=600) as response:
                    if dest is None:
                        return response.status, response.read()
                    partial = dest.with_name(dest.name + ".skyless-part")
                    with open(str(partial), "wb") as out:
                        while True:
                            chunk = response.read(1 << 20)
                            if not chunk:
                                break
                            out.write(chunk)
                    os.replace(str(partial), str(dest))
                    return response.status, b""
            except urllib.error.HTTPError as error:
                return error.code, error.read()
            finally:
                if body is not None:
                    body.close()

        status, answer = with_retries(once)
        if status >= 300 and not (method == "DELETE" and status == 404):
            raise AgentHttpError(status, f"{method} {self.entry['bucket']}: {answer[:300]!r}")
        return answer

    def list(self, prefix: str) -> dict[str, int]:
        """{key: size} of every object under `prefix`."""
        found: dict[str, int] = {}
        token = None
        while True:
            query = {"list-type": "2", "prefix": prefix, **({"continuation-token": token} if token else {})}
            root = ElementTree.fromstring(self.call("GET", self.url("", query)))
            for item in root.iter():
                if item.tag.endswith("}Contents") or item.tag == "Contents":
                    fields = {child.tag.split("}")[-1]: child.text or "" for child in item}
                    found[fields["Key"]] = int(fields.get("Size") or 0)
            token = next(
                (e.text for e in root.iter() if e.tag.split("}")[-1] == "NextContinuationToken"), None
            )
            if not token:
                return found


class BucketMirror:
    """A bucket prefix as a folder (or one object as a file) of the node: pulled before setup; with
    write-back, changed files are put and deleted files removed, as rclone's write-back cache does."""

    def __init__(self, entry: dict[str, Any], target: Path) -> None:
        self.entry = entry
        self.client = BucketClient(entry)
        self.target = target
        self.base = entry["prefix"] + "/" if entry.get("prefix") else ""
        self.manifest: dict[str, tuple[int, int]] = {}
        self.ready = False
        self.lock = threading.Lock()

    def pull(self) -> int:
        prefix = self.entry.get("prefix") or ""
        objects = self.client.list(prefix) if prefix else {}
        if (
            self.entry["mode"] == "COPY"
            and prefix in objects
            and not any(k.startswith(self.base) for k in objects)
        ):
            self.target.parent.mkdir(parents=True, exist_ok=True)
            self.client.call("GET", self.client.url(prefix), dest=self.target)
            return 1
        objects = (
            {k: v for k, v in objects.items() if k.startswith(self.base)} if prefix else self.client.list("")
        )
        self.target.mkdir(parents=True, exist_ok=True)
        for key in sorted(objects):
            relative = key[len(self.base) :]
            if (
                not relative
                or relative.endswith("/")
                or ".." in relative.split("/")
                or relative.startswith("/")
            ):
                continue
            dest = self.target / relative
            dest.parent.mkdir(parents=True, exist_ok=True)
            self.client.call("GET", self.client.url(key), dest=dest)
            status = dest.stat()
            self.manifest[relative] = (status.st_size, status.st_mtime_ns)
        self.ready = True
        return len(self.manifest)

    def push(self) -> int:
        """Put what changed since the last pull or push, delete what was removed; answer how many."""
        if not self.ready or not self.entry.get("write_back"):
            return 0
        with self.lock:
            done, seen = 0, {}
            for folder, _, files in os.walk(str(self.target)):
                for name in files:
                    path = Path(folder) / name
                    if path.is_symlink() or name.endswith(".skyless-part"):
                        continue
                    relative = path.relative_to(self.target).as_posix()
                    status = path.stat()
                    seen[relative] = (status.st_size, status.st_mtime_ns)
                    if self.manifest.get(relative) != seen[relative]:
                        self.client.call("PUT", self.client.url(self.base + relative), body_path=path)
                        after = path.stat()
                        if (after.st_size, after.st_mtime_ns) == seen[relative]:  # else: again next round
                            self.manifest[relative] = seen[relative]
                        done += 1
            for relative in [r for r in self.manifest if r not in seen]:
                self.client.call("DELETE", self.client.url(self.base + relative))
                del self.manifest[relative]
                done += 1
            return done


def expires_in(entry: dict[str, Any]) -> float:
    """Seconds until the entry's credentials expire (a large number when it says nothing)."""
    text = (entry.get("credentials") or {}).get("expiration")
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp() - time.time()
    except ValueError:
        return 1e9


def write_credential_file(entry: dict[str, Any]) -> None:
    """rclone (on a VM) reads the node's credentials through `credential_process = cat <file>`."""
    commands, creds = entry["rclone"], entry["credentials"]
    path = Path(os.path.expandvars(commands["credentials_file"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"Version": 1, "AccessKeyId": creds["access_key_id"],
                "SecretAccessKey": creds["secret_access_key"], "SessionToken": creds.get("session_token"),
                "Expiration": creds.get("expiration")}  # fmt: skip
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(str(temporary), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(document, out)
    os.replace(str(temporary), str(path))
    config = Path(os.path.expandvars(commands["env"]["AWS_CONFIG_FILE"]))
    config.write_text(f"[profile {commands['env']['AWS_PROFILE']}]\ncredential_process = cat {path}\n")


def run_script(script: str, env: dict[str, str], timeout: float) -> tuple[int, str]:
    try:
        done = subprocess.run(
            ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return 124, "timed out"
    return done.returncode, (done.stdout + done.stderr)[-500:]


# -- the local cloud: a private mount namespace, so absolute mount paths are where the task names them --


def enter_mount_namespace(spec: dict[str, Any], argv: list[str]) -> None:
    """Unshare a mount namespace (and a user namespace when not root), build a root where each of
    spec["binds"] [target, source] is mounted at its target over a view of the real root, chroot into
    it and exec `argv`. The caller's files stay where they are; nothing outside this process tree sees it."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def check(result: int, what: str) -> None:
        if result != 0:
            number = ctypes.get_errno()
            raise OSError(number, f"{what}: {os.strerror(number)}")

    def mount(
        source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
    ) -> None:
        encode = lambda t: t.encode() if t is not None else None  # noqa: E731
        check(libc.mount(encode(source), encode(target), encode(fstype), ctypes.c_ulong(flags), encode(data)),
              f"mount {target}")  # fmt: skip

    uid, gid = os.geteuid(), os.getegid()
    check(libc.unshare(0x00020000 | (0x10000000 if uid else 0)), "unshare")  # CLONE_NEWNS, CLONE_NEWUSER
    if uid:
        for name, text in (
            ("setgroups", "deny"),
            ("uid_map", f"{uid} {uid} 1"),
            ("gid_map", f"{gid} {gid} 1"),
        ):
            with open(f"/proc/self/{name}", "w") as out:
                out.write(text)
    bind, recursive = 4096, 16384
    mount(None, "/", None, recursive | (1 << 18))  # MS_REC | MS_PRIVATE: nothing leaks to the host
    root = spec["root"]
    mount("tmpfs", root, "tmpfs", 0, "mode=755")
    tree: dict[str, Any] = {}
    for target, _ in spec["binds"]:
        node = tree
        for part in target.strip("/").split("/"):
            node = node.setdefault(part, {})

    def shadow(real: str | None, new: str, needed: dict[str, Any]) -> None:
        base = real if real and os.path.isdir(real) else ""
        for name in sorted(os.listdir(base)) if base else []:
            source, here = os.path.join(base, name), os.path.join(new, name)
            if name in needed:
                continue
            if os.path.islink(source):
                os.symlink(os.readlink(source), here)
                continue
            if os.path.isdir(source):
                os.mkdir(here)
            else:
                open(here, "w").close()
            with contextlib.suppress(OSError):
                mount(source, here, None, bind | recursive)
        for name, deeper in needed.items():
            if deeper:
                os.makedirs(os.path.join(new, name), exist_ok=True)
                real_child = os.path.join(real, name) if real else None
                shadow(real_child if real_child and not os.path.islink(real_child) else None,
                       os.path.join(new, name), deeper)  # fmt: skip

    shadow("/", root, tree)
    for target, source in spec["binds"]:
        here = root + target
        if os.path.isdir(source):
            os.makedirs(here, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(here), exist_ok=True)
            open(here, "a").close()
        mount(source, here, None, bind | recursive)
    libc.umount2((root + root).encode(), 2)  # the view's copy of itself (MNT_DETACH); absent is fine
    os.chroot(root)
    os.chdir(spec.get("cwd") or "/")
    os.execvp(argv[0], argv)


def namespace_binds(paths: list[str], home: Path) -> list[list[str]]:
    """[target, where it is kept under the node's home] for each absolute path, outermost only."""
    absolute = sorted({p.rstrip("/") for p in paths if p.startswith("/") and p.rstrip("/")})
    outer = [p for p in absolute if not any(p.startswith(o + "/") for o in absolute)]
    return [[p, str(mount_path(p, home, sandboxed=True))] for p in outer]


def namespace_command(binds: list[list[str]], home: Path, cwd: Path) -> list[str]:
    spec = {"root": str(home / ".skyless-root"), "binds": binds, "cwd": str(cwd)}
    (home / ".skyless-root").mkdir(parents=True, exist_ok=True)
    return [sys.executable, os.path.abspath(__file__), "--mount-namespace", json.dumps(spec)]


def mount_namespace_works(home: Path) -> bool:
    """True when this machine lets a node give its task a private mount namespace."""
    probe = home / ".skyless-probe"
    probe.mkdir(parents=True, exist_ok=True)
    command = namespace_command([["/skyless-probe", str(probe)]], home, home)
    try:
        done = subprocess.run([*command, "test", "-d", "/skyless-probe"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def skypilot_env(config: dict[str, Any], stage: str) -> dict[str, str]:
    """The task's own envs and secrets, with SkyPilot's variables for `stage` ("setup" or "run") over
    them, as SkyPilot lets its own win. The API computes those variables (shared/jobs/node_env.py)."""
    env = {str(key): "" if value is None else str(value) for key, value in (config.get("envs") or {}).items()}
    env.update({str(key): str(value) for key, value in (config.get(f"{stage}_env") or {}).items()})
    env["SKYLESS_ATTEMPT"] = str(config.get("attempt", 0))  # SKYPILOT_TASK_ID stays the same across attempts
    return env


CONTAINER_HOME = "/root"  # `~` inside a task's container, as SkyPilot's containers run as root


def container_runtime() -> str | None:
    """docker, else podman: the first that answers here (a docker client without its daemon does not)."""
    for name in ("docker", "podman"):
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            if subprocess.run([name, "info"], capture_output=True, timeout=60).returncode == 0:
                return name
    return None


def container_path(path: str) -> str:
    """Where a mount's path is inside the container: `~` is CONTAINER_HOME, absolute paths stay."""
    path = path.rstrip("/") or "/"
    if path == "~" or path.startswith("~/"):
        return CONTAINER_HOME + path[1:]
    return path if path.startswith("/") else f"{CONTAINER_HOME}/{path}"


class Container:
    """The node's one container (`image_id: docker:...`): started once, `setup` and `run` exec'd in it."""

    def __init__(self, runtime: str, name: str, image: str, binds: list[list[str]], gpus: bool) -> None:
        self.runtime, self.name, self.image, self.binds, self.gpus = runtime, name, image, binds, gpus

    def run_argv(self, labels: dict[str, str]) -> list[str]:
        # --stop-timeout 0: `rm -f` kills at once (podman would wait 10 s on a PID 1 that ignores SIGTERM)
        argv = [self.runtime, "run", "-d", "--name", self.name, "--network", "host", "--stop-timeout", "0"]
        for key, value in sorted(labels.items()):
            argv += ["--label", f"{key}={value}"]
        if self.gpus:
            argv += ["--gpus", "all"] if self.runtime == "docker" else ["--device", "nvidia.com/gpu=all"]
        for host, inside in self.binds:
            argv += ["-v", f"{host}:{inside}"]
        return [*argv, "--entrypoint", "sleep", self.image, "infinity"]

    def exec_argv(self, script: str, names: list[str]) -> list[str]:
        """Values stay in the exec's environment: `-e NAME` passes them without putting them in argv."""
        argv = [self.runtime, "exec", "-w", container_path("~/sky_workdir")]
        for name in sorted(names):
            argv += ["-e", name]
        return [*argv, self.name, "bash", "-c", script]

    def signal(self, name: str) -> None:
        """Send every process in the container but its init `name` (docker exec passes no signals on)."""
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run([self.runtime, "exec", self.name, "bash", "-c", f"kill -{name} -1"],
                           capture_output=True, timeout=30)  # fmt: skip

    def remove(self) -> None:
        """In a session of its own: a node whose process group is killed meanwhile does not cut it short
        (podman would forget the container while it still runs)."""
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run([self.runtime, "rm", "-f", self.name], capture_output=True, timeout=120,
                           start_new_session=True)  # fmt: skip


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
        self.command_prefix: list[str] = []  # e.g. the private mount namespace of a local node
        self.container: Container | None = None  # the task's `image_id: docker:...`, once started

    def run(self, script: str, cwd: Path, env: dict[str, str], names: Any = ()) -> int:
        """`names`: the variables a container gets (the host's own environment stays outside)."""
        with self.lock:
            if self.terminated:
                return 143
            box = self.container
            self.process = subprocess.Popen(
                box.exec_argv(script, list(names)) if box else [*self.command_prefix, "bash", "-c", script],
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
            if self.container is not None:
                threading.Thread(target=self.container.signal, args=("TERM",), daemon=True).start()

    def kill(self) -> None:
        """SIGKILL whatever is left of the task (in a shared group, that ends the agent as well)."""
        process = self.process
        if self.container is not None:
            self.container.remove()
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
        self.cluster_id = env.get("SKYLESS_CLUSTER_ID", "")
        self.watcher = metadata_watcher(self.cloud, env)
        self.home = home
        self.api = ApiClient(env["SKYLESS_API_URL"], self.job_id, self.instance_id, env["SKYLESS_BOOT_TOKEN"])
        self.preempted = threading.Event()
        self.finished = threading.Event()
        self.runner: TaskRunner | None = None
        self.preempting_report: threading.Thread | None = None
        self.cancelled = threading.Event()
        self.stopping = threading.Event()
        self.api.on_cancel = self.on_cancel
        self.mirrors: list[BucketMirror] = []
        self.mounted: list[dict[str, Any]] = []  # rclone mounts of a VM
        self.storage: list[dict[str, Any]] = []
        self.storage_lock = threading.Lock()
        self.api.on_stop = self.on_stop
        self.api.on_preempt = self.on_preemption_notice

    def on_preemption_notice(self, reason: str) -> None:
        """Pass SIGTERM to the task so it can checkpoint, and report `preempting` once. With buckets to
        write back, the node first writes back what the task has, then (once the task has stopped) what
        it wrote last, and only then lets go."""
        if self.preempted.is_set() or self.cancelled.is_set():
            return  # includes the SIGTERM the agent sent its own process group
        self.preempted.set()
        log(f"preemption notice: {reason}")
        if not self.api.has_agent_token:
            return  # before its config nothing runs, and the boot token opens only the config: the cloud's
            # own preemption event tells the control plane
        self.preempting_report = threading.Thread(
            target=self.let_go, args=(reason,), name="report-preempting", daemon=True
        )
        self.preempting_report.start()

    def let_go(self, reason: str) -> None:
        writes_back = any(e.get("write_back") for e in self.storage)
        if writes_back:
            self.write_back("the preemption notice")
        if self.runner is not None:
            self.runner.terminate()
            if writes_back:
                self.runner.wait(PREEMPT_GRACE_SECONDS)
                self.write_back("the task stopped")
        self.api.report("preempting", None, reason)

    def start_storage(self, config: dict[str, Any], env: dict[str, str], shipper: LogShipper) -> None:
        """Bring every bucket to its path before setup: rclone mounts on a VM, copies on the local cloud."""
        self.storage = list(config.get("storage") or [])
        for entry in self.storage:
            target = mount_path(entry["path"], self.home, self.cloud == "local")
            if entry.get("rclone") and self.cloud != "local":
                write_credential_file(entry)
                code, output = run_script(entry["rclone"]["mount"], {**env, **entry["rclone"]["env"]}, 600)
                if code != 0:
                    raise ValueError(f"mounting {entry['path']} failed: {output}")
                self.mounted.append(entry)
                continue
            mirror = BucketMirror(entry, target)
            count = mirror.pull()
            self.mirrors.append(mirror)
            url = "{}://{}/{}".format({"gcs": "gs"}.get(entry["store"], entry["store"]), entry["bucket"],
                                      entry.get("prefix") or "")  # fmt: skip
            shipper.write(
                f"skyless: {url} -> {entry['path']} ({entry['mode']}, {count} object(s))\n".encode()
            )
        if any(e.get("write_back") for e in self.storage):
            threading.Thread(target=self.sync_storage, name="storage-sync", daemon=True).start()

    def sync_storage(self) -> None:
        while not self.finished.wait(STORAGE_SYNC_SECONDS) and not self.preempted.is_set():
            with contextlib.suppress(OSError, ValueError, AgentHttpError):
                if min(expires_in(e) for e in self.storage) < CREDENTIAL_REFRESH_SECONDS:
                    fresh = {e["path"]: e for e in self.api.storage_credentials()}
                    for entry in self.storage:
                        entry["credentials"] = fresh.get(entry["path"], entry)["credentials"]
                        if entry.get("rclone"):
                            write_credential_file(entry)
            self.write_back()

    def write_back(self, why: str = "") -> list[str]:
        """Write every write-back bucket back now; answer the errors (none: all landed)."""
        errors = []
        with self.storage_lock:
            for mirror in self.mirrors:
                try:
                    count = mirror.push()
                except (OSError, AgentHttpError) as error:
                    errors.append(f"writing back {mirror.entry['path']} failed: {error}")
                    continue
                if why and count:
                    log(f"wrote back {count} change(s) of {mirror.entry['path']} on {why}")
            for entry in self.mounted:
                code, output = run_script(entry["rclone"]["flush"], dict(os.environ), PREEMPT_GRACE_SECONDS)
                if code != 0:
                    errors.append(f"writing back {entry['path']} failed: {output}")
        return errors

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
        for name in ("SKYLESS_BOOT_TOKEN", "SKYLESS_AGENT_TOKEN"):
            env.pop(name, None)
        stages = {stage: skypilot_env(config, stage) for stage in ("setup", "run")}
        setup_env, run_env = {**env, **stages["setup"]}, {**env, **stages["run"]}
        box = config.get("container")
        add_job_group_hosts(config)
        try:
            self.api.report("setting_up")
            try:
                if config.get("workdir_git"):
                    clone_workdir(config["workdir_git"], workdir)
                else:
                    fetch_workdir(config.get("workdir_url"), workdir)
                sandboxed = self.cloud == "local"
                mounts = config.get("file_mounts") or []
                paths = [m["path"] for m in mounts] + [e["path"] for e in config.get("storage") or []]
                binds = namespace_binds(paths, self.home) if sandboxed and not box else []
                if binds:
                    self.runner.command_prefix = namespace_command(binds, self.home, workdir)
                notes = fetch_file_mounts(mounts, self.home, sandboxed)
                if not binds:
                    for note in notes:
                        shipper.write(note.encode())
                self.start_storage(config, env, shipper)
            except (OSError, ValueError, tarfile.TarError, AgentHttpError, ElementTree.ParseError) as error:
                shipper.write((f"skyless: could not fetch the workdir or file mounts: {error}\n").encode())
                return self.finish("failed", 1, f"fetching workdir/file mounts failed: {error}", shipper)
            if self.preempted.is_set() or self.cancelled.is_set():
                return self.finish("failed", 143, None, shipper)
            if box:
                problem = self.start_container(box, config, paths, workdir, shipper)
                if problem:
                    shipper.write(f"skyless: {problem}\n".encode())
                    return self.finish("failed", 1, problem, shipper)
            if config.get("setup"):
                code = self.runner.run(config["setup"], workdir, setup_env, stages["setup"])
                if code != 0:
                    return self.finish("failed", code, f"setup exited with {code}", shipper)
            if not self.preempted.is_set() and not self.cancelled.is_set():
                self.api.report("running")
            code = self.runner.run(config["run"], workdir, run_env, stages["run"]) if config.get("run") else 0
            return self.finish("succeeded" if code == 0 else "failed", code, None, shipper)
        finally:
            self.finished.set()

    def start_container(
        self,
        box: dict[str, Any],
        config: dict[str, Any],
        paths: list[str],
        workdir: Path,
        shipper: LogShipper,
    ) -> str | None:
        """Log in (the password goes on stdin), start the node's container with the workdir and mounts
        bound in, and forget the login (the pull is done); answer what went wrong, or None."""
        runtime = container_runtime()
        if runtime is None:
            return (
                f"image_id docker:{box['image']}: no container runtime (docker or podman) works on this node"
            )
        logins = self.home / ".skyless-registry"  # not the user's own docker login; removed once pulled
        env = dict(os.environ)
        name = "".join(
            c if c.isalnum() or c in "_.-" else "-" for c in f"skyless-{self.job_id}-{self.instance_id}"
        )
        sandboxed = self.cloud == "local"
        binds = [[str(workdir), container_path("~/sky_workdir")]]
        binds += [[str(mount_path(p, self.home, sandboxed)), container_path(p)] for p in paths]
        gpus = int(config.get("gpus_per_node") or 0) > 0 and not sandboxed
        container = Container(runtime, name, box["image"], binds, gpus)
        container.remove()  # an earlier agent's, on this node
        labels = {"skyless-job": self.job_id, "skyless-cluster": self.cluster_id}
        steps: list[tuple[list[str], str | None]] = [(container.run_argv(labels), None)]
        if box.get("registry"):
            password = str((config.get("envs") or {}).get("SKYPILOT_DOCKER_PASSWORD") or "")
            login = [runtime, "login", "--username", box["username"], "--password-stdin", box["registry"]]
            steps.insert(0, (login, password))
            env.update(DOCKER_CONFIG=str(logins), REGISTRY_AUTH_FILE=str(logins / "auth.json"))
        workdir.mkdir(parents=True, exist_ok=True)
        try:
            for argv, stdin in steps:
                try:
                    done = subprocess.run(
                        argv, input=(stdin or "").encode(), capture_output=True, timeout=3600, env=env
                    )
                except (OSError, subprocess.TimeoutExpired) as error:
                    return f"{runtime} {argv[1]} failed for {box['image']}: {error}"
                shipper.write(done.stderr[-2000:])
                if done.returncode != 0:
                    return f"{runtime} {argv[1]} failed for {box['image']}: {done.stderr.decode()[-300:]}"
        finally:
            shutil.rmtree(logins, ignore_errors=True)
        if self.runner is not None:
            self.runner.container = container
        return None

    def finish(self, phase: str, code: int, message: str | None, shipper: LogShipper) -> int:
        if self.runner is not None and self.runner.container is not None:
            self.runner.container.remove()
        if not self.preempted.is_set():
            errors = self.write_back("the end of the task")  # before the node lets go
            for error in errors:
                shipper.write(f"skyless: {error}\n".encode())
            if errors and phase == "succeeded":
                phase, code, message = "failed", 1, "; ".join(errors)
        shipper.close()
        if self.preempted.is_set():
            # The task ended because its node is going away: that is a preemption, not the task's result.
            log(f"task stopped after the preemption notice (exit {code})")
            if self.preempting_report is not None:
                self.preempting_report.join(PREEMPT_GRACE_SECONDS + 60)
            return code
        if self.cancelled.is_set():
            log(f"task stopped because the job is over (exit {code})")
            return code
        self.api.report(phase, code, message)
        return code


def add_job_group_hosts(config: dict[str, Any], hosts_file: Path = Path("/etc/hosts")) -> bool:
    """Make a job group's `<task>-<rank>.<group>` names resolve on a VM, as SkyPilot does: add the lines
    the API sent (SKYLESS_JOBGROUP_HOSTS) to /etc/hosts once. Never on the local cloud, whose nodes share
    the machine's own hosts file; nowhere the file cannot be written (not root). True when written."""
    lines = str((config.get("run_env") or {}).get("SKYLESS_JOBGROUP_HOSTS") or "").splitlines()
    if not lines or config.get("cloud") == "local" or not os.access(hosts_file, os.W_OK):
        return False
    try:
        present = set(hosts_file.read_text().splitlines())
        missing = [line for line in lines if line not in present]
        if missing:
            with hosts_file.open("a") as out:
                out.write("\n# skyless job group\n" + "\n".join(missing) + "\n")
    except OSError as error:
        log(f"could not add the job group's hosts: {error}")
        return False
    return True


def main() -> int:
    if len(sys.argv) > 3 and sys.argv[1] == "--mount-namespace":
        enter_mount_namespace(json.loads(sys.argv[2]), sys.argv[3:])  # execs the task; returns only on error
    home = Path(os.environ.get("SKYLESS_NODE_HOME") or os.getcwd())
    missing = [
        name
        for name in ("SKYLESS_API_URL", "SKYLESS_JOB_ID", "SKYLESS_BOOT_TOKEN")
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
    for entry in agent.mounted:
        run_script(entry["rclone"]["unmount"], dict(os.environ), 60)
    if agent.preempted.is_set() and agent.watcher is not None:
        agent.watcher.acknowledge()  # the task and its buckets have let go: the cloud may take the node now
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
