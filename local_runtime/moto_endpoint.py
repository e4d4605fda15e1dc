"""The embedded AWS-compatible endpoint: moto in server mode, in this process, on 127.0.0.1."""

from __future__ import annotations

import socket
import time

from moto.server import ThreadedMotoServer


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


def start_moto(port: int, host: str = "127.0.0.1") -> ThreadedMotoServer:
    """Start moto on host:port and wait until it accepts connections."""
    if not port_is_free(port, host):
        raise PortInUseError(f"port {port} on {host} is already in use")
    server = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
    server.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex((host, port)) == 0:
                return server
        time.sleep(0.05)
    server.stop()
    raise OSError(f"moto did not start on {host}:{port}")
