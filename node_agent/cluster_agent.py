"""A named cluster's node agent (SKYLESS_AGENT_MODE=cluster): it stays up between jobs, polls the API for
work, runs each job it is given, reports each job's phases, and tells the API how many shells are open on the
node (so that autostop leaves a node in use alone). Run as `python -m node_agent.cluster_agent` (the local
cloud) or `python3 /opt/skyless/cluster_agent.py` (a VM), with agent.py's environment plus
SKYLESS_AGENT_MODE=cluster and SKYLESS_CLUSTER_KEY.

Standard library only, as agent.py, whose pieces it uses. It is not in a job's user-data (EC2 allows 16 KB):
a cluster node's user-data downloads both files from the API (`GET /node-agent/<file>`).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import tarfile
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:
    from node_agent.agent import (
        AgentHttpError,
        LogShipper,
        TaskRunner,
        clone_workdir,
        fetch_file_mounts,
        fetch_workdir,
        http_request,
        install_conda,
        log,
        skypilot_env,
        with_retries,
    )
except ImportError:  # on a VM: /opt/skyless/agent.py beside this file
    from agent import (  # type: ignore[no-redef]
        AgentHttpError,
        LogShipper,
        TaskRunner,
        clone_workdir,
        fetch_file_mounts,
        fetch_workdir,
        http_request,
        install_conda,
        log,
        skypilot_env,
        with_retries,
    )


class ClusterApi:
    """The agent side of the cluster agent protocol: poll for work, report each job's phases."""

    def __init__(self, api_url: str, key: str, instance_id: str, token: str) -> None:
        self.base = "{}/cluster-agent/{}".format(api_url.rstrip("/"), urllib.parse.quote(key))
        self.instance_id = instance_id
        self.headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}

    def claim(self, node_key: str, stop: Callable[[], bool]) -> str | None:
        """Trade the boot token (these headers) for the cluster's agent token, once per node, bound to
        `node_key`; waits while the API answers 425. None when `stop()` turns true while waiting."""
        headers = {**self.headers, "X-Skyless-Node-Key": node_key}
        data = json.dumps({"instance_id": self.instance_id}).encode("utf-8")
        pause = 1.0
        while not stop():
            try:
                status, body = with_retries(
                    lambda: http_request(self.base + "/claim", method="POST", body=data, headers=headers)
                )
            except OSError as error:
                log(f"claim failed: {error}")
                status, body = 0, b""
            if status == 200:
                return str(json.loads(body.decode("utf-8"))["agent_token"])
            if status in (400, 401, 403, 404):
                raise AgentHttpError(status, body.decode("utf-8", "replace"))
            time.sleep(pause)
            pause = min(pause * 1.5, 5.0)
        return None

    def use_token(self, token: str) -> None:
        self.headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}

    def _post(self, path: str, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        data = json.dumps({"instance_id": self.instance_id, **payload}).encode("utf-8")
        status, body = with_retries(
            lambda: http_request(self.base + path, method="POST", body=data, headers=self.headers),
            attempts=3,
        )
        try:
            answer = json.loads(body.decode("utf-8") or "{}")
        except ValueError:
            answer = {}
        return status, answer if isinstance(answer, dict) else {}

    def poll(self, have: list[int], running: list[int], sessions: int) -> dict[str, Any] | None:
        """The API's answer; None when it could not be reached (ask again later). AgentHttpError when
        it refuses this node (the cluster is gone, or this is not one of its nodes): the agent exits."""
        try:
            status, answer = self._post("/poll", {"have": have, "running": running, "sessions": sessions})
        except OSError as error:
            log(f"poll failed: {error}")
            return None
        if status in (401, 403, 404):
            raise AgentHttpError(status, json.dumps(answer))
        return answer if status == 200 else None

    def report(self, job: int, phase: str, exit_code: int | None = None, message: str | None = None) -> bool:
        """POST a job's phase on this node; True when the API says the job goes on (False: stop it)."""
        payload: dict[str, Any] = {"phase": phase}
        if exit_code is not None:
            payload["exit_code"] = exit_code
        if message:
            payload["message"] = message[:2000]
        try:
            status, answer = self._post(f"/jobs/{int(job)}/status", payload)
        except OSError as error:
            log(f"could not report job {job} {phase}: {error}")
            return True
        if status >= 300:
            log(f"job {job} {phase} answered HTTP {status}")
            return status != 404
        return not answer.get("cancel")


def count_ssh_connections(paths: tuple[str, ...] = ("/proc/net/tcp", "/proc/net/tcp6")) -> int:
    """Established TCP connections to local port 22 (sshd's sessions), from the kernel's tables."""
    count = 0
    for path in paths:
        try:
            lines = Path(path).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == "01" and fields[1].rsplit(":", 1)[-1] == "0016":
                count += 1
    return count


def count_session_files(folder: Path) -> int:
    """Shells registered under `folder` (one file per shell, named by its pid) that are still alive."""
    count = 0
    for entry in folder.glob("*") if folder.is_dir() else []:
        try:
            os.kill(int(entry.name), 0)
        except ValueError:
            continue
        except PermissionError:
            count += 1
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                entry.unlink()
        else:
            count += 1
    return count


def install_ssh_keys(home: Path, keys: list[str]) -> None:
    """Add the public keys the control plane names to ~/.ssh/authorized_keys (once each)."""
    folder = home / ".ssh"
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / "authorized_keys"
    present = set(path.read_text().splitlines()) if path.exists() else set()
    missing = [key.strip() for key in keys if key.strip() and key.strip() not in present]
    if missing:
        with open(str(path), "a") as out:
            out.write("".join(key + "\n" for key in missing))
    if path.exists():
        os.chmod(str(path), 0o600)


class ClusterAgent:
    """A node of a named cluster: it stays up between jobs, polls the API for work, runs each job it is
    given (side by side when the control plane starts several), reports each job's phases, and tells
    the API how many shells are open on the node (so autostop leaves a node in use alone)."""

    def __init__(self, env: dict[str, str], home: Path) -> None:
        self.home = home
        self.cloud = env.get("SKYLESS_CLOUD", "local")
        self.api = ClusterApi(
            env["SKYLESS_API_URL"],
            env.get("SKYLESS_CLUSTER_KEY") or env["SKYLESS_JOB_ID"],
            env.get("SKYLESS_INSTANCE_ID", ""),
            env.get("SKYLESS_BOOT_TOKEN", ""),
        )
        self.state_dir = home / ".skyless"
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.started_file = self.state_dir / "started-jobs.json"
        self.started: set[int] = set(self._load_started())
        self.runners: dict[int, TaskRunner] = {}
        self.stopped: set[int] = set()  # jobs the API said to stop: no report after
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.exiting = threading.Event()
        self.ssh_keys: list[str] = []
        base = dict(os.environ)
        for name in ("SKYLESS_BOOT_TOKEN", "SKYLESS_AGENT_TOKEN"):
            base.pop(name, None)
        self.base_env = base
        self.token_file = self.state_dir / "cluster-token"

    def agent_token(self) -> str | None:
        """The cluster's agent token: kept from an earlier boot (a stopped node boots again long after its
        boot token expired), else claimed with the boot token and kept, readable by this user only."""
        try:
            kept = self.token_file.read_text().strip()
        except OSError:
            kept = ""
        if kept:
            return kept
        token = self.api.claim(secrets.token_hex(32), stop=self.exiting.is_set)
        if token is not None:
            fd = os.open(str(self.token_file), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(token)
        return token

    def _load_started(self) -> list[int]:
        try:
            return [int(n) for n in json.loads(self.started_file.read_text())]
        except (OSError, ValueError, TypeError):
            return []

    def _save_started(self) -> None:
        temporary = self.started_file.with_suffix(".tmp")
        temporary.write_text(json.dumps(sorted(self.started)[-500:]))
        temporary.replace(self.started_file)

    def sessions(self) -> int:
        count = count_session_files(self.state_dir / "sessions")
        if self.cloud != "local":
            count += count_ssh_connections()
        return count

    def run(self) -> int:
        try:
            token = self.agent_token()
        except AgentHttpError as error:
            log(f"the API refused this node's claim: {error}")
            return 3
        if token is None:
            return 0
        self.api.use_token(token)
        poll_seconds = 2.0
        while not self.exiting.is_set():
            with self.lock:
                running = sorted(self.runners)
                have = sorted(self.started)[-200:]
            try:
                answer = self.api.poll(have, running, self.sessions())
            except AgentHttpError as error:
                log(f"the API refused this node: {error}")
                self.stop_all()
                return 3
            if answer is not None:
                poll_seconds = float(answer.get("poll_seconds") or poll_seconds)
                if answer.get("exit"):
                    log(f"the cluster is {answer.get('state')}: stopping")
                    self.stop_all()
                    return 0
                self.apply(answer)
            self.wake.wait(poll_seconds)
            self.wake.clear()
        self.stop_all()
        return 0

    def apply(self, answer: dict[str, Any]) -> None:
        keys = [str(k) for k in answer.get("ssh_keys") or []]
        if keys and keys != self.ssh_keys and self.cloud != "local":
            install_ssh_keys(self.home, keys)
            self.ssh_keys = keys
        for number in answer.get("cancel") or []:
            self.stop_job(int(number))
        for config in answer.get("start") or []:
            number = int(config["job"])
            with self.lock:
                if number in self.started:
                    continue
                self.started.add(number)
                self._save_started()
            threading.Thread(target=self.run_job, args=(config,), name=f"job-{number}", daemon=True).start()

    def stop_job(self, number: int) -> None:
        with self.lock:
            runner = self.runners.get(number)
            self.stopped.add(number)
        if runner is not None:
            log(f"stopping job {number}")
            runner.terminate()

    def stop_all(self) -> None:
        """End every job's processes (a stopping node must leave nothing behind)."""
        self.exiting.set()
        with self.lock:
            runners = list(self.runners.items())
            self.stopped.update(number for number, _ in runners)
        for _, runner in runners:
            runner.terminate()
        for _, runner in runners:
            runner.wait(3)
            runner.kill()

    def run_job(self, config: dict[str, Any]) -> None:
        number = int(config["job"])
        jobs_dir = self.state_dir / "jobs"
        jobs_dir.mkdir(exist_ok=True)
        shipper = LogShipper(config.get("log_upload"), local_copy=jobs_dir / f"{number}.log")
        runner = TaskRunner(shipper)
        runner.shares_agent_group = False  # each job in a session of its own: a cancel stops that job only
        with self.lock:
            self.runners[number] = runner
        try:
            self._run_job(number, config, runner, shipper)
        except Exception as error:  # a bug must not take the node's other jobs down with it
            log(f"job {number} crashed the agent's runner: {error!r}")
            self._finish(number, "failed", 1, f"agent error: {error!r}", shipper)
        finally:
            with self.lock:
                self.runners.pop(number, None)
            self.wake.set()

    def _run_job(self, number: int, config: dict[str, Any], runner: TaskRunner, shipper: LogShipper) -> None:
        workdir = self.home / "sky_workdir"
        setup = config.get("setup")
        if not self.api.report(number, "setting_up" if setup else "running"):
            self.stop_job(number)
            return self._finish(number, "failed", 143, None, shipper)
        try:
            if config.get("workdir_git"):
                clone_workdir(config["workdir_git"], workdir)
            else:
                fetch_workdir(config.get("workdir_url"), workdir)
            for note in fetch_file_mounts(config.get("file_mounts") or [], self.home, self.cloud == "local"):
                shipper.write(note.encode())
        except (OSError, ValueError, tarfile.TarError, AgentHttpError) as error:
            shipper.write((f"skyless: could not fetch the workdir or file mounts: {error}\n").encode())
            phase = "setup_failed" if setup else "failed"
            return self._finish(number, phase, 1, f"fetching workdir/file mounts failed: {error}", shipper)
        problem = install_conda(self.base_env) if self.cloud != "local" else None  # once: conda stays
        if problem:
            shipper.write(f"skyless: {problem}\n".encode())
        if setup:
            setup_env = skypilot_env(config, "setup")
            code = runner.run(setup, workdir, {**self.base_env, **setup_env}, setup_env)
            if code != 0:
                return self._finish(number, "setup_failed", code, f"setup exited with {code}", shipper)
            if number not in self.stopped and not self.api.report(number, "running"):
                self.stop_job(number)
        run = config.get("run")
        run_env = skypilot_env(config, "run")
        code = runner.run(run, workdir, {**self.base_env, **run_env}, run_env) if run else 0
        return self._finish(number, "succeeded" if code == 0 else "failed", code, None, shipper)

    def _finish(self, number: int, phase: str, code: int, message: str | None, shipper: LogShipper) -> None:
        shipper.close()
        with self.lock:
            stopped = number in self.stopped
        if stopped:
            log(f"job {number} stopped (exit {code})")
            return
        self.api.report(number, phase, code, message)


def run_cluster_agent(home: Path) -> int:
    """A named cluster's node: SIGTERM (the node is stopping) ends every job's processes, then the agent."""
    agent = ClusterAgent(dict(os.environ), home)

    def on_sigterm(signum: int, frame: Any) -> None:
        agent.exiting.set()
        agent.wake.set()

    signal.signal(signal.SIGTERM, on_sigterm)
    return agent.run()


def main() -> int:
    home = Path(os.environ.get("SKYLESS_NODE_HOME") or os.getcwd())
    needed = ("SKYLESS_API_URL", "SKYLESS_CLUSTER_KEY", "SKYLESS_BOOT_TOKEN")
    missing = [name for name in needed if not os.environ.get(name)]
    if missing:
        log("missing environment: {}".format(", ".join(missing)))
        return 2
    return run_cluster_agent(home)


if __name__ == "__main__":
    raise SystemExit(main())
