"""The CLI's stdlib HTTP client keeps what httpx gave it: TLS verified (an unknown CA is refused, the CA
named by SSL_CERT_FILE is trusted), redirects not followed, the API's error body turned into its message,
and a body that is not JSON named as such — over real HTTPS and HTTP servers."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import trustme

from cli.api_client import SkylessClient
from cli.api_http import ApiError, ApiHttp, ApiUnreachableError


class Answers(BaseHTTPRequestHandler):
    seen: list[tuple[str, str, str | None, bytes]] = []

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        Answers.seen.append((self.command, self.path, self.headers.get("Authorization"), body))
        if self.path.startswith("/moved"):
            self.send_response(302)
            self.send_header("Location", "/jobs")
            self.end_headers()
            return
        status, payload = {
            "/refused": (422, b'{"message": "bad cpus", "field": "resources.cpus", "line": 3}'),
            "/html": (200, b"<html>not json</html>"),
        }.get(self.path.split("?")[0], (200, b'{"jobs": [], "cursor": null}'))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


def _serve(server: ThreadingHTTPServer) -> Iterator[str]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def plain() -> Iterator[str]:
    Answers.seen = []
    yield from (f"http://{address}" for address in _serve(ThreadingHTTPServer(("127.0.0.1", 0), Answers)))


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def tls(ca: trustme.CA) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Answers)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    yield from (f"https://{address}" for address in _serve(server))


def test_a_server_whose_ca_is_unknown_is_refused(tls: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)

    with pytest.raises(ApiUnreachableError, match="CERTIFICATE_VERIFY_FAILED"):
        ApiHttp(tls, "sky_k").call("GET", "/jobs")


def test_the_ca_named_by_ssl_cert_file_is_trusted(
    tls: str, ca: trustme.CA, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))

    page = SkylessClient(tls, "sky_k").job_rows(limit=5)

    assert page == {"jobs": [], "cursor": None}
    assert Answers.seen[-1][:3] == ("GET", "/jobs?limit=5", "Bearer sky_k")


def test_the_apis_refusal_names_its_field_and_line(plain: str) -> None:
    with pytest.raises(ApiError) as refused:
        ApiHttp(plain, None).call("POST", "/refused", json={"task": "x"})

    assert refused.value.status_code == 422
    assert "bad cpus" in str(refused.value) and refused.value.field == "resources.cpus"
    assert Answers.seen[-1] == ("POST", "/refused", None, b'{"task":"x"}')


def test_a_redirect_is_not_followed_and_a_body_that_is_not_json_is_named(plain: str) -> None:
    with pytest.raises(ApiError, match="302 with a body that is not JSON"):
        ApiHttp(plain, "k").call("GET", "/moved")
    with pytest.raises(ApiError, match="200 with a body that is not JSON"):
        ApiHttp(plain, "k").call("GET", "/html")

    assert [path for _, path, _, _ in Answers.seen] == ["/moved", "/html"]
