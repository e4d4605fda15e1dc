"""The embedded AWS-compatible endpoint: moto in server mode, in this process, on 127.0.0.1."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from moto.server import ThreadedMotoServer
from werkzeug.serving import make_server

from local_runtime import moto_transactions

log = logging.getLogger("skyless.moto")


class PortInUseError(OSError):
    pass


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


IDLE_CONNECTION_SECONDS = 120  # a keep-alive connection no request came on for this long is closed


class _BoundedBody:
    """A request body read no further than its Content-Length, so that the next request on the connection
    is left where it is; what the application left unread is skipped afterwards."""

    def __init__(self, stream: BinaryIO, length: int) -> None:
        self._stream, self._left = stream, length

    def read(self, size: int | None = -1) -> bytes:
        size = self._left if size is None or size < 0 else min(size, self._left)
        data = self._stream.read(size) if size else b""
        self._left -= len(data)
        return data

    def readline(self, size: int | None = -1) -> bytes:
        size = self._left if size is None or size < 0 else min(size, self._left)
        data = self._stream.readline(size) if size else b""
        self._left -= len(data)
        return data

    def __iter__(self) -> Any:
        return iter(self.readline, b"")

    def skip_rest(self) -> None:
        while self._left and self.read(65536):
            pass


class KeepAliveRequestHandler(MotoRequestHandler):
    """moto's request handler with HTTP/1.1 keep-alive. werkzeug's development server closes every
    connection, so each call of a client paid a TCP connect, a new server thread and the hand-offs between
    them (of ~12 ms per DynamoDB call on a loaded machine, ~2 ms was moto's work). Here a connection serves
    request after request: the response always says its length, and a request body is read to its end
    before the next request line is."""

    protocol_version = "HTTP/1.1"
    timeout = IDLE_CONNECTION_SECONDS
    disable_nagle_algorithm = True  # else a response's second segment waits for the client's delayed ACK

    def setup(self) -> None:
        super().setup()
        connections: set[socket.socket] = getattr(self.server, "open_connections", set())
        connections.add(self.connection)

    def finish(self) -> None:
        getattr(self.server, "open_connections", set()).discard(self.connection)
        super().finish()

    def run_wsgi(self) -> None:
        if self.headers.get("Expect", "").lower().strip(" \t") == "100-continue":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        environ = self.make_environ()
        body = environ["wsgi.input"]
        if body is self.rfile:  # not chunked: werkzeug hands the socket's stream over as it is
            length = int(self.headers.get("Content-Length") or 0)
            body = environ["wsgi.input"] = _BoundedBody(self.rfile, length)
        answer: list[Any] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            answer[:] = [status, headers]
            return None

        try:
            chunks = self.server.app(environ, start_response)
            try:
                content = b"".join(chunks)
            finally:
                getattr(chunks, "close", lambda: None)()
            if isinstance(body, _BoundedBody):
                body.skip_rest()
            else:
                while body.read(65536):  # a chunked body, to its last chunk
                    pass
        except Exception:
            log.exception("the embedded endpoint failed on %s %s", self.command, self.path)
            self.close_connection = True
            answer, content = ["500 INTERNAL SERVER ERROR", [("Content-Type", "text/plain")]], b"error"
        status, headers = answer
        code, _, reason = status.partition(" ")
        self.send_response(int(code), reason)
        names = set()
        for name, value in headers:
            if name.lower() in ("connection", "transfer-encoding"):
                continue
            names.add(name.lower())
            self.send_header(name, value)
        if "content-length" not in names:
            self.send_header("Content-Length", str(len(content)))
        if self.command != "HEAD" and content:
            self._headers_buffer.append(b"\r\n" + content)
            self.flush_headers()  # headers and body in one segment
        else:
            self.end_headers()
        self.wfile.flush()

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """No line per request (moto's own server logs every call); errors are still logged."""

    def log_error(self, format: str, *args: Any) -> None:
        if not format.startswith("Request timed out"):  # an idle keep-alive connection, closed
            super().log_error(format, *args)


class SerializedDynamoDBMotoServer(ThreadedMotoServer):
    """moto's threaded server, with DynamoDB requests handled one at a time.

    moto's TransactWriteItems deep-copies the tables it touches while other threads may write them
    ("dictionary changed size during iteration", answered as a 500). The API and the dispatcher write
    concurrently, so DynamoDB calls are serialized; SQS long polls and S3 still run in parallel.
    DynamoDB Streams calls take the same turn: a failed transaction's writes stay in its stream shard until
    moto rolls the table back, and a read in between would hand out an event that never happened (and skip
    the next real one, which reuses its sequence number).
    """

    dynamodb_lock = threading.Lock()  # held while moto handles a DynamoDB call (one server per process)

    def _server_entry(self) -> None:
        inner = DomainDispatcherApplication(create_backend_app)
        dynamodb_lock = self.dynamodb_lock

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            if environ.get("HTTP_X_AMZ_TARGET", "").startswith(("DynamoDB_", "DynamoDBStreams_")):
                with dynamodb_lock:
                    return list(inner(environ, start_response))
            return inner(environ, start_response)

        self._server = make_server(
            self._ip_address, self._port, app, True, request_handler=KeepAliveRequestHandler
        )
        self._server.open_connections = set()  # type: ignore[attr-defined]
        self._server_ready_event.set()
        self._server.serve_forever()

    def stop(self) -> None:
        """Stop accepting, then close the connections clients keep open (their threads end with them)."""
        server = self._server
        super().stop()
        for connection in list(getattr(server, "open_connections", ())):
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        if server is not None:
            server.server_close()


def start_moto(port: int, host: str = "127.0.0.1") -> ThreadedMotoServer:
    """Start moto on host:port and wait until it accepts connections."""
    moto_transactions.install()  # transactions back up the items they touch, not whole tables
    if not port_is_free(port, host):
        raise PortInUseError(f"port {port} on {host} is already in use")
    server = SerializedDynamoDBMotoServer(ip_address=host, port=port, verbose=False)
    server.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex((host, port)) == 0:
                return server
        time.sleep(0.05)
    server.stop()
    raise OSError(f"moto did not start on {host}:{port}")
