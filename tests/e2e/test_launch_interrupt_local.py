"""Ctrl-C in the first seconds of `skyless launch`, as a user presses it at the installed entry point on a
fresh HOME: while Python imports the command, while the task is checked, while the local runtime starts.
Each time: exit 130, one plain line, never a traceback; and no job was submitted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from local_runtime.moto_endpoint import free_port

ROOT = Path(__file__).resolve().parents[2]
SKYLESS = Path(sys.executable).with_name("skyless")


@pytest.mark.parametrize("after_seconds", [0.2, 0.7, 1.5, 3.0])
def test_ctrl_c_early_in_launch_exits_130_without_a_traceback(tmp_path: Path, after_seconds: float) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKYLESS_", "AWS_"))}
    env.update(
        HOME=str(tmp_path), SKYLESS_LOCAL_MOTO_PORT=str(free_port()), SKYLESS_LOCAL_API_PORT=str(free_port())
    )
    launch = subprocess.Popen(
        [str(SKYLESS), "launch", "examples/hello.yaml"], env=env, cwd=ROOT, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        time.sleep(after_seconds)
        launch.send_signal(signal.SIGINT)
        out, err = launch.communicate(timeout=120)
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
        assert launch.returncode == 130, (launch.returncode, out, err)
        assert "interrupted" in err
        assert "submitted" not in out.replace("nothing was submitted", "")
    finally:
        launch.kill()
        stop_runtime(env, tmp_path / ".skyless" / "local" / "runtime.log")


def stop_runtime(env: dict[str, str], log: Path) -> None:
    """`local down` until the runtime the interrupted launch spawned has stopped: a runtime still starting
    has no runtime file yet, so one `local down` can miss it (and it then runs on after the test)."""
    deadline = time.monotonic() + 90
    while True:
        subprocess.run(
            [str(SKYLESS), "local", "down"], env=env, capture_output=True, timeout=120, check=False
        )
        if not log.exists() or "local runtime stopped" in log.read_text() or time.monotonic() > deadline:
            return
        time.sleep(1)
