"""The stores' own emulators, started and stopped by the tests: Azurite (Microsoft's, from the npm registry;
`.ci/run` installs it into `.azurite/` of the repository) and gcp-storage-emulator (from PyPI, in the dev
extra); and a fake of Google's STS token exchange, which no emulator has.

What the emulators enforce, measured here: Azurite checks a SAS's signature, its container, its
permissions and its expiry (a read-only SAS cannot write; a SAS for one container opens no other).
gcp-storage-emulator checks no credentials at all: a GCS token's reach is proven by its access boundary
(what the fake STS was asked to mint), not by the emulator refusing it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from werkzeug.wrappers import Request, Response

from fakes.http_server import FakeServer, json_response

ROOT = Path(__file__).resolve().parents[2]
AZURITE_ACCOUNT = "devstoreaccount1"  # Azurite's well-known development account and key
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_until_serving(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url}: the emulator exited: {log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return  # it answers (an error for the bare URL is an answer)
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url}: the emulator did not start: {log.read_text()[-2000:]}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


def azurite_command() -> str | None:
    local = ROOT / ".azurite" / "node_modules" / ".bin" / "azurite-blob"
    return str(local) if local.exists() else shutil.which("azurite-blob")


class FakeGoogleSts:
    """Google's STS `POST /v1/token` token exchange (RFC 8693) as documented for downscoped tokens: a form
    with grant_type, subject_token(_type), requested_token_type and `options` (the access boundary, JSON);
    the answer {access_token, issued_token_type, token_type, expires_in}. It remembers each boundary it
    minted a token for, so a test can ask what a token may reach."""

    def __init__(self, source_token: str) -> None:
        self.source_token = source_token
        self.minted: dict[str, dict[str, Any]] = {}
        self.server = FakeServer(self._handle)
        self.url = self.server.url + "/v1/token"

    def _handle(self, request: Request) -> Response:
        form = request.form

        def error(description: str) -> Response:
            return json_response({"error": "invalid_request", "error_description": description}, 400)

        if request.path != "/v1/token" or request.method != "POST":
            return json_response({"error": "not_found"}, 404)
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange":
            return error("grant_type")
        for name in ("subject_token_type", "requested_token_type"):
            if form.get(name) != "urn:ietf:params:oauth:token-type:access_token":
                return error(name)
        if form.get("subject_token") != self.source_token:
            return json_response({"error": "invalid_grant"}, 400)
        boundary = json.loads(form.get("options") or "{}").get("accessBoundary")
        rules = (boundary or {}).get("accessBoundaryRules")
        if not rules or len(rules) > 10:
            return error("accessBoundary: 1 to 10 rules")
        token = f"downscoped-{len(self.minted) + 1}"
        self.minted[token] = boundary
        issued = "urn:ietf:params:oauth:token-type:access_token"
        return json_response(
            {"access_token": token, "expires_in": 3600, "token_type": "Bearer", "issued_token_type": issued}
        )


def rclone_or_skip() -> str:
    found = shutil.which("rclone")
    if found is None:
        pytest.skip("rclone is not installed (.ci/run: apt-get install rclone)")
    return found


def fuse_or_skip() -> None:
    if not os.path.exists("/dev/fuse") or (
        shutil.which("fusermount3") is None and shutil.which("fusermount") is None
    ):
        pytest.skip("no FUSE here (/dev/fuse and fusermount3, Debian's fuse3): rclone cannot mount")


class RecordingProxy:
    """Forwards every request to `target` (an emulator) and records the Authorization header it carried:
    which credentials a client really sent, where the emulator checks none. The body goes on whole, so the
    connection's own headers stay behind: a chunked upload (rclone's to GCS) forwarded still saying
    `Transfer-Encoding: chunked` came back from the emulator as 64 bytes for a 1-byte file, and rclone
    deleted it as corrupted on transfer and retried 10, 20, 40 s later."""

    HOP_BY_HOP = frozenset({"host", "connection", "keep-alive", "transfer-encoding", "content-length", "te",
                            "trailer", "upgrade"})  # fmt: skip

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self.authorizations: list[str | None] = []
        self.server = FakeServer(self._handle)
        self.url = self.server.url

    def _handle(self, request: Request) -> Response:
        import httpx

        self.authorizations.append(request.headers.get("Authorization"))
        path = request.full_path if request.query_string else request.path
        headers = {k: v for k, v in request.headers.items() if k.lower() not in self.HOP_BY_HOP}
        answer = httpx.request(
            request.method, self.target + path, content=request.get_data(), headers=headers
        )
        kept = {k: v for k, v in answer.headers.items() if k.lower() in ("content-type", "location", "etag")}
        return Response(answer.content, status=answer.status_code, headers=kept)
