"""The task runner: SkyPilot's environment for a stage, and one bash script run in its own process group
with its output streamed to the log shipper."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from node_agent.agent.containers import Container
from node_agent.agent.logs import LogShipper


def run_script(script: str, env: dict[str, str], timeout: float) -> tuple[int, str]:
    try:
        done = subprocess.run(
            ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return 124, "timed out"
    return done.returncode, (done.stdout + done.stderr)[-500:]


def skypilot_env(config: dict[str, Any], stage: str) -> dict[str, str]:
    """The task's own envs and secrets, with SkyPilot's variables for `stage` ("setup" or "run") over
    them, as SkyPilot lets its own win. The API computes those variables (shared/jobs/node_env.py)."""
    env = {str(key): "" if value is None else str(value) for key, value in (config.get("envs") or {}).items()}
    env.update({str(key): str(value) for key, value in (config.get(f"{stage}_env") or {}).items()})
    env["SKYLESS_ATTEMPT"] = str(config.get("attempt", 0))  # SKYPILOT_TASK_ID stays the same across attempts
    return env


class TaskRunner:
    """Runs one bash script in its own process group, streaming its output to the log shipper."""

    def __init__(self, shipper: LogShipper) -> None:
        self.shipper = shipper
        self.process: subprocess.Popen | None = None
        self.lock = threading.Lock()
        self.terminated = False
        # When the agent leads its own process group (the local cloud starts it so, user-data uses
        # setsid), the task stays in that group: whoever kills the node's group kills the task too.
        # Otherwise the task gets a session of its own so signals reach all of it and nothing else.
        self.shares_agent_group = os.getpgrp() == os.getpid()
        self.command_prefix: list[str] = []  # e.g. the private mount namespace of a local node
        self.container: Container | None = None  # the task's `image_id: docker:...`, once started

    def run(self, script: str, cwd: Path, env: dict[str, str], names: Any = ()) -> int:
        """`names`: the variables a container gets (the host's own environment stays outside)."""
        with self.lock:
            if self.terminated:
                return 143
            box = self.container
            self.process = subprocess.Popen(
                box.exec_argv(script, list(names)) if box else [*self.command_prefix, "bash", "-c", script],
                cwd=str(cwd),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=not self.shares_agent_group,
            )
        stdout = self.process.stdout
        assert stdout is not None
        for line in iter(stdout.readline, b""):
            sys.stdout.buffer.write(line)
            sys.stdout.flush()
            self.shipper.write(line)
        return self.process.wait()

    def terminate(self) -> None:
        """SIGTERM the task's whole process group so it can checkpoint; no new script starts after."""
        with self.lock:
            self.terminated = True
            process = self.process
        if process is not None and process.poll() is None:
            self._signal_task(process, signal.SIGTERM)
            if self.container is not None:
                threading.Thread(target=self.container.signal, args=("TERM",), daemon=True).start()

    def kill(self) -> None:
        """SIGKILL whatever is left of the task (in a shared group, that ends the agent as well)."""
        process = self.process
        if self.container is not None:
            self.container.remove()
        if process is not None and process.poll() is None:
            self._signal_task(process, signal.SIGKILL)

    def _signal_task(self, process: subprocess.Popen, signum: int) -> None:
        # In a shared group the agent receives its own SIGTERM too; its handler ignores repeats.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(os.getpgrp() if self.shares_agent_group else process.pid, signum)

    def wait(self, timeout: float) -> None:
        process = self.process
        if process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout)
