"""Ctrl-C in the first seconds of `skyless launch`, as a user presses it at the installed entry point on a
fresh HOME: while Python imports the command, while the task is checked, while the local runtime starts, and
once the job is submitted and followed. Each time: exit 130, one plain line, never a traceback. Before the
job is submitted nothing is submitted; after, the job keeps running and the line says how to cancel it.

The later phases are reached by what the launch has printed, not by a delay: on a fast machine three seconds
is already past the submission."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from local_runtime.moto_endpoint import free_port

ROOT = Path(__file__).resolve().parents[2]
SKYLESS = Path(sys.executable).with_name("skyless")
STARTING = "Starting the local runtime"
SUBMITTED = " submitted ("  # "Job job-… submitted (PENDING)."


class Launch:
    """`skyless launch examples/hello.yaml` with its stderr read line by line as it comes."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [str(SKYLESS), "launch", "examples/hello.yaml"], env=env, cwd=ROOT, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        self.err_lines: list[str] = []
        self.out_lines: list[str] = []
        self._changed = threading.Condition()
        self._readers = [
            threading.Thread(target=self._read, args=(self.process.stderr, self.err_lines), daemon=True),
            threading.Thread(target=self._read, args=(self.process.stdout, self.out_lines), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, stream: object, into: list[str]) -> None:
        for line in stream:  # type: ignore[attr-defined]
            with self._changed:
                into.append(line)
                self._changed.notify_all()

    def wait_for(self, text: str, timeout: float = 120) -> None:
        with self._changed:
            found = self._changed.wait_for(lambda: text in self.printed(), timeout=timeout)
        assert found, f"launch never printed {text!r}: {self.printed()}"

    def printed(self) -> str:
        return "".join(self.out_lines) + "".join(self.err_lines)

    def interrupt(self) -> tuple[int, str, str]:
        self.process.send_signal(signal.SIGINT)
        code = self.process.wait(timeout=120)
        for reader in self._readers:
            reader.join(timeout=10)
        return code, "".join(self.out_lines), "".join(self.err_lines)


@pytest.mark.parametrize("when", ["0.2s", "0.7s", STARTING, SUBMITTED])
def test_ctrl_c_early_in_launch_exits_130_without_a_traceback(tmp_path: Path, when: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKYLESS_", "AWS_"))}
    env.update(
        HOME=str(tmp_path), SKYLESS_LOCAL_MOTO_PORT=str(free_port()), SKYLESS_LOCAL_API_PORT=str(free_port())
    )
    launch = Launch(env)
    try:
        if when.endswith("s") and when[:-1].replace(".", "").isdigit():
            time.sleep(float(when[:-1]))
        else:
            launch.wait_for(when)
        code, out, err = launch.interrupt()
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
        assert code == 130, (code, out, err)
        if when == SUBMITTED:
            assert "Stopped following; the job keeps running. Cancel it with: skyless cancel job-" in err, err
        elif "Stopped following" not in err:
            assert "interrupted" in err, err
            assert SUBMITTED not in out, out
    finally:
        launch.process.kill()
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
