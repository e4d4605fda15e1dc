"""The skyless node agent: fetch the task, run setup and run, ship logs, report status, watch for preemption.

Standard library only, Python >= 3.8: this one file is shipped to VMs inside user-data.
Started with SKYLESS_API_URL, SKYLESS_JOB_ID, SKYLESS_CLUSTER_ID, SKYLESS_INSTANCE_ID,
SKYLESS_BOOT_TOKEN (and optionally SKYLESS_NODE_IP, SKYLESS_CLOUD) in its environment; its working
directory is the node's home (the sandbox folder for the local cloud, ~ on a VM).

The boot token (from user-data) buys one config fetch for this node, bound to a key the agent makes at
start and keeps in memory; the answer carries the agent token it reports with. Nothing secret is written.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tarfile
import threading
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from node_agent.agent.api import (
    PREEMPT_GRACE_SECONDS,
    STOP_GRACE_SECONDS,
    AgentHttpError,
    AgentStopped,
    ApiClient,
    log,
)
from node_agent.agent.buckets import (
    CREDENTIAL_REFRESH_SECONDS,
    STORAGE_SYNC_SECONDS,
    BucketMirror,
    expires_in,
    write_credential_file,
)
from node_agent.agent.containers import Container, container_path, container_runtime
from node_agent.agent.logs import LogShipper
from node_agent.agent.mounts import clone_workdir, fetch_file_mounts, fetch_workdir, mount_path
from node_agent.agent.preemption import MetadataWatcher, metadata_watcher
from node_agent.agent.runner import TaskRunner, install_conda, run_script, skypilot_env
from node_agent.agent.sandbox import namespace_binds, namespace_command


class Agent:
    def __init__(self, env: dict[str, str], home: Path) -> None:
        self.job_id = env["SKYLESS_JOB_ID"]
        self.instance_id = env.get("SKYLESS_INSTANCE_ID", "")
        self.node_ip = env.get("SKYLESS_NODE_IP", "127.0.0.1")
        self.cloud = env.get("SKYLESS_CLOUD", "local")
        self.cluster_id = env.get("SKYLESS_CLUSTER_ID", "")
        self.watcher = metadata_watcher(self.cloud, env)
        self.home = home
        self.api = ApiClient(env["SKYLESS_API_URL"], self.job_id, self.instance_id, env["SKYLESS_BOOT_TOKEN"])
        self.preempted = threading.Event()
        self.finished = threading.Event()
        self.runner: TaskRunner | None = None
        self.preempting_report: threading.Thread | None = None
        self.cancelled = threading.Event()
        self.stopping = threading.Event()
        self.api.on_cancel = self.on_cancel
        self.mirrors: list[BucketMirror] = []
        self.mounted: list[dict[str, Any]] = []  # rclone mounts of a VM
        self.storage: list[dict[str, Any]] = []
        self.storage_lock = threading.Lock()
        self.api.on_stop = self.on_stop
        self.api.on_preempt = self.on_preemption_notice

    def on_preemption_notice(self, reason: str) -> None:
        """Pass SIGTERM to the task so it can checkpoint, and report `preempting` once. With buckets to
        write back, the node first writes back what the task has, then (once the task has stopped) what
        it wrote last, and only then lets go."""
        if self.preempted.is_set() or self.cancelled.is_set():
            return  # includes the SIGTERM the agent sent its own process group
        self.preempted.set()
        log(f"preemption notice: {reason}")
        if not self.api.has_agent_token:
            return  # before its config nothing runs, and the boot token opens only the config: the cloud's
            # own preemption event tells the control plane
        self.preempting_report = threading.Thread(
            target=self.let_go, args=(reason,), name="report-preempting", daemon=True
        )
        self.preempting_report.start()

    def let_go(self, reason: str) -> None:
        writes_back = any(e.get("write_back") for e in self.storage)
        if writes_back:
            self.write_back("the preemption notice", mounts=False)
        if self.runner is not None:
            self.runner.terminate()
            if writes_back:
                self.runner.wait(PREEMPT_GRACE_SECONDS)
                self.write_back("the task stopped")
        self.api.report("preempting", None, reason)

    def start_storage(self, config: dict[str, Any], env: dict[str, str], shipper: LogShipper) -> None:
        """Bring every bucket to its path before setup: rclone mounts on a VM, copies on the local cloud."""
        self.storage = list(config.get("storage") or [])
        for entry in self.storage:
            target = mount_path(entry["path"], self.home, self.cloud == "local")
            if entry.get("rclone") and self.cloud != "local":
                write_credential_file(entry)
                code, output = run_script(entry["rclone"]["mount"], {**env, **entry["rclone"]["env"]}, 600)
                if code != 0:
                    raise ValueError(f"mounting {entry['path']} failed: {output}")
                self.mounted.append(entry)
                continue
            mirror = BucketMirror(entry, target)
            count = mirror.pull()
            self.mirrors.append(mirror)
            url = "{}://{}/{}".format({"gcs": "gs"}.get(entry["store"], entry["store"]), entry["bucket"],
                                      entry.get("prefix") or "")  # fmt: skip
            shipper.write(
                f"skyless: {url} -> {entry['path']} ({entry['mode']}, {count} object(s))\n".encode()
            )
        if self.mounted or any(e.get("write_back") for e in self.storage):  # rclone needs fresh credentials
            threading.Thread(target=self.sync_storage, name="storage-sync", daemon=True).start()

    def sync_storage(self) -> None:
        while not self.finished.wait(STORAGE_SYNC_SECONDS) and not self.preempted.is_set():
            with contextlib.suppress(OSError, ValueError, AgentHttpError):
                if min(expires_in(e) for e in self.storage) < CREDENTIAL_REFRESH_SECONDS:
                    fresh = {e["path"]: e for e in self.api.storage_credentials()}
                    for entry in self.storage:
                        entry["credentials"] = fresh.get(entry["path"], entry)["credentials"]
                        if entry.get("rclone"):
                            write_credential_file(entry)
            self.write_back(mounts=False)  # rclone writes back on its own

    def write_back(self, why: str = "", mounts: bool = True) -> list[str]:
        """Write every write-back bucket back now; answer the errors (none: all landed). `mounts`: also wait
        for rclone's upload queues, which drain only once the task stops writing (rclone uploads a file a
        few seconds after its last change)."""
        errors = []
        with self.storage_lock:
            for mirror in self.mirrors:
                try:
                    count = mirror.push()
                except (OSError, AgentHttpError) as error:
                    errors.append(f"writing back {mirror.entry['path']} failed: {error}")
                    continue
                if why and count:
                    log(f"wrote back {count} change(s) of {mirror.entry['path']} on {why}")
            for entry in self.mounted if mounts else []:
                code, output = run_script(entry["rclone"]["flush"], dict(os.environ), PREEMPT_GRACE_SECONDS)
                if code != 0:
                    errors.append(f"writing back {entry['path']} failed: {output}")
        return errors

    def on_cancel(self) -> None:
        """The job ended elsewhere (cancelled, failed on another node): stop the task, report nothing more."""
        if self.cancelled.is_set():
            return
        self.cancelled.set()
        log("the API says this job is over; stopping the task")
        if self.runner is not None:
            self.runner.terminate()

    def on_stop(self, reason: str) -> None:
        """This node's attempt is over (the job recovered elsewhere, or this node is a stray): SIGTERM the
        task's process group, SIGKILL what is left after STOP_GRACE_SECONDS, and exit."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        self.cancelled.set()
        log(f"stopping: {reason}")
        if self.runner is not None:
            self.runner.terminate()
        threading.Thread(target=self._exit_after_grace, name="stop", daemon=True).start()

    def _exit_after_grace(self) -> None:
        if self.runner is not None:
            self.runner.wait(STOP_GRACE_SECONDS)
            self.runner.kill()
            flush = threading.Thread(target=self.runner.shipper.close, name="last-logs", daemon=True)
            flush.start()
            flush.join(5)
        self.finished.set()
        os._exit(0)  # whatever the main thread is doing (a download, a setup), this node is done

    def heartbeat(self, every: float) -> None:
        while not self.finished.wait(every) and not self.cancelled.is_set():
            self.api.report("heartbeat")

    def watch_metadata(self, watcher: MetadataWatcher) -> None:
        while not self.finished.is_set() and not self.preempted.is_set():
            notice = watcher.check()
            if notice:
                self.on_preemption_notice(notice)
                return
            self.finished.wait(watcher.pause())

    def run(self) -> int:
        if self.watcher is not None:  # from the start: a notice may come while the cluster is still forming
            watch = threading.Thread(
                target=self.watch_metadata, args=(self.watcher,), name="metadata", daemon=True
            )
            watch.start()
        config = self.api.fetch_config(stop=lambda: self.preempted.is_set() or self.cancelled.is_set())
        if config is None:
            log("stopped before the task started")
            return 143
        heartbeat_seconds = float(config.get("heartbeat_seconds") or 30)
        threading.Thread(
            target=self.heartbeat, args=(heartbeat_seconds,), name="heartbeat", daemon=True
        ).start()

        shipper = LogShipper(config.get("log_upload"), local_copy=self.home / "skyless_task.log")
        self.runner = TaskRunner(shipper)
        if self.preempted.is_set() or self.cancelled.is_set():
            return self.finish("failed", 143, None, shipper)
        workdir = self.home / "sky_workdir"
        env = dict(os.environ)
        for name in ("SKYLESS_BOOT_TOKEN", "SKYLESS_AGENT_TOKEN"):
            env.pop(name, None)
        stages = {stage: skypilot_env(config, stage) for stage in ("setup", "run")}
        setup_env, run_env = {**env, **stages["setup"]}, {**env, **stages["run"]}
        box = config.get("container")
        add_job_group_hosts(config)
        try:
            self.api.report("setting_up")
            try:
                if config.get("workdir_git"):
                    clone_workdir(config["workdir_git"], workdir)
                else:
                    fetch_workdir(config.get("workdir_url"), workdir)
                sandboxed = self.cloud == "local"
                mounts = config.get("file_mounts") or []
                paths = [m["path"] for m in mounts] + [e["path"] for e in config.get("storage") or []]
                binds = namespace_binds(paths, self.home) if sandboxed and not box else []
                if binds:
                    self.runner.command_prefix = namespace_command(binds, self.home, workdir)
                notes = fetch_file_mounts(mounts, self.home, sandboxed)
                if not binds:
                    for note in notes:
                        shipper.write(note.encode())
                self.start_storage(config, env, shipper)
            except (OSError, ValueError, tarfile.TarError, AgentHttpError, ElementTree.ParseError) as error:
                shipper.write((f"skyless: could not fetch the workdir or file mounts: {error}\n").encode())
                return self.finish("failed", 1, f"fetching workdir/file mounts failed: {error}", shipper)
            if self.preempted.is_set() or self.cancelled.is_set():
                return self.finish("failed", 143, None, shipper)
            if box:
                problem = self.start_container(box, config, paths, workdir, shipper)
                if problem:
                    shipper.write(f"skyless: {problem}\n".encode())
                    return self.finish("failed", 1, problem, shipper)
            problem = install_conda(env) if self.cloud != "local" and not box else None
            if problem:  # as SkyPilot's node, the task goes on: what calls conda fails saying so
                shipper.write(f"skyless: {problem}\n".encode())
            if config.get("setup"):
                code = self.runner.run(config["setup"], workdir, setup_env, stages["setup"])
                if code != 0:
                    return self.finish("setup_failed", code, f"setup exited with {code}", shipper)
            if not self.preempted.is_set() and not self.cancelled.is_set():
                self.api.report("running")
            code = self.runner.run(config["run"], workdir, run_env, stages["run"]) if config.get("run") else 0
            return self.finish("succeeded" if code == 0 else "failed", code, None, shipper)
        finally:
            self.finished.set()

    def start_container(
        self,
        box: dict[str, Any],
        config: dict[str, Any],
        paths: list[str],
        workdir: Path,
        shipper: LogShipper,
    ) -> str | None:
        """Log in (the password goes on stdin), start the node's container with the workdir and mounts
        bound in, and forget the login (the pull is done); answer what went wrong, or None."""
        runtime = container_runtime()
        if runtime is None:
            return (
                f"image_id docker:{box['image']}: no container runtime (docker or podman) works on this node"
            )
        logins = self.home / ".skyless-registry"  # not the user's own docker login; removed once pulled
        env = dict(os.environ)
        name = "".join(
            c if c.isalnum() or c in "_.-" else "-" for c in f"skyless-{self.job_id}-{self.instance_id}"
        )
        sandboxed = self.cloud == "local"
        binds = [[str(workdir), container_path("~/sky_workdir")]]
        binds += [[str(mount_path(p, self.home, sandboxed)), container_path(p)] for p in paths]
        gpus = int(config.get("gpus_per_node") or 0) > 0 and not sandboxed
        container = Container(runtime, name, box["image"], binds, gpus, box.get("run_options"))
        container.remove()  # an earlier agent's, on this node
        labels = {"skyless-job": self.job_id, "skyless-cluster": self.cluster_id}
        steps: list[tuple[list[str], str | None]] = [(container.run_argv(labels), None)]
        if box.get("registry"):
            password = str((config.get("envs") or {}).get("SKYPILOT_DOCKER_PASSWORD") or "")
            login = [runtime, "login", "--username", box["username"], "--password-stdin", box["registry"]]
            steps.insert(0, (login, password))
            env.update(DOCKER_CONFIG=str(logins), REGISTRY_AUTH_FILE=str(logins / "auth.json"))
        workdir.mkdir(parents=True, exist_ok=True)
        try:
            for argv, stdin in steps:
                try:
                    done = subprocess.run(
                        argv, input=(stdin or "").encode(), capture_output=True, timeout=3600, env=env
                    )
                except (OSError, subprocess.TimeoutExpired) as error:
                    return f"{runtime} {argv[1]} failed for {box['image']}: {error}"
                shipper.write(done.stderr[-2000:])
                if done.returncode != 0:
                    return f"{runtime} {argv[1]} failed for {box['image']}: {done.stderr.decode()[-300:]}"
        finally:
            shutil.rmtree(logins, ignore_errors=True)
        if self.runner is not None:
            self.runner.container = container
        return None

    def finish(self, phase: str, code: int, message: str | None, shipper: LogShipper) -> int:
        if self.runner is not None and self.runner.container is not None:
            self.runner.container.remove()
        if not self.preempted.is_set():
            errors = self.write_back("the end of the task")  # before the node lets go
            for error in errors:
                shipper.write(f"skyless: {error}\n".encode())
            if errors and phase == "succeeded":
                phase, code, message = "failed", 1, "; ".join(errors)
        shipper.close()
        if self.preempted.is_set():
            # The task ended because its node is going away: that is a preemption, not the task's result.
            log(f"task stopped after the preemption notice (exit {code})")
            if self.preempting_report is not None:
                self.preempting_report.join(PREEMPT_GRACE_SECONDS + 60)
            return code
        if self.cancelled.is_set():
            log(f"task stopped because the job is over (exit {code})")
            return code
        self.api.report(phase, code, message)
        return code


