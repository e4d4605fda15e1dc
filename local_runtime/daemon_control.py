"""Start, find and stop the local runtime daemon from another process (the CLI, tests, benchmarks)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from local_runtime.private_files import open_private_log, private_dir
from local_runtime.runtime_file import (
    DEFAULT_API_PORT,
    DEFAULT_MOTO_PORT,
    RuntimeInfo,
    local_dir,
    read_runtime_info,
    runtime_log_path,
    skyless_home,
)
from shared.config.env_names import ENV_HOME, ENV_LOCAL_API_PORT, ENV_LOCAL_MOTO_PORT, ENV_PYTHONPATH
from shared.errors import UserError

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class LocalRuntimeError(UserError):
    """The local runtime could not be started or reached."""


def process_is_daemon(pid: int) -> bool:
    """True when `pid` is alive and is a local runtime daemon (guards against a reused pid)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    cmdline = Path(f"/proc/{pid}/cmdline")
    if cmdline.exists():
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ")
        except OSError:
            return False
        if not text:  # a zombie: exited, not yet reaped by its parent
            return False
        return b"local_runtime.daemon" in text
    return True


def api_answers(api_url: str, timeout: float = 2.0) -> bool:
    """True when something answers HTTP at the API address (any status counts)."""
    try:
        with urllib.request.urlopen(f"{api_url}/openapi.json", timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, OSError):
        return False


def running_runtime(home: Path | None = None) -> RuntimeInfo | None:
    """The local runtime recorded in runtime.json when its daemon is alive, else None."""
    info = read_runtime_info(home)
    if info is None or not process_is_daemon(info.pid):
        return None
    return info


def start_local_runtime(
    home: Path | None = None,
    *,
    moto_port: int | None = None,
    api_port: int | None = None,
    timeout: float = 90.0,
) -> RuntimeInfo:
    """Start the daemon detached and wait until it has written runtime.json; return what it wrote."""
    home = home or skyless_home()
    existing = running_runtime(home)
    if existing is not None:
        return existing
    private_dir(home)
    private_dir(local_dir(home))
    moto_port = moto_port or int(os.environ.get(ENV_LOCAL_MOTO_PORT, DEFAULT_MOTO_PORT))
    api_port = api_port or int(os.environ.get(ENV_LOCAL_API_PORT, DEFAULT_API_PORT))
    from local_runtime.moto_endpoint import port_is_free  # moto loads only to start the runtime

    for name, port in (("--moto-port", moto_port), ("--api-port", api_port)):
        if not port_is_free(port):
            raise LocalRuntimeError(
                f"port {port} on 127.0.0.1 is already in use",
                field=name,
                hint=f"stop what uses it, or choose another port with `skyless local up {name} N`",
            )
    env = dict(os.environ)
    env[ENV_HOME] = str(home)
    env[ENV_PYTHONPATH] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get(ENV_PYTHONPATH, "")) if p)
    log_path = runtime_log_path(home)
    with os.fdopen(open_private_log(log_path), "ab") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "local_runtime.daemon",
                "--home",
                str(home),
                "--moto-port",
                str(moto_port),
                "--api-port",
                str(api_port),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(home),
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LocalRuntimeError(
                f"the local runtime exited during start (code {proc.returncode})",
                file=str(log_path),
                hint="read the log for the cause",
            )
        info = read_runtime_info(home)
        if info is not None and info.pid == proc.pid:
            return info
        time.sleep(0.1)
    proc.terminate()
    raise LocalRuntimeError(
        f"the local runtime did not become ready within {timeout:.0f} s",
        file=str(log_path),
        hint="read the log for the cause",
    )


def ensure_local_runtime(home: Path | None = None) -> RuntimeInfo:
    """The running local runtime, started on demand. What `skyless launch` calls with no deployment.

    Returns `RuntimeInfo(api_url, api_key, aws_endpoint_url, pid, moto_port, api_port, home)`;
    raises `LocalRuntimeError` (a UserError naming runtime.log) when it cannot start.
    """
    return start_local_runtime(home)


def stop_local_runtime(home: Path | None = None, *, timeout: float = 60.0) -> bool:
    """Stop the daemon (it stops its nodes and saves state first). False when none was running."""
    info = running_runtime(home)
    if info is None:
        return False
    os.kill(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not process_is_daemon(info.pid):
            return True
        time.sleep(0.1)
    os.kill(info.pid, signal.SIGKILL)
    return True
