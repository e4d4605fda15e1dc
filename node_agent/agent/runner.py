"""The task runner: SkyPilot's environment for a stage, and each `setup`/`run` script run as SkyPilot runs
it (sky/skylet/log_lib.py: make_task_bash_script, run_bash_command_with_log), in its own process group, its
output streamed to the log shipper cut at each newline or carriage return as SkyPilot's log reader cuts it."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

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


# SkyPilot's runtime setup on every VM (sky/skylet/constants.py, CONDA_INSTALLATION_COMMANDS): Miniconda in
# ~/miniconda3 when `conda` is not there (with ~/.bashrc read as a task reads it), base activated, then
# `conda init` so that ~/.bashrc sets it up for setup and run.
CONDA_INSTALL = (
    "source ~/.bashrc; which conda > /dev/null 2>&1 || { curl -fsSL https://repo.anaconda.com/miniconda/"
    "Miniconda3-py310_23.11.0-2-Linux-$(uname -m).sh -o /tmp/Miniconda3-Linux.sh && { bash "
    '/tmp/Miniconda3-Linux.sh -b -p ~/miniconda3 || true; eval "$(~/miniconda3/bin/conda shell.bash hook)" '
    "&& conda init && conda config --set auto_activate_base true; }; }; "
    'grep -q "# >>> conda initialize >>>" ~/.bashrc || conda init'
)


def install_conda(env: dict[str, str], timeout: float = 900) -> str | None:
    """Make conda available to the node's tasks as on a SkyPilot node; answer what went wrong, or None."""
    try:
        done = subprocess.run([*INTERACTIVE_BASH, "-c", CONDA_INSTALL], env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"installing Miniconda failed: {error}"
    return None if done.returncode == 0 else f"installing Miniconda failed: {done.stderr.strip()[-300:]}"


def skypilot_env(config: dict[str, Any], stage: str) -> dict[str, str]:
    """The task's own envs and secrets, with SkyPilot's variables for `stage` ("setup" or "run") over
    them, as SkyPilot lets its own win. The API computes those variables (shared/jobs/node_env.py)."""
    env = {str(key): "" if value is None else str(value) for key, value in (config.get("envs") or {}).items()}
    env.update({str(key): str(value) for key, value in (config.get(f"{stage}_env") or {}).items()})
    env["SKYLESS_ATTEMPT"] = str(config.get("attempt", 0))  # SKYPILOT_TASK_ID stays the same across attempts
    return env


# SkyPilot runs `bash -i script` so that ~/.bashrc is read past its usual "not interactive: return" guard.
# `--norc`: the script's own `source ~/.bashrc` reads it once, after the script's SIGTERM trap is set (an
# interactive bash would ignore a SIGTERM that came while it read ~/.bashrc on its own at start).
INTERACTIVE_BASH = ("bash", "--norc", "-i")
# What `bash -i` says on a node without a terminal; SkyPilot drops these lines from the log (run_with_log).
BASH_NOISE = (b"bash: cannot set terminal process group", b"bash: no job control in this shell")
# The wrapper's second line, once its SIGTERM trap is set (not in the log): before it, SIGTERM would be lost
# on an interactive bash, and nothing of the task has run yet, so stopping it is a kill.
STARTED_MARK = b"__skyless_task_started__\n"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def task_script(script: str, workdir: str, env: dict[str, str]) -> str:
    """SkyPilot's wrapper around a `setup` or `run` script (make_task_bash_script): ~/.bashrc first, conda's
    shell functions exported when conda is there, unbuffered Python, the workdir, then the task's variables
    exported over whatever ~/.bashrc set, then the script itself. Three lines are skyless's own, since
    skyless stops a task by signalling its process group where SkyPilot kills its process tree: `set +m` (an
    interactive bash running a file puts each command in a group of its own), a SIGTERM trap (an
    interactive bash ignores SIGTERM), and STARTED_MARK once that trap is set. A fourth turns history off: an
    interactive bash keeps every line, the exported secrets among them, and writes it to ~/.bash_history."""
    named = sorted((k, v) for k, v in env.items() if _ENV_NAME.fullmatch(k))
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in named)
    return (
        "#!/bin/bash\n"
        "set +m\n"  # no job control: every command stays in the task's process group, which signals reach
        "trap 'exit 143' TERM\n"
        f"echo {STARTED_MARK.decode().strip()}\n"
        "source ~/.bashrc\n"
        "set +o history; unset HISTFILE\n"  # an interactive bash would save the exports (secrets) to a file
        "set -a\n"
        ". $(conda info --base 2> /dev/null)/etc/profile.d/conda.sh > /dev/null 2>&1 || true\n"
        "set +a\n"
        "export PYTHONUNBUFFERED=1\n"
        f"cd {shlex.quote(workdir)}\n{exports}{script}\n"
    )


