"""Buckets on a node: S3 API calls signed with the node's scoped credentials (SigV4), a bucket prefix
mirrored as a folder with write-back, and the credential file rclone reads on a VM."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import string
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from node_agent.agent.api import AgentHttpError, with_retries

STORAGE_SYNC_SECONDS = float(os.environ.get("SKYLESS_STORAGE_SYNC_SECONDS", "5"))
CREDENTIAL_REFRESH_SECONDS = 600  # fetch fresh bucket credentials when these expire sooner than this


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
    """rclone (on a VM) reads the node's credentials: on S3 through `credential_process = cat <file>`; on
    GCS and Azure from its own config file, which the control plane sends as a template to fill in."""
    commands, creds = entry["rclone"], entry["credentials"]
    path = Path(os.path.expandvars(commands["credentials_file"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    if "credentials_template" in commands:
        text = string.Template(commands["credentials_template"]).substitute(creds)
        temporary = path.with_name(path.name + ".tmp")
        with os.fdopen(os.open(str(temporary), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
            out.write(text)
        os.replace(str(temporary), str(path))
        return
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