def add_job_group_hosts(config: dict[str, Any], hosts_file: Path = Path("/etc/hosts")) -> bool:
    """Make a job group's `<task>-<rank>.<group>` names resolve on a VM, as SkyPilot does: add the lines
    the API sent (SKYLESS_JOBGROUP_HOSTS) to /etc/hosts once. Never on the local cloud, whose nodes share
    the machine's own hosts file; nowhere the file cannot be written (not root). True when written."""
    lines = str((config.get("run_env") or {}).get("SKYLESS_JOBGROUP_HOSTS") or "").splitlines()
    if not lines or config.get("cloud") == "local" or not os.access(hosts_file, os.W_OK):
        return False
    try:
        present = set(hosts_file.read_text().splitlines())
        missing = [line for line in lines if line not in present]
        if missing:
            with hosts_file.open("a") as out:
                out.write("\n# skyless job group\n" + "\n".join(missing) + "\n")
    except OSError as error:
        log(f"could not add the job group's hosts: {error}")
        return False
    return True


def main() -> int:
    home = Path(os.environ.get("SKYLESS_NODE_HOME") or os.getcwd())
    missing = [
        name
        for name in ("SKYLESS_API_URL", "SKYLESS_JOB_ID", "SKYLESS_BOOT_TOKEN")
        if not os.environ.get(name)
    ]
    if missing:
        log("missing environment: {}".format(", ".join(missing)))
        return 2
    agent = Agent(dict(os.environ), home)

    def on_sigterm(signum: int, frame: Any) -> None:
        agent.on_preemption_notice("SIGTERM")

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        code = agent.run()
    except AgentStopped as error:
        log(f"stopping before the task started: {error}")
        return 0
    except AgentHttpError as error:
        log(f"the API refused this node: {error}")
        return 3
    if agent.preempting_report is not None:
        agent.preempting_report.join(30)
    if agent.preempted.is_set() and agent.runner is not None:
        agent.runner.wait(PREEMPT_GRACE_SECONDS)
        agent.runner.kill()
    for entry in agent.mounted:
        run_script(entry["rclone"]["unmount"], dict(os.environ), 60)
    if agent.preempted.is_set() and agent.watcher is not None:
        agent.watcher.acknowledge()  # the task and its buckets have let go: the cloud may take the node now
    return 0 if code == 0 else 1