def output_pieces(stream: IO[bytes]) -> Iterator[bytes]:
    """The task's output cut after each `\\n`, `\\r\\n` or lone `\\r`, terminators kept, `bash -i`'s noise
    left out: a progress bar's redraws arrive as they are drawn, and print as SkyPilot prints them."""
    pending = b""
    read = getattr(stream, "read1", stream.read)
    while True:
        data = read(65536)
        pending += data
        cut = 0
        for match in re.finditer(rb"[^\r\n]*(?:\r\n|\n|\r(?=[^\n]))", pending):
            cut = match.end()
            if not match.group().startswith(BASH_NOISE):
                yield match.group()
        pending = pending[cut:]
        if not data:
            if pending and not pending.startswith(BASH_NOISE):
                yield pending
            return


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
        self.started = threading.Event()  # the running script has its SIGTERM trap (STARTED_MARK)

    def run(self, script: str, cwd: Path, env: dict[str, str], task_env: dict[str, str] | None = None) -> int:
        """Run `script` in `cwd` as SkyPilot does (`bash -i` on the wrapped script, see task_script) and
        answer its exit code. `task_env`: the task's own variables (SkyPilot's and the task file's), exported
        after ~/.bashrc; a container gets only these. On the host the wrapped script reaches bash through a
        pipe (`bash -i /dev/fd/N`): the values never touch a file."""
        task_env = dict(task_env or {})
        with self.lock:
            if self.terminated:
                return 143
            self.started = threading.Event()
            box = self.container
            fds: tuple[int, ...] = ()
            if box is not None:
                wrapped = task_script(script, box.workdir, {})
                argv = box.exec_argv(wrapped, list(task_env))
            else:
                home = Path(env.get("HOME") or Path.home())
                if not (home / ".bashrc").exists():  # as on a fresh VM's user, whose skeleton has one
                    with contextlib.suppress(OSError):
                        (home / ".bashrc").touch()
                read_end, write_end = os.pipe()
                wrapped = task_script(script, str(cwd), task_env)
                argv, fds = [*self.command_prefix, *INTERACTIVE_BASH, f"/dev/fd/{read_end}"], (read_end,)
            try:
                self.process = subprocess.Popen(
                    argv,
                    cwd=str(cwd),
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    start_new_session=not self.shares_agent_group,
                    pass_fds=fds,
                )
            except OSError:
                if fds:
                    os.close(write_end)
                raise
            finally:
                if fds:
                    os.close(read_end)
            if fds:
                threading.Thread(target=_feed, args=(write_end, wrapped), daemon=True).start()
        stdout = self.process.stdout
        assert stdout is not None
        for piece in output_pieces(stdout):
            if piece == STARTED_MARK:
                self.started.set()
                continue
            sys.stdout.buffer.write(piece)
            sys.stdout.flush()
            self.shipper.write(piece)
        return self.process.wait()

    def terminate(self) -> None:
        """SIGTERM the task's whole process group so it can checkpoint; no new script starts after."""
        with self.lock:
            self.terminated = True
            process = self.process
        if process is not None and process.poll() is None:
            name = "TERM" if self.started.is_set() else "KILL"
            if name == "TERM":
                self._signal_task(process, signal.SIGTERM)
            else:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()  # the wrapper alone: nothing of the task has started
            if self.container is not None:
                threading.Thread(target=self.container.signal, args=(name,), daemon=True).start()

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


def _feed(fd: int, text: str) -> None:
    with contextlib.suppress(OSError), os.fdopen(fd, "wb") as out:
        out.write(text.encode())
