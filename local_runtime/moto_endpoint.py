"""The embedded AWS-compatible endpoint: moto in server mode, in this process, on 127.0.0.1."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from moto.server import ThreadedMotoServer
from werkzeug.serving import make_server

from local_runtime import moto_transactions


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


class SerializedDynamoDBMotoServer(ThreadedMotoServer):
    """moto's threaded server, with DynamoDB requests handled one at a time.

    moto's TransactWriteItems deep-copies the tables it touches while other threads may write them
    ("dictionary changed size during iteration", answered as a 500). The API and the dispatcher write
    concurrently, so DynamoDB calls are serialized; SQS long polls and S3 still run in parallel.
    DynamoDB Streams calls take the same turn: a failed transaction's writes stay in its stream shard until
    moto rolls the table back, and a read in between would hand out an event that never happened (and skip
    the next real one, which reuses its sequence number).
    """

    def _server_entry(self) -> None:
        inner = DomainDispatcherApplication(create_backend_app)
        dynamodb_lock = threading.Lock()

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            if environ.get("HTTP_X_AMZ_TARGET", "").startswith(("DynamoDB_", "DynamoDBStreams_")):
                with dynamodb_lock:
                    return list(inner(environ, start_response))
            return inner(environ, start_response)

        self._server = make_server(
            self._ip_address, self._port, app, True, request_handler=MotoRequestHandler
        )
        self._server_ready_event.set()
        self._server.serve_forever()


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
