"""Starting the local runtime: clear errors instead of tracebacks, and runtime.json kept private."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from local_runtime.daemon_control import LocalRuntimeError, running_runtime, start_local_runtime
from local_runtime.moto_endpoint import free_port
from local_runtime.runtime_file import RuntimeInfo, read_runtime_info, runtime_json_path, write_runtime_info


def test_busy_port_is_a_user_error_naming_the_flag(tmp_path: Path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(LocalRuntimeError) as error:
            start_local_runtime(tmp_path, moto_port=free_port(), api_port=port)
    assert error.value.field == "--api-port"
    assert str(port) in str(error.value) and "--api-port N" in str(error.value)
    assert read_runtime_info(tmp_path) is None


def test_runtime_file_is_private_and_a_dead_pid_is_not_running(tmp_path: Path):
    info = RuntimeInfo(api_url="http://127.0.0.1:1", api_key="sky_secret", aws_endpoint_url="http://127.0.0.1:2",
                       pid=2**22 + 12345, moto_port=2, api_port=1, home=str(tmp_path))  # fmt: skip
    write_runtime_info(info)
    assert runtime_json_path(tmp_path).stat().st_mode & 0o777 == 0o600
    assert read_runtime_info(tmp_path) == info
    assert running_runtime(tmp_path) is None  # the recorded pid does not exist


def test_unreadable_runtime_file_counts_as_no_runtime(tmp_path: Path):
    path = runtime_json_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert read_runtime_info(tmp_path) is None
